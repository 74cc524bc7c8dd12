//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// TestDeployOverlaysDryRun applies every kustomize overlay of deploy/ to the
// real apiserver with --dry-run=server: schema, defaulting and admission
// (but no controllers) check each object. The namespace exists first, as it
// would after a first apply; cert-manager's CRDs are stand-ins.
func TestDeployOverlaysDryRun(t *testing.T) {
	env := framework.New(t, framework.Config{})
	ctx := ctxFor(t, 5*time.Minute)
	// monitoring: where replace-prometheus-adapter installs (it leaves the
	// namespace to its owner).
	for _, ns := range []string{framework.AdapterNamespace, "monitoring"} {
		if err := env.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
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
	if len(dirs) < 5 {
		t.Fatalf("found overlays %v, want at least ha, replace-prometheus-adapter, tls-cert-manager, tls-secret", dirs)
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
			// The RoleBinding to extension-apiserver-authentication-reader
			// only works in kube-system, whatever namespace the rest is in.
			rendered, err := env.Kubectl(ctx, "kustomize", filepath.Join(deployCopy, d))
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeObjects([]byte(rendered))
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, o := range objs {
				if o.GetKind() == "RoleBinding" && o.GetName() == "promscaler-adapter:auth-reader" {
					found = true
					if o.GetNamespace() != "kube-system" {
						t.Errorf("deploy/%s puts RoleBinding %s in namespace %q, want kube-system", d, o.GetName(), o.GetNamespace())
					}
				}
			}
			if !found {
				t.Errorf("deploy/%s has no RoleBinding promscaler-adapter:auth-reader", d)
			}
		})
	}

	// Every component added to the tls-secret overlay (where its comment
	// says): four APIServices, each with the caBundle, as the overlay's
	// patches run after its components.
	allAPIs := filepath.Join(deployCopy, "overlays", "all-apis")
	if err := copyTree(filepath.Join(deployCopy, "overlays", "tls-secret"), allAPIs); err != nil {
		t.Fatal(err)
	}
	kfile := filepath.Join(allAPIs, "kustomization.yaml")
	k, err := os.ReadFile(kfile)
	if err != nil {
		t.Fatal(err)
	}
	k = []byte(strings.Replace(string(k), "# components:\n# - ../../components/external-metrics\n# - ../../components/resource-metrics\n",
		"components:\n- ../../components/external-metrics\n- ../../components/resource-metrics\n- ../../components/system-cluster-critical\n- ../../components/team-rules\n", 1))
	if !strings.Contains(string(k), "\ncomponents:\n") {
		t.Fatalf("the tls-secret overlay no longer has the commented components list this test enables:\n%s", k)
	}
	if err := os.WriteFile(kfile, k, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir          string
		apiServices  int
		priorityCrit bool
	}{
		{"overlays/tls-secret", 2, false},
		{"overlays/all-apis", 4, true},
	} {
		t.Run(tc.dir+" caBundle", func(t *testing.T) {
			out, err := env.Kubectl(ctx, "kustomize", filepath.Join(deployCopy, tc.dir))
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(out, "kind: APIService"); n != tc.apiServices {
				t.Errorf("rendered %s has %d APIServices, want %d", tc.dir, n, tc.apiServices)
			}
			if n := strings.Count(out, "caBundle: "); n != tc.apiServices {
				t.Errorf("rendered %s has %d caBundle fields, want %d (one per APIService)", tc.dir, n, tc.apiServices)
			}
			if strings.Contains(out, "insecureSkipTLSVerify: true") {
				t.Errorf("rendered %s still skips TLS verification", tc.dir)
			}
			if got := strings.Contains(out, "priorityClassName: system-cluster-critical"); got != tc.priorityCrit {
				t.Errorf("rendered %s: priorityClassName system-cluster-critical present = %v, want %v", tc.dir, got, tc.priorityCrit)
			}
			if _, err := env.Kubectl(ctx, "apply", "--dry-run=server", "-k", filepath.Join(deployCopy, tc.dir)); err != nil {
				t.Errorf("dry-run apply of %s: %v", tc.dir, err)
			}
		})
	}
}

// apiServiceBackend returns "<namespace>/<name>" of the Service an APIService
// points at, or "" when it has none (or is missing).
func apiServiceBackend(ctx context.Context, t *testing.T, env *framework.Env, name string) string {
	t.Helper()
	out, err := env.Kubectl(ctx, "get", "apiservice", name, "--ignore-not-found",
		"-o", "jsonpath={.spec.service.namespace}/{.spec.service.name}")
	if err != nil {
		t.Fatal(err)
	}
	if out == "/" {
		return ""
	}
	return out
}

// TestDeployBaseLeavesOtherAPIServices applies deploy/base to a cluster where
// metrics-server holds metrics.k8s.io and KEDA external.metrics.k8s.io: the
// base registers the custom metrics API only and leaves both alone.
func TestDeployBaseLeavesOtherAPIServices(t *testing.T) {
	env := framework.New(t, framework.Config{})
	ctx := ctxFor(t, 3*time.Minute)
	others := map[string]string{
		"v1beta1.metrics.k8s.io":          "kube-system/metrics-server",
		"v1beta1.external.metrics.k8s.io": "keda/keda-operator-metrics-apiserver",
	}
	for name, backend := range others {
		ns, svc, _ := strings.Cut(backend, "/")
		group, version := name[strings.Index(name, ".")+1:], name[:strings.Index(name, ".")]
		manifest := fmt.Sprintf(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: %s
spec:
  group: %s
  version: %s
  groupPriorityMinimum: 100
  versionPriority: 100
  insecureSkipTLSVerify: true
  service: {namespace: %s, name: %s, port: 443}
`, name, group, version, ns, svc)
		f := filepath.Join(t.TempDir(), "apiservice.yaml")
		if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := env.Kubectl(ctx, "apply", "-f", f); err != nil {
			t.Fatalf("creating %s: %v\n%s", name, err, out)
		}
	}
	if out, err := env.Kubectl(ctx, "apply", "--server-side", "-k", filepath.Join(env.RepoRoot, "deploy", "base")); err != nil {
		t.Fatalf("applying deploy/base: %v\n%s", err, out)
	}
	for name, backend := range others {
		if got := apiServiceBackend(ctx, t, env, name); got != backend {
			t.Errorf("after applying deploy/base, %s points at %q, want %q (left alone)", name, got, backend)
		}
	}
	for _, name := range []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io"} {
		if got, want := apiServiceBackend(ctx, t, env, name), "promscaler/promscaler-adapter"; got != want {
			t.Errorf("after applying deploy/base, %s points at %q, want %q", name, got, want)
		}
	}
}

// TestDeployReplacePrometheusAdapter applies the replace-prometheus-adapter
// overlay over a prometheus-adapter install as the community chart leaves
// it (release "prometheus-adapter" in namespace monitoring): the APIServices
// keep pointing at the same Service, whose selector now takes the old and the
// new adapter's pods, and the new Deployment's pods carry that label.
func TestDeployReplacePrometheusAdapter(t *testing.T) {
	env := framework.New(t, framework.Config{})
	ctx := ctxFor(t, 3*time.Minute)
	if err := env.EnsureNamespace(ctx, "monitoring"); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "old.yaml")
	if err := os.WriteFile(old, []byte(`apiVersion: v1
kind: Service
metadata:
  name: prometheus-adapter
  namespace: monitoring
spec:
  selector:
    app.kubernetes.io/name: prometheus-adapter
    app.kubernetes.io/instance: prometheus-adapter
  ports:
  - {port: 443, protocol: TCP, targetPort: https}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.custom.metrics.k8s.io
spec:
  service: {name: prometheus-adapter, namespace: monitoring}
  group: custom.metrics.k8s.io
  version: v1beta1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(ctx, "apply", "-f", old); err != nil {
		t.Fatalf("creating the old install: %v\n%s", err, out)
	}
	overlay := filepath.Join(env.RepoRoot, "deploy", "overlays", "replace-prometheus-adapter")
	out, err := env.Kubectl(ctx, "apply", "-k", overlay)
	if err != nil {
		t.Fatalf("applying the overlay: %v\n%s", err, out)
	}
	if strings.Contains(out, "namespace/") {
		t.Errorf("the overlay applied a Namespace (monitoring is not the adapter's to own):\n%s", out)
	}
	for _, name := range []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io"} {
		if got, want := apiServiceBackend(ctx, t, env, name), "monitoring/prometheus-adapter"; got != want {
			t.Errorf("%s points at %q, want %q", name, got, want)
		}
	}
	selector, err := env.Kubectl(ctx, "-n", "monitoring", "get", "service", "prometheus-adapter", "-o", "jsonpath={.spec.selector}")
	if err != nil {
		t.Fatal(err)
	}
	podLabels, err := env.Kubectl(ctx, "-n", "monitoring", "get", "deployment", "promscaler-adapter", "-o", "jsonpath={.spec.template.metadata.labels}")
	if err != nil {
		t.Fatal(err)
	}
	var sel, labels map[string]string
	if err := json.Unmarshal([]byte(selector), &sel); err != nil {
		t.Fatalf("Service selector %q: %v", selector, err)
	}
	if err := json.Unmarshal([]byte(podLabels), &labels); err != nil {
		t.Fatalf("pod labels %q: %v", podLabels, err)
	}
	if diff := cmp.Diff(map[string]string{"app.kubernetes.io/name": "prometheus-adapter"}, sel); diff != "" {
		t.Errorf("Service selector (-want +got), should take the old (instance prometheus-adapter) and new pods alike:\n%s", diff)
	}
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("new pods' labels %v do not match the Service selector %v", labels, sel)
		}
	}
	if labels["app.kubernetes.io/instance"] == "prometheus-adapter" {
		t.Errorf("new pods' labels %v would be adopted by the old Deployment's selector", labels)
	}
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
