package upstreamdiff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	autoscalingapiv2 "k8s.io/kubernetes/pkg/apis/autoscaling/v2"
	"k8s.io/kubernetes/pkg/controller/podautoscaler"
	metricsclient "k8s.io/kubernetes/pkg/controller/podautoscaler/metrics"

	"github.com/promscaler/promscaler/pkg/autoscaler"
)

// namedMetrics answers per metric name, failing for "broken".
type namedMetrics struct{ fakeMetrics }

var errBroken = errors.New("the metric is broken")

func (f *namedMetrics) GetRawMetric(m, n string, s, ms labels.Selector) (metricsclient.PodMetricsInfo, time.Time, error) {
	if m == "broken" {
		return nil, time.Time{}, errBroken
	}
	return f.fakeMetrics.GetRawMetric(m, n, s, ms)
}
func (f *namedMetrics) GetExternalMetric(m, n string, s labels.Selector) ([]int64, time.Time, error) {
	if m == "broken" {
		return nil, time.Time{}, errBroken
	}
	return f.fakeMetrics.GetExternalMetric(m, n, s)
}

func randomHPA(r *rand.Rand) *autoscalingv2.HorizontalPodAutoscaler {
	maxR := int32(1 + r.IntN(12))
	minR := int32(r.IntN(int(maxR) + 1))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: ns, Generation: 2},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"},
			MinReplicas:    &minR, MaxReplicas: maxR,
		},
	}
	q := func(milli int) *resource.Quantity { return resource.NewMilliQuantity(int64(milli), resource.DecimalSI) }
	for i := 0; i < 1+r.IntN(3); i++ {
		name := "qps"
		if r.IntN(6) == 0 {
			name = "broken"
		}
		var m autoscalingv2.MetricSpec
		switch r.IntN(5) {
		case 0:
			t := int32(10 + r.IntN(150))
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: v1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &t}}}
		case 1:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: name},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q(1 + r.IntN(3000))}}}
		case 2:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "s"}, Metric: autoscalingv2.MetricIdentifier{Name: name},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q(1 + r.IntN(30000))}}}
		case 3:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: name},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q(1 + r.IntN(30000))}}}
		default:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: name},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q(1 + r.IntN(30000))}}}
		}
		hpa.Spec.Metrics = append(hpa.Spec.Metrics, m)
	}
	if r.IntN(2) == 0 {
		zero := int32(0)
		b := &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero},
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero},
		}
		policies := []autoscalingv2.HPAScalingPolicy{}
		for i := 0; i < r.IntN(3); i++ {
			typ := autoscalingv2.PodsScalingPolicy
			if r.IntN(2) == 0 {
				typ = autoscalingv2.PercentScalingPolicy
			}
			policies = append(policies, autoscalingv2.HPAScalingPolicy{Type: typ, Value: int32(1 + r.IntN(200)), PeriodSeconds: int32(1 + r.IntN(600))})
		}
		sel := []autoscalingv2.ScalingPolicySelect{autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect, autoscalingv2.DisabledPolicySelect}
		if len(policies) > 0 {
			b.ScaleUp.Policies = policies
			b.ScaleUp.SelectPolicy = &sel[r.IntN(3)]
			b.ScaleDown.Policies = policies
			b.ScaleDown.SelectPolicy = &sel[r.IntN(3)]
		}
		if r.IntN(3) == 0 {
			t := resource.MustParse(fmt.Sprint([]float64{0, 0.05, 0.2}[r.IntN(3)]))
			b.ScaleUp.Tolerance = &t
		}
		hpa.Spec.Behavior = b
	}
	if r.IntN(4) == 0 {
		hpa.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: v1.ConditionTrue, Reason: "ScaledToZero"}}
	}
	return hpa
}

type upstreamResult struct {
	status   *autoscalingv2.HorizontalPodAutoscalerStatus
	scaledTo *int32
	events   []string // "Type Reason: Message", sorted
}

func runUpstream(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler, w *world, metrics metricsclient.MetricsClient, spec, status int32) upstreamResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defaulted := hpa.DeepCopy()
	autoscalingapiv2.SetDefaults_HorizontalPodAutoscaler(defaulted)
	objs := []runtime.Object{defaulted}
	for _, p := range w.pods {
		objs = append(objs, p.DeepCopy())
	}
	client := fake.NewSimpleClientset(objs...)
	var mu sync.Mutex
	var res upstreamResult
	done := make(chan struct{}, 1)
	client.PrependReactor("update", "horizontalpodautoscalers", func(a core.Action) (bool, runtime.Object, error) {
		obj := a.(core.UpdateAction).GetObject().(*autoscalingv2.HorizontalPodAutoscaler)
		mu.Lock()
		if res.status == nil {
			res.status = obj.Status.DeepCopy()
			done <- struct{}{}
		}
		mu.Unlock()
		return true, obj, nil
	})
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("get", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns},
			Spec: autoscalingv1.ScaleSpec{Replicas: spec}, Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: "app=x"}}, nil
	})
	scales.AddReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		obj := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale)
		mu.Lock()
		n := obj.Spec.Replicas
		res.scaledTo = &n
		mu.Unlock()
		return true, obj, nil
	})
	startUpstream(ctx, client, scales, metrics, time.Hour, 0)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("upstream controller wrote no status")
	}
	// events go out asynchronously through the broadcaster
	time.Sleep(150 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "events" {
			e := a.(core.CreateAction).GetObject().(*v1.Event)
			res.events = append(res.events, e.Type+" "+e.Reason+": "+e.Message)
		}
	}
	sort.Strings(res.events)
	return res
}

// startUpstream runs kube-controller-manager's HPA controller on the fakes
// until ctx ends, with sync period resync and downscale stabilization
// window (the other flags at their defaults).
func startUpstream(ctx context.Context, client *fake.Clientset, scales *scalefake.FakeScaleClient, metrics metricsclient.MetricsClient, resync, window time.Duration) {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := podautoscaler.NewHorizontalController(ctx, client.CoreV1(), scales, client.AutoscalingV2(), mapper, metrics,
		factory.Autoscaling().V2().HorizontalPodAutoscalers(), factory.Core().V1().Pods(), resync, window, 0.1, 2*time.Minute, 10*time.Second)
	factory.Start(ctx.Done())
	go c.Run(ctx, 1)
}

func TestReconcileDifferential(t *testing.T) {
	seed, _ := strconv.ParseUint(os.Getenv("SEED"), 10, 64)
	r := rand.New(rand.NewPCG(seed, 99))
	n := 300
	if s := os.Getenv("N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	for iter := 0; iter < n; iter++ {
		now := time.Now().Truncate(time.Second)
		w := randomWorld(r, now)
		for _, p := range w.pods {
			p.Labels = map[string]string{"app": "x"}
		}
		hpa := randomHPA(r)
		spec := int32(r.IntN(int(hpa.Spec.MaxReplicas) + 3))
		status := int32(r.IntN(12))
		metrics := &namedMetrics{*w.metrics}
		up := runUpstream(t, hpa, w, metrics, spec, status)

		// ours
		cfg := autoscaler.DefaultConfig()
		cfg.CPUInitializationPeriod, cfg.InitialReadinessDelay, cfg.DownscaleStabilizationWindow = 2*time.Minute, 10*time.Second, 0
		a, _ := autoscaler.New(cfg, clocktesting.NewFakePassiveClock(time.Now()))
		in := autoscaler.Input{HPA: hpa, SpecReplicas: spec, StatusReplicas: status, Selector: "app=x", Pods: w.pods}
		for _, ms := range autoscaler.MetricSpecs(hpa) {
			var mv autoscaler.MetricValues
			name := ""
			switch ms.Type {
			case autoscalingv2.PodsMetricSourceType:
				name = ms.Pods.Metric.Name
			case autoscalingv2.ObjectMetricSourceType:
				name = ms.Object.Metric.Name
			case autoscalingv2.ExternalMetricSourceType:
				name = ms.External.Metric.Name
			}
			switch {
			case name == "broken" && ms.Type == autoscalingv2.ExternalMetricSourceType:
				mv.Err = errBroken
			case name == "broken":
				mv.Err = errBroken
			case ms.Type == autoscalingv2.ResourceMetricSourceType || ms.Type == autoscalingv2.PodsMetricSourceType:
				mv = perPod(w.metrics.pods)
			case ms.Type == autoscalingv2.ObjectMetricSourceType:
				mv.Value = w.metrics.value
			case ms.Type == autoscalingv2.ExternalMetricSourceType:
				mv.Series = w.metrics.series
			}
			in.Metrics = append(in.Metrics, mv)
		}
		state := &autoscaler.State{}
		d := a.Decide(state, in)
		var scaledTo *int32
		if d.Rescale {
			a.FinishRescale(state, &d, nil)
			n := d.DesiredReplicas
			scaledTo = &n
		}
		fail := func(format string, args ...any) {
			t.Fatalf("iteration %d: %s\nspec=%d status=%d hpa=%+v\nbehavior=%+v\npods:\n%s", iter, fmt.Sprintf(format, args...), spec, status, hpa.Spec, hpa.Spec.Behavior, w.desc)
		}
		if (up.scaledTo == nil) != (scaledTo == nil) || (up.scaledTo != nil && *up.scaledTo != *scaledTo) {
			fail("upstream scaled to %v, ours %v", deref(up.scaledTo), deref(scaledTo))
		}
		us, os := up.status, d.Status
		if us.CurrentReplicas != os.CurrentReplicas || us.DesiredReplicas != os.DesiredReplicas || (us.LastScaleTime == nil) != (os.LastScaleTime == nil) {
			fail("replicas/lastScaleTime: upstream %d/%d/%v ours %d/%d/%v", us.CurrentReplicas, us.DesiredReplicas, us.LastScaleTime != nil, os.CurrentReplicas, os.DesiredReplicas, os.LastScaleTime != nil)
		}
		if len(us.Conditions) != len(os.Conditions) {
			fail("conditions: upstream %+v\nours %+v", us.Conditions, os.Conditions)
		}
		for i := range us.Conditions {
			u, o := us.Conditions[i], os.Conditions[i]
			if u.Type != o.Type || u.Status != o.Status || u.Reason != o.Reason || normErr(u.Message) != normErr(o.Message) {
				fail("condition %d: upstream %+v\nours %+v", i, u, o)
			}
		}
		var ourEvents []string
		for _, e := range d.Events {
			ourEvents = append(ourEvents, e.Type+" "+e.Reason+": "+e.Message)
		}
		sort.Strings(ourEvents)
		if fmt.Sprint(normEvents(up.events)) != fmt.Sprint(normEvents(ourEvents)) {
			fail("events: upstream %q\nours %q", up.events, ourEvents)
		}
		cmpUp := us.DeepCopy()
		cmpOurs := os.DeepCopy()
		cmpUp.Conditions, cmpOurs.Conditions, cmpUp.LastScaleTime, cmpOurs.LastScaleTime = nil, nil, nil, nil
		if status == 0 { // upstream divides by zero here (documented divergence)
			for _, st := range []*autoscalingv2.HorizontalPodAutoscalerStatus{cmpUp, cmpOurs} {
				for i := range st.CurrentMetrics {
					if e := st.CurrentMetrics[i].External; e != nil && e.Current.AverageValue != nil {
						e.Current.AverageValue = nil
					}
				}
			}
		}
		if autoscaler.StatusChanged(cmpUp, cmpOurs) {
			fail("status: upstream %+v\nours %+v", cmpUp, cmpOurs)
		}
	}
}

// normEvents hides pod names chosen in map order and drops repeats: the
// event recorder's correlator turns a repeated event into a count update
// of the first, not a second event.
func normEvents(evs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range evs {
		if n := normErr(e); !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func deref(p *int32) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func (f *namedMetrics) GetObjectMetric(m, n string, o *autoscalingv2.CrossVersionObjectReference, ms labels.Selector) (int64, time.Time, error) {
	if m == "broken" {
		return 0, time.Time{}, errBroken
	}
	return f.fakeMetrics.GetObjectMetric(m, n, o, ms)
}
