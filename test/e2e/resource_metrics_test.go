//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/promscaler/promscaler/pkg/resourcemetrics/resourcetest"
	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// resourceConfig is prometheus-adapter's documented resourceRules over
// cAdvisor series, with a 10s window so rates follow the exporter within
// seconds.
var resourceConfig = resourcetest.CAdvisorRules("10s")

// containerUsage is what the exporter serves for one container, as cAdvisor
// would: a CPU seconds counter growing at cores per second and a working
// set gauge.
type containerUsage struct {
	ns, pod, container string
	cores              float64
	bytes              float64
}

func setContainerUsage(x *exporter.Exporter, u containerUsage) error {
	lbls := map[string]string{"namespace": u.ns, "pod": u.pod, "container": u.container}
	if err := x.SetCounterRate("container_cpu_usage_seconds_total", lbls, u.cores); err != nil {
		return err
	}
	return x.Set(exporter.Series{Name: "container_memory_working_set_bytes", Labels: lbls, Value: u.bytes})
}

func setNodeUsage(x *exporter.Exporter, node string, cores, bytes float64) error {
	lbls := map[string]string{"node": node, "id": "/"}
	if err := x.SetCounterRate("container_cpu_usage_seconds_total", lbls, cores); err != nil {
		return err
	}
	return x.Set(exporter.Series{Name: "container_memory_working_set_bytes", Labels: lbls, Value: bytes})
}

// startResourceStack starts the control plane, Prometheus scraping a test
// exporter and the adapter serving metrics.k8s.io.
func startResourceStack(t *testing.T) (*framework.Env, *exporter.Exporter, *framework.Prometheus) {
	t.Helper()
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: writeResourceConfig(t), PrometheusURL: prom.URL, ResourceMetrics: true})
	return env, x, prom
}

// writeResourceConfig writes resourceConfig to a file and returns its path.
func writeResourceConfig(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "resource-config.yaml")
	if err := os.WriteFile(cfg, []byte(resourceConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func createNode(ctx context.Context, env *framework.Env, name, cpu, memory string) error {
	n, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := env.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("setting node %s status: %w", name, err)
	}
	return nil
}

// promValues runs query against Prometheus and returns value by the
// joined values of keys.
func promValues(ctx context.Context, prom *framework.Prometheus, query string, keys ...string) (map[string]float64, error) {
	samples, err := prom.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		var k []string
		for _, key := range keys {
			k = append(k, s.Labels[key])
		}
		out[strings.Join(k, "/")] = s.Value
	}
	return out, nil
}

// topLines runs kubectl top and returns its rows (header dropped), each
// with its columns joined by one space.
func topLines(ctx context.Context, env *framework.Env, args ...string) ([]string, error) {
	out, err := env.Kubectl(ctx, append([]string{"top"}, args...)...)
	if err != nil {
		return nil, err
	}
	var rows []string
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if i == 0 {
			continue
		}
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	sort.Strings(rows)
	return rows, nil
}

// matchTop compares kubectl top rows with the wanted ones: names, memory
// and percentages exactly, CPU (a rate that moves by a fraction of a
// millicore between scrapes, which kubectl rounds up) within 3m.
func matchTop(got, want []string) error {
	if len(got) != len(want) {
		return fmt.Errorf("rows %q, want %q", got, want)
	}
	for i := range want {
		g, w := strings.Fields(got[i]), strings.Fields(want[i])
		if len(g) != len(w) {
			return fmt.Errorf("row %q, want %q", got[i], want[i])
		}
		for j := range w {
			if g[j] == w[j] {
				continue
			}
			gq, gerr := resource.ParseQuantity(g[j])
			wq, werr := resource.ParseQuantity(w[j])
			if gerr != nil || werr != nil || !strings.HasSuffix(w[j], "m") || math.Abs(float64(gq.MilliValue()-wq.MilliValue())) > 3 {
				return fmt.Errorf("row %q, want %q", got[i], want[i])
			}
		}
	}
	return nil
}

// TestResourceMetrics: Prometheus holds container CPU and memory series for
// several pods and nodes; metrics.k8s.io, read through the real
// kube-apiserver, reports exactly the Running pods with the values
// Prometheus computes, and kubectl top prints them.
func TestResourceMetrics(t *testing.T) {
	env, x, prom := startResourceStack(t)
	ctx := ctxFor(t, 5*time.Minute)
	const ns = "shop"
	if err := env.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	usage := []containerUsage{
		{ns, "web-1", "app", 0.25, 100 << 20},
		{ns, "web-1", "proxy", 0.05, 20 << 20},
		{ns, "web-2", "app", 0.5, 200 << 20},
		{ns, "db-0", "db", 1.2, 1 << 30},
		// Not Running: must not be reported.
		{ns, "pending", "app", 0.1, 10 << 20},
		// Another namespace.
		{"other", "web-1", "app", 0.9, 300 << 20},
	}
	for _, u := range usage {
		if err := setContainerUsage(x, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []struct {
		name  string
		cores float64
		bytes float64
	}{{"node-a", 1.5, 4 << 30}, {"node-b", 0.75, 3 << 30}} {
		if err := setNodeUsage(x, n.name, n.cores, n.bytes); err != nil {
			t.Fatal(err)
		}
		if err := createNode(ctx, env, n.name, "4", "16Gi"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.CreateReadyPods(ctx, ns, map[string]string{"app": "web"}, time.Minute, 50*time.Second, "web-1", "web-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CreateReadyPods(ctx, ns, map[string]string{"app": "db"}, time.Minute, 50*time.Second, "db-0"); err != nil {
		t.Fatal(err)
	}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: ns, Labels: map[string]string{"app": "web"}}, Spec: framework.PodTemplate(nil).Spec}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pending, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	podPath := "/apis/metrics.k8s.io/v1beta1/namespaces/" + ns + "/pods"
	t.Run("PodMetrics equal what Prometheus computes", func(t *testing.T) {
		eventually(t, ctx, 90*time.Second, "pod metrics match Prometheus", func(ctx context.Context) error {
			body, err := getRaw(ctx, env, podPath)
			if err != nil {
				return err
			}
			var list metricsv1beta1.PodMetricsList
			if err := json.Unmarshal(body, &list); err != nil {
				return fmt.Errorf("decoding PodMetricsList: %w", err)
			}
			cpu, err := promValues(ctx, prom, `sum(rate(container_cpu_usage_seconds_total{namespace="shop",container!=""}[10s])) by (pod,container)`, "pod", "container")
			if err != nil {
				return err
			}
			mem, err := promValues(ctx, prom, `sum(container_memory_working_set_bytes{namespace="shop",container!=""}) by (pod,container)`, "pod", "container")
			if err != nil {
				return err
			}
			var got []string
			for _, pm := range list.Items {
				if pm.Window.Duration != 10*time.Second || pm.Timestamp.IsZero() {
					return fmt.Errorf("%s: window %s timestamp %v, want 10s and the sample time", pm.Name, pm.Window.Duration, pm.Timestamp)
				}
				for _, c := range pm.Containers {
					key := pm.Name + "/" + c.Name
					gotCPU := c.Usage.Cpu().AsApproximateFloat64()
					// The rate moves a little between the two reads.
					if want, ok := cpu[key]; !ok || math.Abs(gotCPU-want) > 0.02 {
						return fmt.Errorf("%s cpu = %v, Prometheus says %v", key, gotCPU, want)
					}
					if want := mem[key]; c.Usage.Memory().Value() != int64(want) {
						return fmt.Errorf("%s memory = %v, Prometheus says %v", key, c.Usage.Memory(), want)
					}
					got = append(got, key)
				}
			}
			want := []string{"db-0/db", "web-1/app", "web-1/proxy", "web-2/app"}
			if diff := cmp.Diff(want, got); diff != "" {
				return fmt.Errorf("containers (-want +got):\n%s", diff)
			}
			return nil
		})
	})

	t.Run("kubectl get --raw returns a well-formed PodMetrics", func(t *testing.T) {
		out, err := env.Kubectl(ctx, "get", "--raw", podPath+"/web-1")
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]any
		if err := json.Unmarshal([]byte(out), &raw); err != nil {
			t.Fatalf("decoding: %v\n%s", err, out)
		}
		md, _ := raw["metadata"].(map[string]any)
		if raw["kind"] != "PodMetrics" || raw["apiVersion"] != "metrics.k8s.io/v1beta1" || md["name"] != "web-1" || md["namespace"] != ns || raw["window"] != "10s" {
			t.Errorf("PodMetrics header wrong:\n%s", out)
		}
		if _, err := time.Parse(time.RFC3339, fmt.Sprint(raw["timestamp"])); err != nil {
			t.Errorf("timestamp %v: %v", raw["timestamp"], err)
		}
		var pm metricsv1beta1.PodMetrics
		if err := json.Unmarshal([]byte(out), &pm); err != nil {
			t.Fatal(err)
		}
		if len(pm.Containers) != 2 || pm.Containers[0].Name != "app" || pm.Containers[1].Name != "proxy" {
			t.Fatalf("containers %+v, want app and proxy", pm.Containers)
		}
		if m := pm.Containers[0].Usage.Memory().String(); m != "100Mi" {
			t.Errorf("app memory %s, want 100Mi", m)
		}
		if !strings.HasSuffix(pm.Containers[0].Usage.Cpu().String(), "n") {
			t.Errorf("app cpu %s, want nanocores as metrics-server reports them", pm.Containers[0].Usage.Cpu())
		}
		if _, err := env.Kubectl(ctx, "get", "--raw", podPath+"/pending"); err == nil || !strings.Contains(err.Error(), "NotFound") && !strings.Contains(err.Error(), "not found") {
			t.Errorf("pending pod: err = %v, want not found", err)
		}
	})

	t.Run("kubectl top pods", func(t *testing.T) {
		eventually(t, ctx, 30*time.Second, "kubectl top pods", func(ctx context.Context) error {
			rows, err := topLines(ctx, env, "pods", "-n", ns)
			if err != nil {
				return err
			}
			return matchTop(rows, []string{"db-0 1200m 1024Mi", "web-1 300m 120Mi", "web-2 500m 200Mi"})
		})
		rows, err := topLines(ctx, env, "pods", "-n", ns, "-l", "app=web", "--containers")
		if err != nil {
			t.Fatal(err)
		}
		if err := matchTop(rows, []string{"web-1 app 250m 100Mi", "web-1 proxy 50m 20Mi", "web-2 app 500m 200Mi"}); err != nil {
			t.Errorf("kubectl top pods --containers -l app=web: %v", err)
		}
	})

	t.Run("kubectl top nodes", func(t *testing.T) {
		eventually(t, ctx, 30*time.Second, "kubectl top nodes", func(ctx context.Context) error {
			rows, err := topLines(ctx, env, "nodes")
			if err != nil {
				return err
			}
			// CPU%: 1.5 of 4 cores; memory%: 4Gi of 16Gi.
			return matchTop(rows, []string{"node-a 1500m 37% 4096Mi 25%", "node-b 750m 18% 3072Mi 18%"})
		})
	})

	t.Run("kubectl get podmetrics and nodemetrics print tables", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"get", "podmetrics.metrics.k8s.io", "-n", ns, "--no-headers"}, []string{"db-0", "web-1", "web-2"}},
			{[]string{"get", "nodemetrics.metrics.k8s.io", "--no-headers"}, []string{"node-a", "node-b"}},
		} {
			out, err := env.Kubectl(ctx, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(line)
				// NAME CPU MEMORY WINDOW
				if len(f) != 4 || f[3] != "10s" {
					t.Errorf("%v: row %q, want name, cpu, memory and a 10s window", tc.args, line)
					continue
				}
				names = append(names, f[0])
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("%v (-want +got):\n%s", tc.args, diff)
			}
		}
	})

	t.Run("label and field selectors", func(t *testing.T) {
		for _, tc := range []struct {
			param, value string
			want         []string
		}{
			{"labelSelector", "app=db", []string{"db-0"}},
			{"labelSelector", "app in (web)", []string{"web-1", "web-2"}},
			{"fieldSelector", "metadata.name=web-2", []string{"web-2"}},
		} {
			body, err := env.Client.Discovery().RESTClient().Get().AbsPath(podPath).Param(tc.param, tc.value).DoRaw(ctx)
			if err != nil {
				t.Fatalf("%s=%s: %v", tc.param, tc.value, err)
			}
			var list metricsv1beta1.PodMetricsList
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, pm := range list.Items {
				got = append(got, pm.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s=%s (-want +got):\n%s", tc.param, tc.value, diff)
			}
		}
	})
}

// driveCPU spreads load cores over the pods: each pod's one container uses
// load/len(pods) cores.
func driveCPU(x *exporter.Exporter, ns string, pods []string, load float64) error {
	for _, p := range pods {
		if err := setContainerUsage(x, containerUsage{ns, p, "app", load / float64(len(pods)), 32 << 20}); err != nil {
			return err
		}
	}
	return nil
}

// TestResourceMetricsHPA: the upstream HPA controller scales a Deployment
// on `type: Resource` CPU utilization read from metrics.k8s.io.
func TestResourceMetricsHPA(t *testing.T) {
	env, x, _ := startResourceStack(t)
	env.MustStartControllerManager(t, framework.ControllerManagerConfig{
		Controllers: []string{framework.HPAController, framework.DeploymentController, framework.ReplicaSetController},
	})
	target := int32(50)
	sc := scaleScenario{
		name: "resource-cpu-utilization",
		metric: autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name:   corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target},
		}},
		// Pods request 100m; at 50% a pod takes 50m: 0.2 cores need 4 pods,
		// 0.05 cores the minimum of 2.
		drive: driveCPU, highLoad: 0.2, lowLoad: 0.05, wantHigh: 4, wantLow: 2,
	}
	runScaleScenario(t, env, x, "hpa-resource", sc)
}
