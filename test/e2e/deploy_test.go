//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// TestDeployOverlaysDryRun applies every kustomize overlay of deploy/ to the
// real apiserver with --dry-run=server: schema, defaulting and admission
// (but no controllers) check each object. The namespace exists first, as it
// would after a first apply; cert-manager's CRDs are stand-ins.
func TestDeployOverlaysDryRun(t *testing.T) {
	env := framework.New(t, framework.Config{})
	ctx := ctxFor(t, 5*time.Minute)
	if err := env.EnsureNamespace(ctx, framework.AdapterNamespace); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kubectl(ctx, "apply", "-f", testdata("cert-manager-crds.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/issuers.cert-manager.io", "crd/certificates.cert-manager.io"); err != nil {
		t.Fatal(err)
	}

	// The tls-secret overlay reads certificates from its certs/ folder: work
	// on a copy of deploy/ with a throwaway set.
	deployCopy := filepath.Join(t.TempDir(), "deploy")
	if err := copyTree(filepath.Join(env.RepoRoot, "deploy"), deployCopy); err != nil {
		t.Fatal(err)
	}
	if err := framework.WriteServingSet(filepath.Join(deployCopy, "overlays", "tls-secret", "certs"),
		"promscaler-adapter.promscaler.svc"); err != nil {
		t.Fatal(err)
	}

	dirs := []string{"base"}
	overlays, err := os.ReadDir(filepath.Join(deployCopy, "overlays"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range overlays {
		if o.IsDir() {
			dirs = append(dirs, filepath.Join("overlays", o.Name()))
		}
	}
	if len(dirs) < 4 {
		t.Fatalf("found overlays %v, want at least ha, tls-cert-manager, tls-secret", dirs)
	}
	for _, d := range dirs {
		t.Run(d, func(t *testing.T) {
			out, err := env.Kubectl(ctx, "apply", "--dry-run=server", "-k", filepath.Join(deployCopy, d))
			if err != nil {
				t.Fatalf("dry-run apply of deploy/%s: %v\n%s", d, err, out)
			}
			for _, want := range []string{"deployment.apps/promscaler-adapter", "apiservice.apiregistration.k8s.io/v1beta2.custom.metrics.k8s.io"} {
				if !strings.Contains(out, want) {
					t.Errorf("deploy/%s: output lacks %q:\n%s", d, want, out)
				}
			}
		})
	}

	t.Run("tls-secret caBundle", func(t *testing.T) {
		out, err := env.Kubectl(ctx, "kustomize", filepath.Join(deployCopy, "overlays", "tls-secret"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out, "caBundle: "); n != 4 {
			t.Errorf("rendered tls-secret overlay has %d caBundle fields, want 4 (one per APIService)", n)
		}
		if strings.Contains(out, "insecureSkipTLSVerify: true") {
			t.Errorf("rendered tls-secret overlay still skips TLS verification")
		}
	})
}

// copyTree copies a directory tree of regular files.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
