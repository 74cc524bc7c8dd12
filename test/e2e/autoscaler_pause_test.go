//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/promscaler/promscaler/pkg/scaletozero"
	"github.com/promscaler/promscaler/test/e2e/framework"
)

// kcmHPAUser is kube-controller-manager's HPA controller as the API server
// sees it (--use-service-account-credentials).
const kcmHPAUser = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"

// unserved is an external metric nobody serves.
var unserved = autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
	Metric: autoscalingv2.MetricIdentifier{Name: "unserved"},
	Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(10, resource.DecimalSI)},
}}

// TestAutoscalerPause: the pause annotations beside the real
// kube-controller-manager, with the promscaler-pause admission policy of
// deploy/components/autoscaler-pause. No metrics are needed:
// kube-controller-manager enforces minReplicas/maxReplicas before reading
// any, so an HPA whose target is outside them is one it wants to rescale.
// Every successful /scale write is counted from the audit log.
// startPauseEnv starts the control plane (with an audit log),
// kube-controller-manager's HPA controller and the promscaler-pause policy.
func startPauseEnv(t *testing.T) (*framework.Env, context.Context, string) {
	auditDir := t.TempDir()
	policy, auditLog := filepath.Join(auditDir, "policy.yaml"), filepath.Join(auditDir, "audit.log")
	if err := os.WriteFile(policy, []byte(coexistAuditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	env := framework.New(t, framework.Config{APIServerArgs: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog}})
	if _, err := os.Stat(env.Bin("autoscaler")); err != nil {
		t.Fatalf("autoscaler binary: %v (run `make build`)", err)
	}
	ctx := ctxFor(t, 4*time.Minute)
	if err := env.EnsureNamespace(ctx, coexistLeaseSpace); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"deploy/components/autoscaler/rbac.yaml", "deploy/components/autoscaler-pause/policy.yaml"} {
		if out, err := env.Kubectl(ctx, "apply", "-f", filepath.Join(env.RepoRoot, f)); err != nil {
			t.Fatalf("applying %s: %v\n%s", f, err, out)
		}
	}
	waitPauseEnforced(t, ctx, env)
	env.MustStartControllerManager(t, framework.ControllerManagerConfig{HPASyncPeriod: time.Second})
	return env, ctx, auditLog
}

// pauseProbe is the namespace waitPauseEnforced probes in (its writes are
// not counted by checkScaleWrites).
const pauseProbe = "pause-probe"

// waitPauseEnforced waits until the API server enforces the
// promscaler-pause policy: a server-side dry-run /scale patch of a paused
// target, as kube-controller-manager's HPA user, is denied. A policy just created
// takes a moment (longer on a loaded machine) to be compiled and bound;
// kube-controller-manager started before that rescales paused targets.
func waitPauseEnforced(t *testing.T, ctx context.Context, env *framework.Env) {
	t.Helper()
	createWorkload(t, ctx, env, pauseProbe, "app", 1, 1, 5, unserved, map[string]string{scaletozero.AnnotationPaused: "true"})
	start := time.Now()
	eventually(t, ctx, 30*time.Second, "the promscaler-pause policy enforced", func(ctx context.Context) error {
		// The group only lets the probe past RBAC; the policy matches
		// on the user name.
		out, err := env.Kubectl(ctx, "patch", "deployment/app", "-n", pauseProbe, "--subresource=scale", "--type=merge",
			"-p", `{"spec":{"replicas":2}}`, "--dry-run=server", "--as="+kcmHPAUser, "--as-group=system:masters")
		if err != nil && strings.Contains(err.Error(), "promscaler-pause") {
			return nil
		}
		return fmt.Errorf("dry-run scale as %s not denied yet: %v: %s", kcmHPAUser, err, out)
	})
	t.Logf("promscaler-pause policy enforced after %v", time.Since(start).Round(100*time.Millisecond))
}

func TestAutoscalerPause(t *testing.T) {
	env, ctx, auditLog := startPauseEnv(t)
	// Each target starts outside its HPA's range, so kube-controller-manager
	// wants to move it at once: up to minReplicas or down to maxReplicas.
	createWorkload(t, ctx, env, "pause-all", "app", 1, 3, 5, unserved, map[string]string{scaletozero.AnnotationPaused: "true"})
	createWorkload(t, ctx, env, "pause-replicas", "app", 1, 3, 5, unserved, map[string]string{scaletozero.AnnotationPausedReplicas: "2"})
	createWorkload(t, ctx, env, "pause-in", "app", 8, 3, 4, unserved, map[string]string{scaletozero.AnnotationPausedScaleIn: "true"})
	createWorkload(t, ctx, env, "pause-out", "app", 1, 3, 5, unserved, map[string]string{scaletozero.AnnotationPausedScaleOut: "true"})
	createWorkload(t, ctx, env, "unpaused", "app", 1, 3, 5, unserved, nil)
	// Fallbacks: the metric is never served, so every period fails and
	// kube-controller-manager keeps the count; each behaviour after 1 period.
	for ns, c := range map[string]struct {
		replicas int32
		behavior string
	}{"fallback-static": {2, "static"}, "fallback-current": {2, "currentReplicas"}, "fallback-higher": {5, "currentReplicasIfHigher"}, "fallback-lower": {5, "currentReplicasIfLower"}} {
		ann := map[string]string{scaletozero.AnnotationFallbackBehavior: c.behavior, scaletozero.AnnotationFallbackAfter: "1"}
		if c.behavior != "currentReplicas" {
			ann[scaletozero.AnnotationFallbackReplicas] = map[int32]string{2: "4", 5: "3"}[c.replicas]
		}
		createWorkload(t, ctx, env, ns, "app", c.replicas, 1, 6, unserved, ann)
	}

	a := startReplica(t, env, "autoscaler", coexistUserA, []string{
		"--mode=coexist", "--horizontal-pod-autoscaler-sync-period=1s",
		"--leader-elect-resource-namespace=" + coexistLeaseSpace, "--api-request-timeout=5s",
	})
	waitHolder(t, ctx, env, a, 30*time.Second)

	// The unpaused HPA shows kube-controller-manager at work (1 -> 3); the
	// paused ones hold for 10 s of kube-controller-manager's 1 s periods.
	waitSpecReplicas(t, ctx, env, "unpaused", "app", 3, 30*time.Second)
	waitSpecReplicas(t, ctx, env, "pause-replicas", "app", 2, 30*time.Second) // ours
	held := time.Now()
	for ns, want := range map[string]int32{"pause-all": 1, "pause-replicas": 2, "pause-in": 8, "pause-out": 1} {
		requireReplicasFor(t, ctx, env, ns, "app", want, 10*time.Second-time.Since(held))
	}
	requireStatus(t, ctx, env, "pause-replicas", "app", "Paused", scaletozero.ActionPause)
	for ns, want := range map[string]int32{"fallback-static": 4, "fallback-current": 2, "fallback-higher": 5, "fallback-lower": 3} {
		waitSpecReplicas(t, ctx, env, ns, "app", want, 10*time.Second)
		requireStatus(t, ctx, env, ns, "app", "Fallback", scaletozero.ActionFallback)
	}

	// The direction a partial pause leaves open still works: a user scales
	// pause-in to 1 (kube-controller-manager scales out to minReplicas 3)
	// and pause-out to 8 (it scales in to maxReplicas 5).
	scaleBy := func(ns string, n int32) {
		t.Helper()
		patch := []byte(`{"spec":{"replicas":` + strconv.Itoa(int(n)) + `}}`)
		if _, err := env.Client.AppsV1().Deployments(ns).Patch(ctx, "app", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scaleBy("pause-in", 1)
	scaleBy("pause-out", 8)
	waitSpecReplicas(t, ctx, env, "pause-in", "app", 3, 30*time.Second)
	waitSpecReplicas(t, ctx, env, "pause-out", "app", 5, 30*time.Second)

	// What a user sees on a paused HPA.
	requireDescribe(t, ctx, env, "pause-all", "FailedRescale", "promscaler-pause", `"state":"Paused"`)

	// Lifting the pause gives the target back to kube-controller-manager.
	unpause := []byte(`{"metadata":{"annotations":{"` + scaletozero.AnnotationPaused + `":null}}}`)
	if _, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers("pause-all").Patch(ctx, "app", types.MergePatchType, unpause, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	unpaused := time.Now()
	waitSpecReplicas(t, ctx, env, "pause-all", "app", 3, 30*time.Second)
	t.Logf("pause lifted -> kube-controller-manager scales: %v", time.Since(unpaused).Round(100*time.Millisecond))
	requireStatus(t, ctx, env, "pause-all", "app", scaletozero.StateOff, scaletozero.ActionUnpause)

	checkScaleWrites(t, auditLog, map[string]int{
		"pause-replicas " + coexistUserA:  1, // the pause itself
		"pause-in " + kcmHPAUser:          1, // 1 -> 3, the open direction
		"pause-out " + kcmHPAUser:         1, // 8 -> 5, the open direction
		"pause-all " + kcmHPAUser:         1, // 1 -> 3 once the pause is lifted
		"unpaused " + kcmHPAUser:          1,
		"fallback-static " + coexistUserA: 1, // 2 -> 4
		"fallback-lower " + coexistUserA:  1, // 5 -> 3
	})
}

// checkScaleWrites compares the successful /scale writes of the audit log,
// per "namespace user", with want (and no others).
func checkScaleWrites(t *testing.T, auditLog string, want map[string]int) {
	t.Helper()
	time.Sleep(time.Second)
	counts := map[string]int{}
	for _, w := range readAudit(t, auditLog) {
		if w.Resource == "deployments" && w.Subresource == "scale" && w.Namespace != pauseProbe {
			counts[w.Namespace+" "+w.User]++
		}
	}
	t.Logf("successful /scale writes (namespace user): %v", counts)
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("/scale writes %q = %d, want %d", k, counts[k], n)
		}
	}
	for k, n := range counts {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected /scale writes %q: %d", k, n)
		}
	}
}

// requireDescribe checks that kubectl describe hpa of ns/app shows wants.
func requireDescribe(t *testing.T, ctx context.Context, env *framework.Env, ns string, wants ...string) {
	t.Helper()
	desc, err := env.Kubectl(ctx, "describe", "hpa", "-n", ns, "app")
	if err != nil {
		t.Fatalf("kubectl describe hpa: %v\n%s", err, desc)
	}
	t.Logf("kubectl describe hpa -n %s app:\n%s", ns, desc)
	for _, want := range wants {
		if !strings.Contains(desc, want) {
			t.Errorf("kubectl describe hpa lacks %q", want)
		}
	}
}
