package autoscaler

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// FuzzDecide drives Decide and FinishRescale with arbitrary HPAs (valid or
// not: missing sources, zero and negative targets, odd policies), pods and
// samples over several reconciles. It must never panic, and a rescale must
// land within [minReplicas, maxReplicas] whenever the current count was
// inside that range.
func FuzzDecide(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 42, 1 << 40} {
		f.Add(seed, uint8(3), uint8(4))
	}
	f.Fuzz(func(t *testing.T, seed uint64, nPods, steps uint8) {
		r := rand.New(rand.NewPCG(seed, uint64(nPods)<<8|uint64(steps)))
		clk := clocktesting.NewFakePassiveClock(testNow)
		cfg := DefaultConfig()
		cfg.Features.ScaleToZero = r.IntN(2) == 0
		cfg.DownscaleStabilizationWindow = time.Duration(r.IntN(600)) * time.Second
		a, err := New(cfg, clk)
		if err != nil {
			t.Fatal(err)
		}
		hpa := fuzzHPA(r)
		pods := make([]*v1.Pod, int(nPods)%12)
		for i := range pods {
			pods[i] = fuzzPod(r, i)
		}
		state := &State{}
		current := int32(r.IntN(15))
		for s := 0; s < 1+int(steps)%8; s++ {
			clk.SetTime(testNow.Add(time.Duration(s*15) * time.Second))
			in := Input{HPA: hpa, SpecReplicas: current, StatusReplicas: int32(r.IntN(15)), Selector: "app=x", Pods: pods}
			for range MetricSpecs(hpa) {
				in.Metrics = append(in.Metrics, fuzzValues(r, pods))
			}
			d := a.Decide(state, in)
			minR := *hpa.Spec.MinReplicas
			if d.Rescale && current >= minR && current <= hpa.Spec.MaxReplicas && current > 0 &&
				(d.DesiredReplicas < minR || d.DesiredReplicas > hpa.Spec.MaxReplicas) {
				t.Fatalf("step %d: rescale from %d to %d outside [%d, %d]", s, current, d.DesiredReplicas, minR, hpa.Spec.MaxReplicas)
			}
			if d.Rescale {
				var err error
				if r.IntN(5) == 0 {
					err = fmt.Errorf("conflict")
				}
				a.FinishRescale(state, &d, err)
				if err == nil {
					current = d.DesiredReplicas
				}
			}
			hpa = hpa.DeepCopy()
			hpa.Status = d.Status
		}
	})
}

func fuzzHPA(r *rand.Rand) *autoscalingv2.HorizontalPodAutoscaler {
	maxR := int32(1 + r.IntN(12))
	minR := int32(r.IntN(int(maxR) + 1))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "ns"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "d"},
			MinReplicas:    &minR, MaxReplicas: maxR,
		},
	}
	q := func() *resource.Quantity {
		if r.IntN(8) == 0 {
			return nil
		}
		return resource.NewMilliQuantity(int64(r.IntN(40000)-1000), resource.DecimalSI)
	}
	types := []autoscalingv2.MetricTargetType{autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType, "Bogus"}
	target := func() autoscalingv2.MetricTarget {
		u := int32(r.IntN(300) - 10)
		t := autoscalingv2.MetricTarget{Type: types[r.IntN(len(types))], Value: q(), AverageValue: q()}
		if r.IntN(2) == 0 {
			t.AverageUtilization = &u
		}
		return t
	}
	for i := 0; i < r.IntN(4); i++ {
		var m autoscalingv2.MetricSpec
		switch r.IntN(7) {
		case 0:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: v1.ResourceCPU, Target: target()}}
		case 1:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: v1.ResourceMemory, Container: "c0", Target: target()}}
		case 2:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "m"}, Target: target()}}
		case 3:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "m"}, Target: target()}}
		case 4:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "m"}, Target: target()}}
		case 5:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType([]string{"Pods", "Object", "External", "Resource", "ContainerResource", "x"}[r.IntN(6)])}
		default:
			m = autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "m", Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bad"}}}}, Target: target()}}
		}
		hpa.Spec.Metrics = append(hpa.Spec.Metrics, m)
	}
	if r.IntN(2) == 0 {
		b := &autoscalingv2.HorizontalPodAutoscalerBehavior{}
		rules := func() *autoscalingv2.HPAScalingRules {
			if r.IntN(3) == 0 {
				return nil
			}
			w := int32(r.IntN(400))
			sel := []autoscalingv2.ScalingPolicySelect{"Max", "Min", "Disabled", "Weird"}[r.IntN(4)]
			rr := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &w, SelectPolicy: &sel}
			for i := 0; i < r.IntN(3); i++ {
				rr.Policies = append(rr.Policies, autoscalingv2.HPAScalingPolicy{Type: []autoscalingv2.HPAScalingPolicyType{"Pods", "Percent", "Other"}[r.IntN(3)],
					Value: int32(r.IntN(300) - 5), PeriodSeconds: int32(r.IntN(120))})
			}
			if r.IntN(3) == 0 {
				t := resource.MustParse(fmt.Sprint(r.Float64()))
				rr.Tolerance = &t
			}
			return rr
		}
		b.ScaleUp, b.ScaleDown = rules(), rules()
		hpa.Spec.Behavior = b
	}
	if r.IntN(3) == 0 {
		hpa.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: v1.ConditionTrue}}
	}
	return hpa
}

func fuzzPod(r *rand.Rand, i int) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)}}
	p.Status.Phase = []v1.PodPhase{v1.PodRunning, v1.PodPending, v1.PodFailed, v1.PodSucceeded, ""}[r.IntN(5)]
	if r.IntN(2) == 0 {
		st := metav1.NewTime(testNow.Add(-time.Duration(r.IntN(900)) * time.Second))
		p.Status.StartTime = &st
	}
	if r.IntN(3) > 0 {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: []v1.ConditionStatus{v1.ConditionTrue, v1.ConditionFalse, v1.ConditionUnknown}[r.IntN(3)],
			LastTransitionTime: metav1.NewTime(testNow.Add(-time.Duration(r.IntN(900)) * time.Second))}}
	}
	if r.IntN(8) == 0 {
		p.DeletionTimestamp = &metav1.Time{Time: testNow}
	}
	for c := 0; c < r.IntN(3); c++ {
		ctr := v1.Container{Name: fmt.Sprintf("c%d", c)}
		if r.IntN(6) > 0 {
			ctr.Resources.Requests = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(int64(r.IntN(3000)), resource.DecimalSI),
				v1.ResourceMemory: *resource.NewQuantity(int64(r.IntN(1<<30)), resource.BinarySI)}
		}
		p.Spec.Containers = append(p.Spec.Containers, ctr)
	}
	if r.IntN(5) == 0 {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(int64(r.IntN(3000)), resource.DecimalSI)}}
	}
	return p
}

func fuzzValues(r *rand.Rand, pods []*v1.Pod) MetricValues {
	if r.IntN(6) == 0 {
		return MetricValues{Err: fmt.Errorf("unavailable")}
	}
	v := MetricValues{PerPod: map[string]PodMetric{}, Value: r.Int64N(1<<62) - 1<<61}
	for _, p := range pods {
		if r.IntN(4) > 0 {
			v.PerPod[p.Name] = PodMetric{Value: r.Int64N(1 << 40), Timestamp: testNow.Add(-time.Duration(r.IntN(120)) * time.Second), Window: time.Duration(r.IntN(90)) * time.Second}
		}
	}
	for i := 0; i < r.IntN(4); i++ {
		v.Series = append(v.Series, r.Int64N(1<<62)-1<<61)
	}
	return v
}
