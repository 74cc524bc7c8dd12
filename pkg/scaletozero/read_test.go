package scaletozero

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/promscaler/promscaler/pkg/autoscaler"
)

func TestReadMetrics(t *testing.T) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{
		{Type: autoscalingv2.PodsMetricSourceType},
		{Type: autoscalingv2.ExternalMetricSourceType},
	}}}
	own := MetricRef{HPAIndex: 1}
	explicit := MetricRef{HPAIndex: -1}
	fail := errors.New("down")
	cases := []struct {
		name       string
		spec       Spec
		replicas   int32
		values     map[int]autoscaler.MetricValues
		wantReads  []int
		wantFailed bool
		wantMilli  int64
		wantErr    bool
	}{
		{name: "fallback reads every own metric", spec: Spec{Fallback: &Fallback{}}, replicas: 2,
			values: map[int]autoscaler.MetricValues{0: {Err: fail}, 1: {Err: fail}}, wantReads: []int{0, 1}, wantFailed: true},
		{name: "one readable metric is no failure", spec: Spec{Fallback: &Fallback{}}, replicas: 2,
			values: map[int]autoscaler.MetricValues{0: {Err: fail}, 1: {Value: 1}}, wantReads: []int{0, 1}},
		{name: "no per-pod reads at zero replicas", spec: Spec{Fallback: &Fallback{}}, replicas: 0,
			values: map[int]autoscaler.MetricValues{1: {Err: fail}}, wantReads: []int{1}, wantFailed: true},
		{name: "an own activation metric is read once", spec: Spec{Fallback: &Fallback{}, Activation: &Activation{Metric: own}}, replicas: 2,
			values: map[int]autoscaler.MetricValues{0: {}, 1: {Series: []int64{1500, 500}}}, wantReads: []int{0, 1}, wantMilli: 2000},
		{name: "an explicit activation metric alone", spec: Spec{Activation: &Activation{Metric: explicit}}, replicas: 0,
			values: map[int]autoscaler.MetricValues{-1: {Err: fail}}, wantReads: []int{-1}, wantFailed: true, wantErr: true},
		{name: "a readable explicit activation metric makes the period a good one", spec: Spec{Fallback: &Fallback{}, Activation: &Activation{Metric: explicit}}, replicas: 2,
			values: map[int]autoscaler.MetricValues{0: {Err: fail}, 1: {Err: fail}, -1: {Value: 3000}}, wantReads: []int{0, 1, -1}, wantMilli: 3000},
		{name: "nothing configured reads nothing", replicas: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var reads []int
			in := Input{Replicas: tc.replicas}
			ReadMetrics(hpa, tc.spec, true, &in, func(i int, _ *autoscalingv2.MetricSpec) autoscaler.MetricValues {
				reads = append(reads, i)
				return tc.values[i]
			})
			if diff := cmp.Diff(tc.wantReads, reads); diff != "" {
				t.Errorf("reads (-want +got):\n%s", diff)
			}
			if in.MetricsFailed != tc.wantFailed || in.ActivationMilli != tc.wantMilli || (in.ActivationErr != nil) != tc.wantErr {
				t.Errorf("input %+v, want failed %v, activation %d, error %v", in, tc.wantFailed, tc.wantMilli, tc.wantErr)
			}
		})
	}
}
