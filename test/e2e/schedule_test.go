//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// TestScheduleWindow: one schedule window served by the adapter
// (--schedules-config) as an external metric, on a plain HPA beside
// kube-controller-manager 1.37 (the pause test's environment, sync period
// 1 s). The HPA lists the schedule with an AverageValue target of 1 next
// to its own metric (which asks for 1 replica): the target holds 1 before
// the window, goes to the floor (4) inside it and back to 1 after it.
// Nothing writes the HPA's spec; the audit log shows kube-controller-
// manager's two /scale writes and no other.
func TestScheduleWindow(t *testing.T) {
	env, ctx, auditLog := startPauseEnv(t)
	x, addr := serveExporter(t)
	prom := env.MustStartPrometheus(t, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addr}, HonorLabels: true}},
	})
	requireAdapter(t, env)
	dir := t.TempDir()
	rulesFile, schedFile := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "schedules.yaml")
	from := time.Now().Add(25 * time.Second).Truncate(time.Second)
	to := from.Add(15 * time.Second)
	schedules := fmt.Sprintf("schedules:\n- name: launch-window\n  namespaces: [sched]\n  windows:\n  - startTime: %s\n    endTime: %s\n    replicas: 4\n",
		from.Format(time.RFC3339), to.Format(time.RFC3339))
	for f, body := range map[string]string{rulesFile: queueExternalRules, schedFile: schedules} {
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: rulesFile, PrometheusURL: prom.URL, ExtraArgs: []string{"--schedules-config=" + schedFile}})
	if err := x.Set(exporter.Series{Name: "queue_messages", Labels: map[string]string{"namespace": "sched", "queue": "jobs"}, Value: 5}); err != nil {
		t.Fatal(err)
	}
	own := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(10, resource.DecimalSI)},
	}}
	createWorkload(t, ctx, env, "sched", "app", 1, 1, 10, own, nil)
	patchHPA(t, ctx, env, "sched", `{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":2}},"metrics":[`+
		`{"type":"External","external":{"metric":{"name":"queue_messages","selector":{"matchLabels":{"queue":"jobs"}}},"target":{"type":"AverageValue","averageValue":"10"}}},`+
		`{"type":"External","external":{"metric":{"name":"launch-window"},"target":{"type":"AverageValue","averageValue":"1"}}}]}}`)

	// Before the window: the schedule reads 0, the HPA's own metric 1.
	eventually(t, ctx, 20*time.Second, "the schedule served as an external metric", func(_ context.Context) error {
		out, err := env.Kubectl(ctx, "get", "--raw", "/apis/external.metrics.k8s.io/v1beta1/namespaces/sched/launch-window")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	requireReplicasFor(t, ctx, env, "sched", "app", 1, time.Until(from)-time.Second)
	waitSpecReplicas(t, ctx, env, "sched", "app", 4, time.Until(from)+10*time.Second)
	t.Logf("window start -> 4 replicas: %v", time.Since(from).Round(100*time.Millisecond))
	requireReplicasFor(t, ctx, env, "sched", "app", 4, time.Until(to)-time.Second)
	waitSpecReplicas(t, ctx, env, "sched", "app", 1, time.Until(to)+15*time.Second)
	t.Logf("window end -> 1 replica: %v (scale-down window 2 s)", time.Since(to).Round(100*time.Millisecond))

	checkScaleWrites(t, auditLog, map[string]int{"sched " + kcmHPAUser: 2})
}
