package autoscaler_test

import (
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/pkg/autoscaler"
)

// Example shows one reconcile as a controller drives it: fetch what
// MetricSpecs asks for, Decide, update /scale, FinishRescale, write the
// status if it changed, record the events.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, err := autoscaler.New(autoscaler.DefaultConfig(), clocktesting.NewFakePassiveClock(now))
	if err != nil {
		panic(err)
	}
	target := resource.MustParse("10")
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "http_requests"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target}}}},
		},
	}
	var pods []*v1.Pod
	var samples []customapi.MetricValue
	for _, name := range []string{"web-a", "web-b"} {
		pods = append(pods, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}, Status: v1.PodStatus{Phase: v1.PodRunning}})
		samples = append(samples, customapi.MetricValue{DescribedObject: v1.ObjectReference{Name: name}, Timestamp: metav1.NewTime(now), Value: resource.MustParse("25")})
	}

	state := &autoscaler.State{} // one per HPA, kept by the caller between reconciles
	in := autoscaler.Input{HPA: hpa, SpecReplicas: 2, StatusReplicas: 2, Selector: "app=web", Pods: pods}
	if a.NeedsMetrics(hpa, in.SpecReplicas) {
		for range autoscaler.MetricSpecs(hpa) { // one Pods metric here: GetForObjects(pods, "http_requests")
			in.Metrics = append(in.Metrics, autoscaler.FromPodsCustomMetrics(samples, nil))
		}
	}
	d := a.Decide(state, in)
	if d.Rescale {
		var updateErr error // the /scale update's result
		a.FinishRescale(state, &d, updateErr)
	}
	fmt.Println("proposed:", d.MetricReplicas, "desired:", d.DesiredReplicas, "rescale:", d.Rescale)
	fmt.Println("write status:", autoscaler.StatusChanged(&hpa.Status, &d.Status))
	for _, e := range d.Events {
		fmt.Println("event:", e.Type, e.Reason, e.Message)
	}
	for _, c := range d.Status.Conditions {
		fmt.Println("condition:", c.Type, c.Status, c.Reason)
	}
	// Output:
	// proposed: 5 desired: 4 rescale: true
	// write status: true
	// event: Normal SuccessfulRescale New size: 4; reason: pods metric http_requests above target
	// condition: AbleToScale True SucceededRescale
	// condition: ScalingActive True ValidMetricFound
	// condition: ScalingLimited True ScaleUpLimit
	// condition: ScaledToZero False NotScaledToZero
}
