package autoscaler

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

func TestFromPodMetrics(t *testing.T) {
	ts := metav1.NewTime(testNow)
	win := metav1.Duration{Duration: 30 * time.Second}
	usage := func(cpu string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)} }
	items := []metricsapi.PodMetrics{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Timestamp: ts, Window: win, Containers: []metricsapi.ContainerMetrics{{Name: "app", Usage: usage("100m")}, {Name: "side", Usage: usage("0.0005")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Timestamp: ts, Window: win, Containers: []metricsapi.ContainerMetrics{{Name: "app", Usage: usage("200m")}, {Name: "side", Usage: v1.ResourceList{}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Timestamp: ts, Window: win},
	}
	cases := []struct {
		name      string
		items     []metricsapi.PodMetrics
		err       error
		container string
		want      map[string]int64
		wantErr   string
	}{
		{name: "pod sums: a container missing the resource drops the pod, sub-milli rounds up", items: items, want: map[string]int64{"a": 101}},
		{name: "one container", items: items, container: "app", want: map[string]int64{"a": 100, "b": 200}},
		{name: "container without the resource", items: items, container: "side", want: map[string]int64{"a": 1}},
		{name: "empty list", wantErr: "no metrics returned from resource metrics API"},
		{name: "API error", err: errors.New("503"), wantErr: "unable to fetch metrics from resource metrics API: 503"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mv := FromPodMetrics(tc.items, tc.err, v1.ResourceCPU, tc.container)
			if tc.wantErr != "" {
				if mv.Err == nil || mv.Err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", mv.Err, tc.wantErr)
				}
				return
			}
			got := map[string]int64{}
			for k, v := range mv.PerPod {
				got[k] = v.Value
				if v.Window != 30*time.Second || !v.Timestamp.Equal(testNow) {
					t.Errorf("%s: window %v timestamp %v", k, v.Window, v.Timestamp)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("samples mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromCustomAndExternal(t *testing.T) {
	secs := int64(30)
	pods := FromPodsCustomMetrics([]customapi.MetricValue{
		{DescribedObject: v1.ObjectReference{Name: "a"}, Value: resource.MustParse("1.5"), WindowSeconds: &secs},
		{DescribedObject: v1.ObjectReference{Name: "b"}, Value: resource.MustParse("2")},
	}, nil)
	want := map[string]PodMetric{"a": {Value: 1500, Window: 30 * time.Second}, "b": {Value: 2000, Window: time.Minute}}
	if diff := cmp.Diff(want, pods.PerPod); diff != "" || pods.Err != nil {
		t.Errorf("pods metric mismatch (err %v):\n%s", pods.Err, diff)
	}
	if e := FromPodsCustomMetrics(nil, nil).Err; e == nil || e.Error() != "no metrics returned from custom metrics API" {
		t.Errorf("empty pods list: %v", e)
	}
	obj := FromObjectCustomMetric(&customapi.MetricValue{Value: resource.MustParse("20k")}, nil)
	if obj.Value != 20000000 || obj.Err != nil {
		t.Errorf("object value = %d (%v), want 20000000 milli", obj.Value, obj.Err)
	}
	if e := FromObjectCustomMetric(nil, errors.New("not found")).Err; e == nil || e.Error() != "unable to fetch metrics from custom metrics API: not found" {
		t.Errorf("object error: %v", e)
	}
	ext := FromExternalMetrics([]externalapi.ExternalMetricValue{{Value: resource.MustParse("3")}, {Value: resource.MustParse("250m")}}, nil)
	if diff := cmp.Diff([]int64{3000, 250}, ext.Series); diff != "" {
		t.Errorf("external series mismatch:\n%s", diff)
	}
	if e := FromExternalMetrics(nil, errors.New("x")).Err; e == nil || e.Error() != "unable to fetch metrics from external metrics API: x" {
		t.Errorf("external error: %v", e)
	}
}

// TestEvaluateMetric covers each source type's status, description and
// failure texts as computeStatusFor* produce them.
func TestEvaluateMetric(t *testing.T) {
	q := resource.MustParse
	qp := func(s string) *resource.Quantity { v := q(s); return &v }
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "a"}}
	deploy := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "front"}
	memPods := readyPods(2, 100)
	for _, p := range memPods {
		p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = q("1Gi")
	}
	cases := []struct {
		name       string
		spec       autoscalingv2.MetricSpec
		values     MetricValues
		pods       []*v1.Pod
		wantName   string
		wantProp   int32
		wantStatus autoscalingv2.MetricStatus
		wantErr    string
		wantCond   string
	}{
		{
			name: "memory utilization: binary quantity",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: v1.ResourceMemory,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptrTo[int32](50)}}},
			pods:     memPods,
			values:   MetricValues{PerPod: map[string]PodMetric{"pod-0": {Value: 1 << 39}, "pod-1": {Value: 1 << 39}}},
			wantName: "memory resource utilization (percentage of request)", wantProp: 2,
			wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: v1.ResourceMemory,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptrTo[int32](51), AverageValue: ptrTo(*resource.NewMilliQuantity(1<<39, resource.BinarySI))}}},
		},
		{
			name: "cpu average value",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: v1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qp("100m")}}},
			pods: readyPods(2, 100), values: perPod(300, 300),
			wantName: "cpu resource", wantProp: 6,
			wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: v1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageValue: qp("300m")}}},
		},
		{
			name: "container resource utilization",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: v1.ResourceCPU, Container: "app",
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptrTo[int32](50)}}},
			pods: readyPods(2, 1000), values: perPod(1000, 1000),
			wantName: "cpu container resource utilization (percentage of request)", wantProp: 4,
			wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: v1.ResourceCPU, Container: "app",
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptrTo[int32](100), AverageValue: qp("1")}}},
		},
		{
			name: "container resource: unknown container",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: v1.ResourceCPU, Container: "nope",
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptrTo[int32](50)}}},
			pods: readyPods(1, 1000), values: perPod(1000),
			wantErr:  "failed to get nope container metric value: failed to get cpu utilization: container nope not found in Pod pod-0",
			wantCond: "FailedGetContainerResourceMetric",
		},
		{
			name: "object value",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: deploy,
				Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qp("10")}}},
			pods: readyPods(2, 100), values: MetricValues{Value: 30000},
			wantName: "Deployment metric qps", wantProp: 6,
			wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{DescribedObject: deploy,
				Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Current: autoscalingv2.MetricValueStatus{Value: qp("30")}}},
		},
		{
			name: "object average value",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: deploy,
				Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qp("10")}}},
			values:   MetricValues{Value: 30000},
			wantName: "external metric qps(nil)", wantProp: 3,
			wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{DescribedObject: deploy,
				Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Current: autoscalingv2.MetricValueStatus{AverageValue: qp("15")}}},
		},
		{
			name: "object: fetch error",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: deploy,
				Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qp("10")}}},
			values:   MetricValues{Err: errors.New("unable to fetch metrics from custom metrics API: nope")},
			wantErr:  "failed to get object metric value: failed to get qps object metric: unable to get metric qps on Deployment test-namespace/front: unable to fetch metrics from custom metrics API: nope",
			wantCond: "FailedGetObjectMetric",
		},
		{
			name: "object: value target type without a value",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: deploy,
				Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, AverageValue: qp("10")}}},
			wantErr:  "failed to get object metric value: invalid object metric source: neither a value target nor an average value target was set",
			wantCond: "FailedGetObjectMetric",
		},
		{
			name: "external average value with selector",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue", Selector: sel}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qp("10")}}},
			values:   MetricValues{Series: []int64{20000, 25000}},
			wantName: "external metric queue(&LabelSelector{MatchLabels:map[string]string{queue: a,},MatchExpressions:[]LabelSelectorRequirement{},})", wantProp: 5,
			wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue", Selector: sel}, Current: autoscalingv2.MetricValueStatus{AverageValue: qp("22500m")}}},
		},
		{
			name: "external: fetch error",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qp("10")}}},
			values:   MetricValues{Err: errors.New("no metrics returned from external metrics API")},
			wantErr:  "failed to get queue external metric value: failed to get external metric queue: unable to get external metric test-namespace/queue/nil: no metrics returned from external metrics API",
			wantCond: "FailedGetExternalMetric",
		},
		{
			name: "external value: no pods while not at zero",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: qp("10")}}},
			values:   MetricValues{Series: []int64{50000}},
			wantErr:  "failed to get queue external metric value: failed to get external metric queue: unable to calculate ready pods: no pods returned by selector while calculating replica count",
			wantCond: "FailedGetExternalMetric",
		},
		{
			name: "pods metric with a bad selector",
			spec: autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "qps", Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "bogus"}}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: qp("1")}}},
			wantErr:  `failed to get pods metric value: "bogus" is not a valid label selector operator`,
			wantCond: "FailedGetPodsMetric",
		},
		{
			name:     "pods metric without a source",
			spec:     autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType},
			wantErr:  "failed to get pods metric value: invalid pods metric source: pods is not set",
			wantCond: "FailedGetPodsMetric",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hpa := testHPA(nil, 10, tc.spec)
			env := &calcEnv{now: testNow, cpuInit: testCPUInit, readinessDelay: testReadinessDelay, tolerances: Tolerances{0.1, 0.1}, pods: tc.pods, podLevel: true}
			res, ev := evaluateMetric(&metricInput{hpa: hpa, env: env, specReplicas: 2, statusReplicas: 2, values: tc.values}, tc.spec)
			if tc.wantErr != "" {
				if res.Err == nil || res.Err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", res.Err, tc.wantErr)
				}
				if res.Condition == nil || res.Condition.Reason != tc.wantCond || ev == nil || ev.Reason != tc.wantCond {
					t.Errorf("condition %+v / event %+v, want reason %s", res.Condition, ev, tc.wantCond)
				}
				return
			}
			if res.Err != nil {
				t.Fatalf("unexpected error: %v", res.Err)
			}
			if res.Name != tc.wantName || res.Replicas != tc.wantProp {
				t.Errorf("name %q proposal %d, want %q %d", res.Name, res.Replicas, tc.wantName, tc.wantProp)
			}
			if StatusChanged(&autoscalingv2.HorizontalPodAutoscalerStatus{CurrentMetrics: []autoscalingv2.MetricStatus{tc.wantStatus}},
				&autoscalingv2.HorizontalPodAutoscalerStatus{CurrentMetrics: []autoscalingv2.MetricStatus{res.Status}}) {
				t.Errorf("status mismatch:\n%s", cmp.Diff(tc.wantStatus, res.Status))
			}
		})
	}
}

func TestCurrentValue(t *testing.T) {
	v := autoscalingv2.MetricValueStatus{Value: resource.NewQuantity(3, resource.DecimalSI)}
	for _, s := range []autoscalingv2.MetricStatus{
		{Resource: &autoscalingv2.ResourceMetricStatus{Current: v}},
		{ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Current: v}},
		{Pods: &autoscalingv2.PodsMetricStatus{Current: v}},
		{Object: &autoscalingv2.ObjectMetricStatus{Current: v}},
		{External: &autoscalingv2.ExternalMetricStatus{Current: v}},
	} {
		if got := CurrentValue(s); got == nil || got.Value.Value() != 3 {
			t.Errorf("CurrentValue(%+v) = %+v, want the value 3", s, got)
		}
	}
	if got := CurrentValue(autoscalingv2.MetricStatus{}); got != nil {
		t.Errorf("CurrentValue of an empty status = %+v, want nil", got)
	}
}
