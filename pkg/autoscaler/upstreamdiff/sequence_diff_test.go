package upstreamdiff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	autoscalingapiv2 "k8s.io/kubernetes/pkg/apis/autoscaling/v2"
	metricsclient "k8s.io/kubernetes/pkg/controller/podautoscaler/metrics"

	"github.com/promscaler/promscaler/pkg/autoscaler"
)

// seqMetrics serves the external metric value of the current reconcile.
type seqMetrics struct {
	mu     sync.Mutex
	values []int64
	k      *int
}

func (s *seqMetrics) GetResourceMetric(context.Context, v1.ResourceName, string, labels.Selector, string) (metricsclient.PodMetricsInfo, time.Time, error) {
	return nil, time.Time{}, fmt.Errorf("unused")
}
func (s *seqMetrics) GetRawMetric(string, string, labels.Selector, labels.Selector) (metricsclient.PodMetricsInfo, time.Time, error) {
	return nil, time.Time{}, fmt.Errorf("unused")
}
func (s *seqMetrics) GetObjectMetric(string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	return 0, time.Time{}, fmt.Errorf("unused")
}
func (s *seqMetrics) GetExternalMetric(string, string, labels.Selector) ([]int64, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(*s.k-1, len(s.values)-1)
	return []int64{s.values[i]}, time.Now(), nil
}

// TestSequenceDifferential runs random HPAs through several reconciles of
// the real controller (one a second) and replays the same reconciles, at
// the same times, through the core: stabilization windows, rate policies
// and their scale-event history must give the same replica sequence and
// the same final conditions. Windows and periods are whole seconds, far
// from the reconcile instants.
func TestSequenceDifferential(t *testing.T) {
	seed, _ := strconv.ParseUint(os.Getenv("SEED"), 10, 64)
	r := rand.New(rand.NewPCG(seed, 7))
	n := 4
	if s := os.Getenv("SEQ"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	const steps = 8
	for iter := 0; iter < n; iter++ {
		maxR := int32(2 + r.IntN(20))
		minR := int32(1 + r.IntN(int(maxR)))
		target := resource.NewMilliQuantity(int64(1000+r.IntN(9000)), resource.DecimalSI)
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: ns},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"},
				MinReplicas:    &minR, MaxReplicas: maxR,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "q"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: target}}}},
			},
		}
		window := time.Duration(r.IntN(4)) * time.Second
		if r.IntN(3) > 0 {
			w := func() *int32 { v := int32(r.IntN(4)); return &v }
			rules := func() *autoscalingv2.HPAScalingRules {
				sel := []autoscalingv2.ScalingPolicySelect{"Max", "Min", "Disabled"}[r.IntN(3)]
				rr := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: w(), SelectPolicy: &sel}
				for i := 0; i < 1+r.IntN(2); i++ {
					typ := autoscalingv2.PodsScalingPolicy
					if r.IntN(2) == 0 {
						typ = autoscalingv2.PercentScalingPolicy
					}
					rr.Policies = append(rr.Policies, autoscalingv2.HPAScalingPolicy{Type: typ, Value: int32(1 + r.IntN(100)), PeriodSeconds: int32(1 + r.IntN(4))})
				}
				return rr
			}
			hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: rules(), ScaleDown: rules()}
			if r.IntN(2) == 0 {
				hpa.Spec.Behavior.ScaleDown.StabilizationWindowSeconds = nil // from the flag
			}
		}
		values := make([]int64, steps)
		for i := range values {
			values[i] = int64(r.IntN(int(maxR)*2+1)) * target.MilliValue() / int64(1+r.IntN(3))
		}
		start := int32(minR + int32(r.IntN(int(maxR-minR)+1)))

		times, upReplicas, upStatus := runUpstreamSequence(t, hpa, window, values, start, steps)

		// ours, at the upstream reconcile times
		cfg := autoscaler.DefaultConfig()
		cfg.DownscaleStabilizationWindow = window
		clk := clocktesting.NewFakePassiveClock(times[0])
		a, _ := autoscaler.New(cfg, clk)
		state := &autoscaler.State{}
		cur := start
		h := hpa.DeepCopy()
		var ours []int32
		for k := range times {
			clk.SetTime(times[k])
			d := a.Decide(state, autoscaler.Input{HPA: h, SpecReplicas: cur, StatusReplicas: cur, Selector: "app=x",
				Metrics: []autoscaler.MetricValues{{Series: []int64{values[min(k, len(values)-1)]}}}})
			if d.Rescale {
				a.FinishRescale(state, &d, nil)
				cur = d.DesiredReplicas
			}
			h = h.DeepCopy()
			h.Status = d.Status
			ours = append(ours, cur)
		}
		if fmt.Sprint(ours) != fmt.Sprint(upReplicas) {
			t.Fatalf("scenario %d: replicas upstream %v, ours %v\nvalues %v target %v start %d window %v\nspec %+v\nbehavior %+v", iter, upReplicas, ours, values, target, start, window, hpa.Spec, hpa.Spec.Behavior)
		}
		if len(upStatus.Conditions) != len(h.Status.Conditions) {
			t.Fatalf("scenario %d: conditions upstream %+v ours %+v", iter, upStatus.Conditions, h.Status.Conditions)
		}
		for i, c := range upStatus.Conditions {
			o := h.Status.Conditions[i]
			if c.Type != o.Type || c.Status != o.Status || c.Reason != o.Reason || c.Message != o.Message {
				t.Fatalf("scenario %d: condition %d upstream %+v ours %+v", iter, i, c, o)
			}
		}
		t.Logf("scenario %d: %v agree", iter, ours)
	}
}

func runUpstreamSequence(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler, window time.Duration, values []int64, start int32, steps int) ([]time.Time, []int32, *autoscalingv2.HorizontalPodAutoscalerStatus) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defaulted := hpa.DeepCopy()
	autoscalingapiv2.SetDefaults_HorizontalPodAutoscaler(defaulted)
	client := fake.NewSimpleClientset(defaulted)
	var (
		mu       sync.Mutex
		k        int
		replicas = start
		times    []time.Time
		after    []int32
		last     *autoscalingv2.HorizontalPodAutoscalerStatus
	)
	metrics := &seqMetrics{values: values, k: &k}
	client.PrependReactor("update", "horizontalpodautoscalers", func(a core.Action) (bool, runtime.Object, error) {
		obj := a.(core.UpdateAction).GetObject().(*autoscalingv2.HorizontalPodAutoscaler)
		mu.Lock()
		if k <= steps { // written by reconcile k-1, one of those compared
			last = obj.Status.DeepCopy()
		}
		mu.Unlock()
		return false, nil, nil // let the tracker store it, so the informer sees it
	})
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("get", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if k > 0 {
			after = append(after, replicas) // the previous reconcile's outcome
		}
		metrics.mu.Lock()
		k++
		metrics.mu.Unlock()
		times = append(times, time.Now())
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns},
			Spec: autoscalingv1.ScaleSpec{Replicas: replicas}, Status: autoscalingv1.ScaleStatus{Replicas: replicas, Selector: "app=x"}}, nil
	})
	scales.AddReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		obj := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale)
		mu.Lock()
		replicas = obj.Spec.Replicas
		mu.Unlock()
		return true, obj, nil
	})
	startUpstream(ctx, client, scales, metrics, time.Second, window)
	deadline := time.Now().Add(time.Duration(steps+10) * 2 * time.Second)
	for {
		mu.Lock()
		done := k > steps
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream made only %d reconciles", k)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	mu.Lock()
	defer mu.Unlock()
	// the reconcile k = steps has started: keep the first `steps` outcomes;
	// last is the status written by reconcile steps-1 or earlier
	return times[:steps], after[:steps], last
}
