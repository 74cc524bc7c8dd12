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

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/promscaler/promscaler/pkg/scaletozero"
	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// TestAutoscalerMinReplicasZero: an HPA with minReplicas 0 under
// kube-controller-manager 1.37's HPAScaleToZero (on by default), beside
// promscaler's autoscaler in coexist mode, in the pause test's environment
// plus Prometheus and the adapter serving queue_messages. kube-controller-
// manager owns both transitions (to zero when the metric proposes 0, after
// the HPA's scale-down stabilization window; from zero when it proposes
// 1 or more); promscaler's scale-to-zero annotations are refused on such an
// HPA (InvalidAnnotation), its pause annotations hold kube-controller-
// manager's scale to zero back, and the audit log shows no promscaler
// /scale write and no kube-controller-manager write undoing one.
func TestAutoscalerMinReplicasZero(t *testing.T) {
	env, ctx, auditLog := startPauseEnv(t)
	x, addr := serveExporter(t)
	prom := env.MustStartPrometheus(t, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addr}, HonorLabels: true}},
	})
	requireAdapter(t, env)
	cfgFile := filepath.Join(t.TempDir(), "min0-config.yaml")
	if err := os.WriteFile(cfgFile, []byte(queueExternalRules), 0o600); err != nil {
		t.Fatal(err)
	}
	env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: cfgFile, PrometheusURL: prom.URL})
	setQueue := func(ns string, v float64) {
		t.Helper()
		if err := x.Set(exporter.Series{Name: "queue_messages", Labels: map[string]string{"namespace": ns, "queue": "jobs"}, Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	metric := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(10, resource.DecimalSI)},
	}}
	// min0: promscaler opts in with a fallback (so it reads the metric
	// every period); min0-activation asks for promscaler's scale to zero,
	// which minReplicas 0 leaves to kube-controller-manager.
	setQueue("min0", 25)
	setQueue("min0-activation", 10)
	createWorkload(t, ctx, env, "min0", "app", 1, 0, 5, metric, map[string]string{scaletozero.AnnotationFallbackReplicas: "2"})
	createWorkload(t, ctx, env, "min0-activation", "app", 1, 0, 5, metric, map[string]string{scaletozero.AnnotationActivationMetric: "queue_messages"})
	// The idle period of a minReplicas 0 HPA is its scale-down window.
	patchHPA(t, ctx, env, "min0", `{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":2}}}}`)

	// The metric is served (kube-controller-manager scales on it) before
	// promscaler starts: until the adapter's APIService is available every
	// read fails, and the fallback would rightly take hold.
	waitSpecReplicas(t, ctx, env, "min0", "app", 3, 60*time.Second) // 25/10
	a := startReplica(t, env, "autoscaler", coexistUserA, []string{
		"--mode=coexist", "--horizontal-pod-autoscaler-sync-period=1s",
		"--leader-elect-resource-namespace=" + coexistLeaseSpace, "--api-request-timeout=5s",
	})
	waitHolder(t, ctx, env, a, 30*time.Second)
	waitScalerStatus(t, ctx, env, "min0-activation", "app", "Invalid on "+scaletozero.AnnotationActivationMetric, func(st scaletozero.Status) bool {
		return st.State == scaletozero.StateInvalid && strings.Contains(st.Valid.Message, scaletozero.AnnotationActivationMetric) && strings.Contains(st.Valid.Message, "minReplicas is 0")
	})

	requireReplicasFor(t, ctx, env, "min0", "app", 3, 3*time.Second)
	setQueue("min0", 0)
	waitSpecReplicas(t, ctx, env, "min0", "app", 0, 30*time.Second) // kube-controller-manager's zero
	requireReplicasFor(t, ctx, env, "min0", "app", 0, 5*time.Second)
	setQueue("min0", 15)
	woke := time.Now()
	waitSpecReplicas(t, ctx, env, "min0", "app", 2, 30*time.Second) // and back: 15/10
	t.Logf("metric 0 -> 15: kube-controller-manager scales 0 -> 2 in %v", time.Since(woke).Round(100*time.Millisecond))

	// paused-scale-in holds kube-controller-manager's scale to zero back
	// (the promscaler-pause policy); lifting it lets it through.
	patchHPA(t, ctx, env, "min0", `{"metadata":{"annotations":{"`+scaletozero.AnnotationPausedScaleIn+`":"true"}}}`)
	waitScalerStatus(t, ctx, env, "min0", "app", "pause scale-in", func(st scaletozero.Status) bool { return st.Pause == "scale-in" })
	setQueue("min0", 0)
	requireReplicasFor(t, ctx, env, "min0", "app", 2, 6*time.Second)
	patchHPA(t, ctx, env, "min0", `{"metadata":{"annotations":{"`+scaletozero.AnnotationPausedScaleIn+`":null}}}`)
	waitSpecReplicas(t, ctx, env, "min0", "app", 0, 30*time.Second)
	requireReplicasFor(t, ctx, env, "min0", "app", 0, 3*time.Second)

	checkScaleWrites(t, auditLog, map[string]int{
		"min0 " + kcmHPAUser: 4, // 1 -> 3 -> 0 -> 2, then 2 -> 0 once the pause is lifted
	})
}

func patchHPA(t *testing.T, ctx context.Context, env *framework.Env, ns, patch string) {
	t.Helper()
	if _, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Patch(ctx, "app", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching hpa %s/app: %v", ns, err)
	}
}

// waitScalerStatus waits until ns/name's status annotation satisfies ok.
func waitScalerStatus(t *testing.T, ctx context.Context, env *framework.Env, ns, name, what string, ok func(scaletozero.Status) bool) {
	t.Helper()
	eventually(t, ctx, 20*time.Second, ns+"/"+name+" status: "+what, func(ctx context.Context) error {
		h, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var st scaletozero.Status
		if err := json.Unmarshal([]byte(h.Annotations[scaletozero.AnnotationStatus]), &st); err != nil {
			return fmt.Errorf("status annotation %q: %w", h.Annotations[scaletozero.AnnotationStatus], err)
		}
		if !ok(st) {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}
