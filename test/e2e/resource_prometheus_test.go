//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/resourcemetrics"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// TestResourceSourcePrometheus runs the resource metrics source against a
// real Prometheus scraping cAdvisor-style series for several pods and
// nodes: values as PromQL computes them, NaN and negative samples, a
// container missing a resource, a counter reset, and a namespace large
// enough to be queried without a name matcher.
func TestResourceSourcePrometheus(t *testing.T) {
	env := framework.New(t, framework.Config{})
	x, addr := serveExporter(t)
	promSrv := env.MustStartPrometheus(t, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "cadvisor", Targets: []string{addr}, HonorLabels: true}},
	})
	ctx := ctxFor(t, 3*time.Minute)

	var pods []*metav1.PartialObjectMetadata
	addPod := func(ns, name string) {
		pods = append(pods, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	must := fatalOn(t)
	// Namespace "apps": the edge cases.
	must(setContainerUsage(x, containerUsage{"apps", "ok", "app", 0.3, 64 << 20}))
	must(setContainerUsage(x, containerUsage{"apps", "ok", "sidecar", 0.02, 8 << 20}))
	must(setContainerUsage(x, containerUsage{"apps", "nan", "good", 0.1, 16 << 20}))
	must(setContainerUsage(x, containerUsage{"apps", "nan", "bad", 0.1, math.NaN()}))
	must(setContainerUsage(x, containerUsage{"apps", "negative", "bad", 0.1, -1}))
	must(x.SetCounterRate("container_cpu_usage_seconds_total", map[string]string{"namespace": "apps", "pod": "missing", "container": "app"}, 0.2))
	must(setContainerUsage(x, containerUsage{"apps", "reset", "app", 0.4, 32 << 20}))
	for _, p := range []string{"ok", "nan", "negative", "missing", "reset", "absent"} {
		addPod("apps", p)
	}
	// Namespace "big": more pods than a name matcher takes.
	for i := range 30 {
		name := fmt.Sprintf("web-%02d", i)
		must(setContainerUsage(x, containerUsage{"big", name, "app", 0.01 * float64(i+1), float64((i + 1) << 20)}))
		addPod("big", name)
	}
	// A pod of "big" that is not asked for (not Running) must not appear.
	must(setContainerUsage(x, containerUsage{"big", "completed", "app", 0.5, 1 << 20}))
	nodes := []*metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}, {ObjectMeta: metav1.ObjectMeta{Name: "node-nan"}}}
	must(setNodeUsage(x, "node-a", 1.5, 4<<30))
	must(setNodeUsage(x, "node-b", 0.25, 1<<30))
	must(setNodeUsage(x, "node-nan", 0.25, math.NaN()))

	// A full 10s window of samples (rate() extrapolates less over a series
	// younger than its window), then a counter reset.
	if _, err := promSrv.WaitForQuery(ctx, `count_over_time(container_cpu_usage_seconds_total{node="node-a"}[10s]) >= 10`, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	must(x.Set(exporter.Series{Name: "container_cpu_usage_seconds_total", Type: exporter.Counter,
		Labels: map[string]string{"namespace": "apps", "pod": "reset", "container": "app"}, Value: 0, Rate: 0.4}))
	time.Sleep(3 * time.Second)

	cfg, err := config.Parse([]byte(resourceConfig), "resource-config.yaml")
	must(err)
	ruleList, err := rules.Compile(cfg, kubemapper.New())
	must(err)
	client, err := promclient.New(promclient.Config{Address: promSrv.URL, HTTPClient: &http.Client{}, Timeout: 10 * time.Second})
	must(err)
	src, err := resourcemetrics.NewSource(resourcemetrics.SourceConfig{Rules: func() *rules.RuleSet { return ruleList }, Backends: promclient.Single[promclient.SampleQuerier](client)})
	must(err)

	got, err := src.GetPodMetrics(ctx, pods)
	must(err)
	cpu, err := promValues(ctx, promSrv, `sum(rate(container_cpu_usage_seconds_total{container!=""}[10s])) by (namespace,pod,container)`, "namespace", "pod", "container")
	must(err)
	var containers []string
	for _, pm := range got {
		if pm.Window.Duration != 10*time.Second || time.Since(pm.Timestamp.Time) > time.Minute {
			t.Errorf("%s/%s: window %s, timestamp %v", pm.Namespace, pm.Name, pm.Window.Duration, pm.Timestamp)
		}
		for _, c := range pm.Containers {
			key := pm.Namespace + "/" + pm.Name + "/" + c.Name
			containers = append(containers, key)
			gotCPU := c.Usage.Cpu().AsApproximateFloat64()
			if want, ok := cpu[key]; !ok || math.Abs(gotCPU-want) > 0.02 || gotCPU < 0 {
				t.Errorf("%s cpu = %v, Prometheus says %v", key, gotCPU, want)
			}
		}
	}
	var want []string
	for i := range 30 {
		want = append(want, fmt.Sprintf("big/web-%02d/app", i))
	}
	// nan: the NaN container is skipped, the pod kept; negative: its only
	// container is skipped, so the pod goes; missing: no memory sample;
	// reset: rate() absorbs the reset.
	want = append(want, "apps/nan/good", "apps/ok/app", "apps/ok/sidecar", "apps/reset/app")
	sort.Strings(want)
	sort.Strings(containers)
	if diff := cmp.Diff(want, containers); diff != "" {
		t.Errorf("reported containers (-want +got):\n%s", diff)
	}
	for _, pm := range got {
		if pm.Namespace == "big" && pm.Name == "web-09" {
			if m := pm.Containers[0].Usage[corev1.ResourceMemory]; m.String() != "10Mi" {
				t.Errorf("big/web-09 memory %s, want 10Mi", m.String())
			}
		}
	}

	nm, err := src.GetNodeMetrics(ctx, nodes)
	must(err)
	var nodeRows []string
	for _, n := range nm {
		c := n.Usage[corev1.ResourceCPU]
		m := n.Usage[corev1.ResourceMemory]
		nodeRows = append(nodeRows, fmt.Sprintf("%s %.2f %s", n.Name, c.AsApproximateFloat64(), m.String()))
	}
	if diff := cmp.Diff([]string{"node-a 1.50 4Gi", "node-b 0.25 1Gi"}, nodeRows); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}

	// Prometheus down: an error, never an empty answer.
	promSrv.Process.Stop(5 * time.Second)
	if _, err := src.GetPodMetrics(ctx, pods); err == nil || !promclient.IsUnavailable(err) {
		t.Errorf("with Prometheus stopped: err = %v, want an unavailable error", err)
	}
}
