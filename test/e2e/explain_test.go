//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/promscaler/promscaler/pkg/hpaexplain"
	"github.com/promscaler/promscaler/test/e2e/framework"
)

// explainSyncPeriod is kube-controller-manager's HPA sync period here: long
// enough that explain runs between two of its reconciles.
const explainSyncPeriod = 60 * time.Second

// TestExplainMatchesKubeControllerManager runs `autoscaler explain` against
// the real stack (kube-controller-manager with its HPA controller, the
// adapter, Prometheus) for an HPA held by its tolerance and then, after
// the load doubles, for the same HPA about to scale, and checks that
// kube-controller-manager then does what explain said: the same desired
// count, and for the rescale the same event message.
func TestExplainMatchesKubeControllerManager(t *testing.T) {
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: testdata("hpa-config.yaml"), PrometheusURL: prom.URL})
	env.MustStartControllerManager(t, framework.ControllerManagerConfig{
		Controllers:   []string{framework.HPAController, framework.DeploymentController, framework.ReplicaSetController},
		HPASyncPeriod: explainSyncPeriod,
	})
	ctx := ctxFor(t, 8*time.Minute)
	const ns = "explain"
	if err := env.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	podLabels := map[string]string{"app": "web"}
	env.RunPodReadier(ctx, ns, labels.SelectorFromSet(podLabels), 2*time.Second)
	replicas := int32(2)
	if err := env.CreateDeployment(ctx, ns, "web", replicas, podLabels); err != nil {
		t.Fatal(err)
	}

	// Each pod's fpm_active_rate is active/total processes: 5.2 of 10 is a
	// usage ratio of 1.04 against 500m, within the 10% tolerance.
	setLoad := func(active float64) []string {
		t.Helper()
		var names []string
		eventually(t, ctx, 2*time.Minute, "two running web pods", func(ctx context.Context) error {
			pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return err
			}
			names = names[:0]
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
					names = append(names, p.Name)
				}
			}
			if len(names) != 2 {
				return fmt.Errorf("%d running pods", len(names))
			}
			return nil
		})
		for _, p := range names {
			if err := x.FPM(ns, p, active, fpmCapacity); err != nil {
				t.Fatal(err)
			}
		}
		return names
	}
	waitMetric := func(pods []string, want string) {
		t.Helper()
		q := resource.MustParse(want)
		eventually(t, ctx, 2*time.Minute, fmt.Sprintf("fpm_active_rate %s on %v", want, pods), func(ctx context.Context) error {
			raw, err := env.Client.CoreV1().RESTClient().Get().AbsPath("/apis/custom.metrics.k8s.io/v1beta2/namespaces", ns, "pods", "*", "fpm_active_rate").
				Param("labelSelector", "app=web").DoRaw(ctx)
			if err != nil {
				return err
			}
			var list struct {
				Items []struct {
					DescribedObject struct{ Name string } `json:"describedObject"`
					Value           resource.Quantity     `json:"value"`
				} `json:"items"`
			}
			if err := json.Unmarshal(raw, &list); err != nil {
				return err
			}
			if len(list.Items) != len(pods) {
				return fmt.Errorf("%d values: %s", len(list.Items), raw)
			}
			for _, it := range list.Items {
				if it.Value.Cmp(q) != 0 {
					return fmt.Errorf("%s at %s", it.DescribedObject.Name, it.Value.String())
				}
			}
			return nil
		})
	}
	pods := setLoad(5.2)
	waitMetric(pods, "520m")

	minR := int32(2)
	target := resource.MustParse("500m")
	// kube-controller-manager reconciles a new HPA at once, then once a
	// sync period later.
	created := time.Now()
	if _, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &minR,
			MaxReplicas:    8,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "fpm_active_rate"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
			}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Held by the tolerance.
	held := runExplain(t, ctx, env, ns+"/web")
	if held.Target.SpecReplicas != 2 || held.Rescale || held.DesiredReplicas != 2 || len(held.Metrics) != 1 ||
		held.Metrics[0].UsageRatio == nil || *held.Metrics[0].UsageRatio != 1.04 || !*held.Metrics[0].WithinTolerance {
		t.Fatalf("explain: want 2 replicas kept by a usage ratio of 1.04 within the tolerance, got %+v", held)
	}
	// kube-controller-manager reconciles the new HPA at once: the same.
	kcm := waitHPA(t, ctx, env, ns, "reconciled by kube-controller-manager", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return len(h.Status.CurrentMetrics) == 1
	})
	if kcm.Status.DesiredReplicas != held.DesiredReplicas || kcm.Status.LastScaleTime != nil {
		t.Errorf("kube-controller-manager: desired %d, lastScaleTime %v; explain said keep %d", kcm.Status.DesiredReplicas, kcm.Status.LastScaleTime, held.DesiredReplicas)
	}
	if got, want := conditionReasons(kcm.Status.Conditions), explainReasons(held); got != want {
		t.Errorf("conditions: kube-controller-manager %s, explain %s", got, want)
	}

	// Doubled load: 10 of 10 processes, a ratio of 2, between two of
	// kube-controller-manager's reconciles.
	setLoad(10)
	waitMetric(pods, "1")
	scaling := runExplain(t, ctx, env, ns+"/web")
	if since := time.Since(created); since > explainSyncPeriod-5*time.Second {
		t.Fatalf("explain ran %v after kube-controller-manager's reconcile, too close to its next one", since)
	}
	if scaling.Target.SpecReplicas != 2 || !scaling.Rescale || scaling.DesiredReplicas != 4 || len(scaling.Events) == 0 {
		t.Fatalf("explain: want a rescale from 2 to 4, got %+v", scaling)
	}
	text := runExplainText(t, ctx, env, ns+"/web")
	if !strings.Contains(text, "Decision: scale Deployment web from 2 to 4 replicas") {
		t.Errorf("explain text does not say the rescale:\n%s", text)
	}
	waitReplicas(t, ctx, env, ns, "4", func(n int32) bool { return n == 4 }, explainSyncPeriod+60*time.Second)
	kcm = waitHPA(t, ctx, env, ns, "rescaled by kube-controller-manager", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return h.Status.LastScaleTime != nil
	})
	if kcm.Status.DesiredReplicas != scaling.DesiredReplicas {
		t.Errorf("kube-controller-manager desired %d, explain said %d", kcm.Status.DesiredReplicas, scaling.DesiredReplicas)
	}
	want := scaling.Events[len(scaling.Events)-1]
	eventually(t, ctx, 30*time.Second, "kube-controller-manager's SuccessfulRescale event", func(ctx context.Context) error {
		evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=HorizontalPodAutoscaler"})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason == want.Reason && e.Message == want.Message {
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return fmt.Errorf("no %s %q among %q", want.Reason, want.Message, seen)
	})
}

func runExplain(t *testing.T, ctx context.Context, env *framework.Env, hpa string) *hpaexplain.Explanation {
	t.Helper()
	out, err := exec.CommandContext(ctx, env.Bin("autoscaler"), "explain", hpa, "-o", "json", "--kubeconfig", env.Kubeconfig).Output()
	if err != nil {
		t.Fatalf("autoscaler explain %s: %v (%s)", hpa, err, exitStderr(err))
	}
	var x hpaexplain.Explanation
	if err := json.Unmarshal(out, &x); err != nil {
		t.Fatalf("autoscaler explain -o json: %v\n%s", err, out)
	}
	t.Logf("explain %s: current %d, desired %d, rescale %v, notes %q", hpa, x.Target.SpecReplicas, x.DesiredReplicas, x.Rescale, x.History.Notes)
	return &x
}

func runExplainText(t *testing.T, ctx context.Context, env *framework.Env, hpa string) string {
	t.Helper()
	// The kubectl plugin binary, as `kubectl hpa-explain` runs it.
	out, err := exec.CommandContext(ctx, env.Bin("kubectl-hpa_explain"), hpa, "--kubeconfig", env.Kubeconfig).Output()
	if err != nil {
		t.Fatalf("kubectl-hpa_explain %s: %v (%s)", hpa, err, exitStderr(err))
	}
	return string(out)
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func waitHPA(t *testing.T, ctx context.Context, env *framework.Env, ns, what string, ok func(*autoscalingv2.HorizontalPodAutoscaler) bool) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	var h *autoscalingv2.HorizontalPodAutoscaler
	eventually(t, ctx, 2*time.Minute, "HPA "+what, func(ctx context.Context) error {
		var err error
		h, err = env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !ok(h) {
			return fmt.Errorf("status %+v", h.Status)
		}
		return nil
	})
	return h
}

// conditionReasons and explainReasons summarize conditions as
// "Type=Status/Reason ..." in status order.
func conditionReasons(cs []autoscalingv2.HorizontalPodAutoscalerCondition) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}

func explainReasons(x *hpaexplain.Explanation) string {
	var parts []string
	for _, c := range x.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}
