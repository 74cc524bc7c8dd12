package upstreamdiff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/kubernetes/pkg/controller/podautoscaler"
	metricsclient "k8s.io/kubernetes/pkg/controller/podautoscaler/metrics"

	"github.com/promscaler/promscaler/pkg/autoscaler"
)

const ns = "ns"

type fakeMetrics struct {
	pods   metricsclient.PodMetricsInfo
	value  int64
	series []int64
	ts     time.Time
}

func (f *fakeMetrics) copyPods() metricsclient.PodMetricsInfo {
	out := metricsclient.PodMetricsInfo{}
	for k, v := range f.pods {
		out[k] = v
	}
	return out
}
func (f *fakeMetrics) GetResourceMetric(ctx context.Context, r v1.ResourceName, n string, s labels.Selector, c string) (metricsclient.PodMetricsInfo, time.Time, error) {
	return f.copyPods(), f.ts, nil
}
func (f *fakeMetrics) GetRawMetric(m, n string, s, ms labels.Selector) (metricsclient.PodMetricsInfo, time.Time, error) {
	return f.copyPods(), f.ts, nil
}
func (f *fakeMetrics) GetObjectMetric(m, n string, o *autoscalingv2.CrossVersionObjectReference, ms labels.Selector) (int64, time.Time, error) {
	return f.value, f.ts, nil
}
func (f *fakeMetrics) GetExternalMetric(m, n string, s labels.Selector) ([]int64, time.Time, error) {
	return append([]int64(nil), f.series...), f.ts, nil
}

func tolerances(down, up float64) podautoscaler.Tolerances {
	var t podautoscaler.Tolerances
	v := reflect.ValueOf(&t).Elem()
	set := func(i int, x float64) {
		f := v.Field(i)
		reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetFloat(x)
	}
	set(0, down)
	set(1, up)
	return t
}

type world struct {
	now     time.Time
	pods    []*v1.Pod
	metrics *fakeMetrics
	current int32
	status  int32
	tolDown float64
	tolUp   float64
	desc    string
}

func sec(n int) time.Duration { return time.Duration(n) * time.Second }

func randomWorld(r *rand.Rand, now time.Time) *world {
	w := &world{now: now, metrics: &fakeMetrics{pods: metricsclient.PodMetricsInfo{}, ts: now}}
	n := r.IntN(8)
	if r.IntN(10) > 0 {
		n++
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: ns, Labels: map[string]string{"app": "x"}}}
		switch r.IntN(12) {
		case 0:
			p.Status.Phase = v1.PodPending
		case 1:
			p.Status.Phase = v1.PodFailed
		case 2:
			p.Status.Phase = v1.PodSucceeded
		default:
			p.Status.Phase = v1.PodRunning
		}
		if r.IntN(12) == 0 {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		if r.IntN(10) > 0 {
			st := metav1.NewTime(now.Add(-sec(r.IntN(900))))
			p.Status.StartTime = &st
		}
		if r.IntN(10) > 0 {
			status := v1.ConditionTrue
			if r.IntN(3) == 0 {
				status = v1.ConditionFalse
			}
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-sec(r.IntN(900))))}}
		}
		nc := 1 + r.IntN(2)
		for c := 0; c < nc; c++ {
			ctr := v1.Container{Name: fmt.Sprintf("c%d", c)}
			if r.IntN(20) > 0 {
				ctr.Resources.Requests = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(int64(1+r.IntN(2000)), resource.DecimalSI)}
			}
			p.Spec.Containers = append(p.Spec.Containers, ctr)
		}
		if r.IntN(6) == 0 {
			always := v1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "side", RestartPolicy: &always,
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(int64(1+r.IntN(500)), resource.DecimalSI)}}})
		}
		if r.IntN(8) == 0 {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(int64(1+r.IntN(3000)), resource.DecimalSI)}}
		}
		w.pods = append(w.pods, p)
		if r.IntN(6) > 0 {
			w.metrics.pods[p.Name] = metricsclient.PodMetric{Value: int64(r.IntN(4000)), Timestamp: now.Add(-sec(r.IntN(120))), Window: sec(30 * (1 + r.IntN(2)))}
		}
		fmt.Fprintf(&b, "%s phase=%s del=%v start=%v cond=%v c=%d init=%d podlevel=%v metric=%v\n", p.Name, p.Status.Phase, p.DeletionTimestamp != nil, p.Status.StartTime, p.Status.Conditions, len(p.Spec.Containers), len(p.Spec.InitContainers), p.Spec.Resources != nil, w.metrics.pods[p.Name])
	}
	if r.IntN(6) == 0 {
		w.metrics.pods["stale"] = metricsclient.PodMetric{Value: int64(r.IntN(4000)), Timestamp: now, Window: time.Minute}
	}
	w.current = int32(1 + r.IntN(10))
	w.status = int32(r.IntN(10))
	tols := []float64{0, 0.05, 0.1, 0.3}
	w.tolDown, w.tolUp = tols[r.IntN(4)], tols[r.IntN(4)]
	w.metrics.value = int64(r.IntN(100000))
	for i := 0; i < 1+r.IntN(3); i++ {
		w.metrics.series = append(w.metrics.series, int64(r.IntN(50000)))
	}
	w.desc = b.String()
	return w
}

func (w *world) lister() corelisters.PodLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range w.pods {
		_ = idx.Add(p)
	}
	return corelisters.NewPodLister(idx)
}

func (w *world) ours(t *testing.T, spec autoscalingv2.MetricSpec, values autoscaler.MetricValues) autoscaler.MetricResult {
	cfg := autoscaler.DefaultConfig()
	cfg.CPUInitializationPeriod = 2 * time.Minute
	cfg.InitialReadinessDelay = 10 * time.Second
	a, err := autoscaler.New(cfg, clocktesting.NewFakePassiveClock(w.now))
	if err != nil {
		t.Fatal(err)
	}
	down := resource.MustParse(fmt.Sprint(w.tolDown))
	up := resource.MustParse(fmt.Sprint(w.tolUp))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "d"},
			MaxReplicas:    1000, MinReplicas: ptr(int32(0)),
			Metrics:  []autoscalingv2.MetricSpec{spec},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: &up}, ScaleDown: &autoscalingv2.HPAScalingRules{Tolerance: &down}},
		},
	}
	if w.current == 0 {
		hpa.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: v1.ConditionTrue}}
	}
	d := a.Decide(&autoscaler.State{}, autoscaler.Input{HPA: hpa, SpecReplicas: w.current, StatusReplicas: w.status, Selector: "app=x", Pods: w.pods, Metrics: []autoscaler.MetricValues{values}})
	return d.Metrics[0]
}

func ptr[T any](v T) *T { return &v }

func perPod(m metricsclient.PodMetricsInfo) autoscaler.MetricValues {
	out := map[string]autoscaler.PodMetric{}
	for k, v := range m {
		out[k] = autoscaler.PodMetric{Value: v.Value, Timestamp: v.Timestamp, Window: v.Window}
	}
	return autoscaler.MetricValues{PerPod: out}
}

var podRef = regexp.MustCompile(`container \S+ of Pod \S+`)

// normErr hides which pod an error names: upstream lists pods in map order.
func normErr(s string) string { return podRef.ReplaceAllString(s, "container C of Pod P") }

func check(t *testing.T, w *world, what string, upR int32, upVal int64, upErr error, got autoscaler.MetricResult, gotVal int64) {
	t.Helper()
	if upErr != nil {
		if got.Err == nil || !strings.Contains(normErr(got.Err.Error()), normErr(upErr.Error())) {
			t.Fatalf("%s: upstream error %q, ours %v\n%s", what, upErr, got.Err, w.desc)
		}
		return
	}
	if got.Err != nil {
		t.Fatalf("%s: upstream ok (%d, %d), ours error %v\n%s", what, upR, upVal, got.Err, w.desc)
	}
	if got.Replicas != upR || gotVal != upVal {
		t.Fatalf("%s: upstream (%d, %d), ours (%d, %d); current %d tol %v/%v\n%s", what, upR, upVal, got.Replicas, gotVal, w.current, w.tolDown, w.tolUp, w.desc)
	}
}

// current is our current value of a Value or AverageValue target in
// milli-units (the one the status holds), 0 when the metric failed.
func current(got autoscaler.MetricResult) int64 {
	switch c := autoscaler.CurrentValue(got.Status); {
	case got.Err != nil || c == nil:
		return 0
	case c.Value != nil:
		return c.Value.MilliValue()
	case c.AverageValue != nil:
		return c.AverageValue.MilliValue()
	}
	return 0
}

func TestDifferential(t *testing.T) {
	seed, _ := strconv.ParseUint(os.Getenv("SEED"), 10, 64)
	r := rand.New(rand.NewPCG(seed, 2))
	sel := labels.SelectorFromSet(labels.Set{"app": "x"})
	for iter := 0; iter < 60000; iter++ {
		now := time.Now().Truncate(time.Second)
		w := randomWorld(r, now)
		calc := podautoscaler.NewReplicaCalculator(w.metrics, w.lister(), 2*time.Minute, 10*time.Second)
		tol := tolerances(w.tolDown, w.tolUp)
		target := int32(10 + r.IntN(190))
		container := ""
		if r.IntN(4) == 0 {
			container = "c0"
		}

		// Resource utilization
		upR, upUtil, upRaw, _, upErr := calc.GetResourceReplicas(context.Background(), w.current, target, v1.ResourceCPU, tol, ns, sel, container)
		var spec autoscalingv2.MetricSpec
		if container == "" {
			spec = autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: v1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}
		} else {
			spec = autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: v1.ResourceCPU, Container: container,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}
		}
		got := w.ours(t, spec, perPod(w.metrics.pods))
		var gotUtil, gotRaw int64
		if got.Err == nil {
			cur := got.Status.Resource
			var c autoscalingv2.MetricValueStatus
			if cur != nil {
				c = cur.Current
			} else {
				c = got.Status.ContainerResource.Current
			}
			gotUtil, gotRaw = int64(*c.AverageUtilization), c.AverageValue.MilliValue()
			if upErr == nil && gotRaw != upRaw {
				t.Fatalf("utilization raw: upstream %d ours %d\n%s", upRaw, gotRaw, w.desc)
			}
		}
		check(t, w, fmt.Sprintf("utilization target %d container %q", target, container), upR, int64(upUtil), upErr, got, gotUtil)

		// Resource average value
		avg := int64(1 + r.IntN(2000))
		upR, upUsage, _, upErr := calc.GetRawResourceReplicas(context.Background(), w.current, avg, v1.ResourceCPU, tol, ns, sel, "")
		got = w.ours(t, autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: v1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewMilliQuantity(avg, resource.DecimalSI)}}}, perPod(w.metrics.pods))
		check(t, w, "cpu average value", upR, upUsage, upErr, got, current(got))

		// Pods metric
		upR, upUsage, _, upErr = calc.GetMetricReplicas(w.current, avg, "qps", tol, ns, sel, labels.Everything())
		got = w.ours(t, autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewMilliQuantity(avg, resource.DecimalSI)}}}, perPod(w.metrics.pods))
		check(t, w, "pods metric", upR, upUsage, upErr, got, current(got))

		// Object value
		ref := autoscalingv2.CrossVersionObjectReference{Kind: "Service", Name: "s"}
		objTarget := int64(1 + r.IntN(20000))
		for _, cur := range []int32{w.current, 0} {
			upR, upUsage, _, upErr = calc.GetObjectMetricReplicas(cur, objTarget, "qps", tol, ns, &ref, sel, labels.Everything())
			w2 := *w
			w2.current = cur
			got = w2.ours(t, autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: ref, Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: resource.NewMilliQuantity(objTarget, resource.DecimalSI)}}}, autoscaler.MetricValues{Value: w.metrics.value})
			check(t, &w2, fmt.Sprintf("object value from %d", cur), upR, upUsage, upErr, got, current(got))
		}

		// Object average value (status replicas > 0: upstream divides by zero otherwise)
		if w.status > 0 {
			upR, upUsage, _, upErr = calc.GetObjectPerPodMetricReplicas(w.status, objTarget, "qps", tol, ns, &ref, labels.Everything())
			got = w.ours(t, autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: ref, Metric: autoscalingv2.MetricIdentifier{Name: "qps"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewMilliQuantity(objTarget, resource.DecimalSI)}}}, autoscaler.MetricValues{Value: w.metrics.value})
			check(t, w, "object average value", upR, upUsage, upErr, got, current(got))
		}

		// External value and average value
		upR, upUsage, _, upErr = calc.GetExternalMetricReplicas(w.current, objTarget, "q", tol, ns, nil, sel)
		got = w.ours(t, autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "q"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: resource.NewMilliQuantity(objTarget, resource.DecimalSI)}}}, autoscaler.MetricValues{Series: w.metrics.series})
		check(t, w, "external value", upR, upUsage, upErr, got, current(got))
		if w.status > 0 {
			upR, upUsage, _, upErr = calc.GetExternalPerPodMetricReplicas(w.status, objTarget, "q", tol, ns, nil)
			got = w.ours(t, autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "q"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewMilliQuantity(objTarget, resource.DecimalSI)}}}, autoscaler.MetricValues{Series: w.metrics.series})
			check(t, w, "external average value", upR, upUsage, upErr, got, current(got))
		}
	}
}
