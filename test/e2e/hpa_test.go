//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// scaleScenario is one HPA scaling case: a metric, a load that drives it, the
// replica count it must reach under high load and come back to under low load.
type scaleScenario struct {
	name   string
	metric autoscalingv2.MetricSpec
	// drive publishes the load (units per scenario) for the current pods.
	drive    func(x *exporter.Exporter, ns string, pods []string, load float64) error
	highLoad float64
	lowLoad  float64
	wantHigh int32
	wantLow  int32
}

// fpmCapacity is the php-fpm process count of each pod of the scenarios.
const fpmCapacity = 10

// driveFPM spreads `load` busy processes evenly over the pods (each at most
// fpmCapacity), as a load balancer would, and drops series of gone pods.
func driveFPM(x *exporter.Exporter, ns string, pods []string, load float64) error {
	x.Delete("pm_status", map[string]string{"namespace": ns})
	if len(pods) == 0 {
		return nil
	}
	per := math.Min(load/float64(len(pods)), fpmCapacity)
	for _, p := range pods {
		if err := x.FPM(ns, p, per, fpmCapacity); err != nil {
			return err
		}
	}
	return nil
}

// driveRequests sets the request rate of service "web" (whatever the pods).
func driveRequests(x *exporter.Exporter, ns string, _ []string, load float64) error {
	return x.SetCounterRate("http_requests_total", map[string]string{"namespace": ns, "service": "web"}, load)
}

// TestHPAScaling runs the upstream kube-controller-manager HPA controller
// (plus the deployment and replicaset controllers; pods are made Ready by the
// harness) against metrics served by the adapter: a Deployment scales up
// under load and back down when it falls, on a Pods, an Object and an
// External metric.
func TestHPAScaling(t *testing.T) {
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: testdata("hpa-config.yaml"), PrometheusURL: prom.URL})
	env.MustStartControllerManager(t, framework.ControllerManagerConfig{
		Controllers: []string{framework.HPAController, framework.DeploymentController, framework.ReplicaSetController},
	})

	avg := func(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
	scenarios := []scaleScenario{
		{
			name: "pods-fpm_active_rate",
			metric: autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "fpm_active_rate"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: avg("500m")},
			}},
			// 30 busy processes over 10-process pods at a 50% target: 6 pods; 3: the minimum.
			drive: driveFPM, highLoad: 30, lowLoad: 3, wantHigh: 6, wantLow: 2,
		},
		{
			name: "object-service-requests",
			metric: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "web"},
				Metric:          autoscalingv2.MetricIdentifier{Name: "http_requests_per_second"},
				Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: avg("50")},
			}},
			// 250 req/s at 50 per pod: 5 pods; 40 req/s: the minimum.
			drive: driveRequests, highLoad: 250, lowLoad: 40, wantHigh: 5, wantLow: 2,
		},
		{
			name: "external-requests",
			metric: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "http_requests_per_second", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"service": "web"}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: avg("50")},
			}},
			drive: driveRequests, highLoad: 200, lowLoad: 40, wantHigh: 4, wantLow: 2,
		},
	}
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			runScaleScenario(t, env, x, fmt.Sprintf("hpa-%d", i), sc)
		})
	}
}

func runScaleScenario(t *testing.T, env *framework.Env, x *exporter.Exporter, ns string, sc scaleScenario) {
	ctx := ctxFor(t, 6*time.Minute)
	if err := env.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	podLabels := map[string]string{"app": "web"}
	env.RunPodReadier(ctx, ns, labels.SelectorFromSet(podLabels), 2*time.Second)
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: podLabels, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := int32(2)
	if err := env.CreateDeployment(ctx, ns, "web", replicas, podLabels); err != nil {
		t.Fatal(err)
	}

	// The load driver: re-spreads the current load over the current pods.
	load := make(chan float64, 1)
	load <- sc.highLoad
	driverCtx, stopDriver := context.WithCancel(ctx)
	driverDone := make(chan struct{})
	defer func() { stopDriver(); <-driverDone }()
	go func() {
		defer close(driverDone)
		current := <-load
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if pods, err := env.Client.CoreV1().Pods(ns).List(driverCtx, metav1.ListOptions{LabelSelector: "app=web"}); err == nil {
				var names []string
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil {
						names = append(names, p.Name)
					}
				}
				if err := sc.drive(x, ns, names, current); err != nil {
					t.Errorf("load driver: %v", err)
					return
				}
			}
			select {
			case <-driverCtx.Done():
				return
			case current = <-load:
			case <-tick.C:
			}
		}
	}()

	minR, zero, window := int32(2), int32(0), int32(0)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &minR,
			MaxReplicas:    8,
			Metrics:        []autoscalingv2.MetricSpec{sc.metric},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero},
				// No 5-minute stabilization: the test shows the way down within seconds.
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window, Policies: []autoscalingv2.HPAScalingPolicy{
					{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 1},
				}},
			},
		},
	}
	if _, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	// At least: a Pods metric over a max_over_time window may overshoot
	// while new pods' samples replace old ones.
	got := waitReplicas(t, ctx, env, ns, fmt.Sprintf("at least %d", sc.wantHigh), func(n int32) bool { return n >= sc.wantHigh }, 3*time.Minute)
	t.Logf("scaled up to %d in %s", got, time.Since(t0).Round(time.Second))

	load <- sc.lowLoad
	t1 := time.Now()
	waitReplicas(t, ctx, env, ns, fmt.Sprint(sc.wantLow), func(n int32) bool { return n == sc.wantLow }, 3*time.Minute)
	t.Logf("scaled down to %d in %s", sc.wantLow, time.Since(t1).Round(time.Second))
	// It stays there.
	holdReplicas(t, ctx, env, ns, sc.wantLow, 5*time.Second)

	h, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range h.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive && c.Status != corev1.ConditionTrue {
			t.Errorf("HPA ScalingActive = %s: %s", c.Status, c.Message)
		}
	}
	if len(h.Status.CurrentMetrics) != 1 {
		t.Errorf("HPA status has %d current metrics, want 1: %+v", len(h.Status.CurrentMetrics), h.Status)
	}
}

// waitReplicas waits until the HPA's desired replicas and the Deployment's
// spec.replicas are equal and satisfy ok, reporting the HPA's last status on
// timeout. It returns the replica count reached.
func waitReplicas(t *testing.T, ctx context.Context, env *framework.Env, ns, want string, ok func(int32) bool, timeout time.Duration) int32 {
	t.Helper()
	var reached int32
	eventually(t, ctx, timeout, fmt.Sprintf("deployment %s/web at %s replicas", ns, want), func(ctx context.Context) error {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		h, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		reached = *d.Spec.Replicas
		if reached != h.Status.DesiredReplicas || !ok(reached) {
			return fmt.Errorf("deployment spec.replicas=%d, HPA desired=%d; HPA metrics %+v, conditions %+v",
				*d.Spec.Replicas, h.Status.DesiredReplicas, h.Status.CurrentMetrics, h.Status.Conditions)
		}
		return nil
	})
	return reached
}

// holdReplicas checks the Deployment stays at want for d.
func holdReplicas(t *testing.T, ctx context.Context, env *framework.Env, ns string, want int32, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		dep, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *dep.Spec.Replicas != want {
			t.Fatalf("deployment moved from %d to %d replicas at steady load", want, *dep.Spec.Replicas)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
