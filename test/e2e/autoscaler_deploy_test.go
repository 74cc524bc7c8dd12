//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// TestAutoscalerManifestsDryRun applies the autoscaler's manifests, the
// kustomize component and the Helm chart with autoscaler.enabled, to the
// real apiserver with --dry-run=server (schema, defaulting, admission).
// The coexistence e2e runs with the component's RBAC for real.
func TestAutoscalerManifestsDryRun(t *testing.T) {
	env := framework.New(t, framework.Config{})
	ctx := ctxFor(t, 3*time.Minute)
	if err := env.EnsureNamespace(ctx, "promscaler"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"deployment.apps/promscaler-autoscaler",
		"clusterrole.rbac.authorization.k8s.io/promscaler-autoscaler",
		"poddisruptionbudget.policy/promscaler-autoscaler",
		"role.rbac.authorization.k8s.io/promscaler-autoscaler-leader-election",
		"service/promscaler-autoscaler-metrics",
	}
	// applyDryRun applies with --dry-run=server and checks every object of
	// want went through.
	applyDryRun := func(t *testing.T, what string, args ...string) {
		t.Helper()
		out, err := env.Kubectl(ctx, append([]string{"apply", "--dry-run=server"}, args...)...)
		if err != nil {
			t.Fatalf("dry-run apply of %s: %v\n%s", what, err, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	}

	t.Run("component", func(t *testing.T) {
		// A kustomization next to deploy/ using the component alone.
		root := t.TempDir()
		if err := copyTree(filepath.Join(env.RepoRoot, "deploy"), filepath.Join(root, "deploy")); err != nil {
			t.Fatal(err)
		}
		k := filepath.Join(root, "use")
		if err := os.MkdirAll(k, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(k, "kustomization.yaml"), []byte(
			"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n- ../deploy/components/autoscaler\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		applyDryRun(t, "the component", "-k", k)
	})

	t.Run("helm chart", func(t *testing.T) {
		helm := env.Tool("helm")
		if _, err := os.Stat(helm); err != nil {
			t.Skipf("no helm in the tools dir (hack/tools.sh helm): %v", err)
		}
		out, err := exec.CommandContext(ctx, helm, "template", "promscaler", filepath.Join(env.RepoRoot, "charts", "promscaler"),
			"--namespace", "promscaler", "--set", "autoscaler.enabled=true", "--show-only", "templates/autoscaler.yaml").Output()
		if err != nil {
			t.Fatalf("helm template: %v", err)
		}
		f := filepath.Join(t.TempDir(), "chart.yaml")
		if err := os.WriteFile(f, out, 0o600); err != nil {
			t.Fatal(err)
		}
		applyDryRun(t, "the chart's autoscaler", "-f", f)
	})
}
