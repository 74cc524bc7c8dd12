package autoscaler

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// Reconcile-level tests: the flow of upstream's reconcileAutoscaler, with
// the conditions, reasons, events and status its horizontal_test.go checks.

func newTestAutoscaler(t *testing.T, mutate func(*Config)) (*Autoscaler, *clocktesting.FakePassiveClock) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.CPUInitializationPeriod = testCPUInit
	cfg.InitialReadinessDelay = testReadinessDelay
	if mutate != nil {
		mutate(&cfg)
	}
	clk := clocktesting.NewFakePassiveClock(testNow)
	a, err := New(cfg, clk)
	if err != nil {
		t.Fatal(err)
	}
	return a, clk
}

func ptrTo[T any](v T) *T { return &v }

func testHPA(minR *int32, maxR int32, metrics ...autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "test-hpa", Namespace: "test-namespace", Generation: 3},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "test-deploy"},
			MinReplicas:    minR,
			MaxReplicas:    maxR,
			Metrics:        metrics,
		},
	}
}

func cpuMetric(target int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: v1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}
}

func podsMetric(name, avg string) autoscalingv2.MetricSpec {
	q := resource.MustParse(avg)
	return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}}}
}

func externalValueMetric(name, value string) autoscalingv2.MetricSpec {
	q := resource.MustParse(value)
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &q}}}
}

// readyPods returns n running, ready pods started long ago, each with the
// given CPU request (milli) over one container.
func readyPods(n int, requestMilli int64) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		start := metav1.NewTime(testNow.Add(-time.Hour))
		pods[i] = &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "test-namespace"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Requests: cpuList(requestMilli)}}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: &start,
				Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: start}}},
		}
	}
	return pods
}

func perPod(values ...int64) MetricValues {
	m := map[string]PodMetric{}
	for i, v := range values {
		m[fmt.Sprintf("pod-%d", i)] = PodMetric{Value: v, Timestamp: testNow, Window: time.Minute}
	}
	return MetricValues{PerPod: m, Timestamp: testNow}
}

type condSummary struct {
	Type    autoscalingv2.HorizontalPodAutoscalerConditionType
	Status  v1.ConditionStatus
	Reason  string
	Message string
}

func conds(s autoscalingv2.HorizontalPodAutoscalerStatus, withMessage bool) []condSummary {
	var out []condSummary
	for _, c := range s.Conditions {
		cs := condSummary{Type: c.Type, Status: c.Status, Reason: c.Reason}
		if withMessage {
			cs.Message = c.Message
		}
		out = append(out, cs)
	}
	return out
}

func c(t autoscalingv2.HorizontalPodAutoscalerConditionType, s v1.ConditionStatus, reason string) condSummary {
	return condSummary{Type: t, Status: s, Reason: reason}
}

var (
	able    = autoscalingv2.AbleToScale
	active  = autoscalingv2.ScalingActive
	limited = autoscalingv2.ScalingLimited
	zeroed  = autoscalingv2.ScaledToZero
	yes, no = v1.ConditionTrue, v1.ConditionFalse
)

func eventSummaries(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return out
}

type decideCase struct {
	name         string
	hpa          *autoscalingv2.HorizontalPodAutoscaler
	cfg          func(*Config)
	spec, status int32
	selector     string
	selecting    []string
	pods         []*v1.Pod
	metrics      []MetricValues
	state        *State
	scaleErr     error

	wantRescale  bool
	wantDesired  int32 // status.desiredReplicas
	wantReason   string
	wantConds    []condSummary
	wantEvents   []string
	wantErr      string
	checkMessage bool
}

func runDecide(t *testing.T, tc decideCase) Decision {
	t.Helper()
	a, _ := newTestAutoscaler(t, tc.cfg)
	sel := tc.selector
	if sel == "" {
		sel = "app=test"
	}
	if sel == "-" {
		sel = ""
	}
	state := tc.state
	if state == nil {
		state = &State{}
	}
	in := Input{HPA: tc.hpa, SpecReplicas: tc.spec, StatusReplicas: tc.status, Selector: sel, SelectingHPAs: tc.selecting, Pods: tc.pods, Metrics: tc.metrics}
	before := tc.hpa.DeepCopy()
	d := a.Decide(state, in)
	if diff := cmp.Diff(before, tc.hpa); diff != "" {
		t.Fatalf("Decide modified its input HPA:\n%s", diff)
	}
	if d.Rescale {
		a.FinishRescale(state, &d, tc.scaleErr)
	}
	if d.Rescale != tc.wantRescale {
		t.Errorf("rescale = %v, want %v", d.Rescale, tc.wantRescale)
	}
	if d.Status.DesiredReplicas != tc.wantDesired {
		t.Errorf("status.desiredReplicas = %d, want %d", d.Status.DesiredReplicas, tc.wantDesired)
	}
	if d.Reason != tc.wantReason {
		t.Errorf("reason = %q, want %q", d.Reason, tc.wantReason)
	}
	if diff := cmp.Diff(tc.wantConds, conds(d.Status, tc.checkMessage)); diff != "" {
		t.Errorf("conditions mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tc.wantEvents, eventSummaries(d.Events)); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
	gotErr := ""
	if d.Err != nil {
		gotErr = d.Err.Error()
	}
	if gotErr != tc.wantErr {
		t.Errorf("err = %q, want %q", gotErr, tc.wantErr)
	}
	return d
}

func TestDecide(t *testing.T) {
	qpsErr := errors.New("the server could not find the metric qps")
	withCond := func(h *autoscalingv2.HorizontalPodAutoscaler, cs ...autoscalingv2.HorizontalPodAutoscalerCondition) *autoscalingv2.HorizontalPodAutoscaler {
		h.Status.Conditions = cs
		return h
	}
	behavior := func(h *autoscalingv2.HorizontalPodAutoscaler, b *autoscalingv2.HorizontalPodAutoscalerBehavior) *autoscalingv2.HorizontalPodAutoscaler {
		h.Spec.Behavior = b
		return h
	}
	cases := []decideCase{
		{
			name: "scale up on CPU", hpa: testHPA(ptrTo[int32](2), 6, cpuMetric(30)), spec: 3, status: 3,
			pods: readyPods(3, 1000), metrics: []MetricValues{perPod(300, 500, 700)},
			wantRescale: true, wantDesired: 5, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 5; reason: cpu resource utilization (percentage of request) above target"},
		},
		{
			name: "scale-up limited to max(2x, 4) without behavior", hpa: testHPA(ptrTo[int32](1), 100, cpuMetric(10)), spec: 1, status: 1,
			pods: readyPods(1, 1000), metrics: []MetricValues{perPod(1000)},
			wantRescale: true, wantDesired: 4, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, yes, "ScaleUpLimit")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 4; reason: cpu resource utilization (percentage of request) above target"},
		},
		{
			name: "scale-up limited by maxReplicas", hpa: testHPA(ptrTo[int32](1), 3, cpuMetric(10)), spec: 2, status: 2,
			pods: readyPods(2, 1000), metrics: []MetricValues{perPod(1000, 1000)},
			wantRescale: true, wantDesired: 3, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, yes, "TooManyReplicas")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 3; reason: cpu resource utilization (percentage of request) above target"},
		},
		{
			name: "within tolerance: no change", hpa: testHPA(nil, 6, cpuMetric(50)), spec: 3, status: 3,
			pods: readyPods(3, 1000), metrics: []MetricValues{perPod(520, 500, 480)},
			wantDesired: 3,
			wantConds:   []condSummary{c(able, yes, "ReadyForNewScale"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange")},
		},
		{
			name: "per-HPA scale-up tolerance (KEP-4951)",
			hpa: behavior(testHPA(nil, 6, cpuMetric(50)), &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: ptrTo(resource.MustParse("0.01"))}}),
			spec: 3, status: 3, pods: readyPods(3, 1000), metrics: []MetricValues{perPod(530, 530, 530)},
			wantRescale: true, wantDesired: 4, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 4; reason: cpu resource utilization (percentage of request) above target"},
		},
		{
			name: "scale down held by the stabilization window",
			hpa:  testHPA(nil, 6, cpuMetric(50)), spec: 5, status: 5,
			state: &State{Recommendations: []Recommendation{{5, testNow.Add(-time.Minute)}}},
			pods:  readyPods(5, 1000), metrics: []MetricValues{perPod(100, 100, 100, 100, 100)},
			wantDesired: 5, wantReason: "All metrics below target",
			wantConds: []condSummary{c(able, yes, "ScaleDownStabilized"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange")},
		},
		{
			name: "scale down after the window",
			hpa:  testHPA(nil, 6, cpuMetric(50)), spec: 5, status: 5,
			state: &State{Recommendations: []Recommendation{{5, testNow.Add(-6 * time.Minute)}}},
			pods:  readyPods(5, 1000), metrics: []MetricValues{perPod(100, 100, 100, 100, 100)},
			wantRescale: true, wantDesired: 1, wantReason: "All metrics below target",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 1; reason: All metrics below target"},
		},
		{
			// upstream TestScaleDownStabilizeInitialSize: a new HPA's first
			// recommendation is the current count, which holds a scale-down
			name: "first reconcile: initial recommendation holds the scale-down", hpa: testHPA(ptrTo[int32](2), 6, cpuMetric(50)), spec: 5, status: 5,
			pods: readyPods(5, 1000), metrics: []MetricValues{perPod(100, 300, 500, 250, 250)},
			wantDesired: 5, wantReason: "All metrics below target",
			wantConds: []condSummary{c(able, yes, "ScaleDownStabilized"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange")},
		},
		{
			// with --horizontal-pod-autoscaler-downscale-stabilization=0 the
			// first recommendation is already expired, as upstream
			name: "first reconcile with a zero window scales down at once", hpa: testHPA(ptrTo[int32](2), 6, cpuMetric(50)), spec: 5, status: 5,
			cfg:  func(c *Config) { c.DownscaleStabilizationWindow = 0 },
			pods: readyPods(5, 1000), metrics: []MetricValues{perPod(100, 300, 500, 250, 250)},
			wantRescale: true, wantDesired: 3, wantReason: "All metrics below target",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 3; reason: All metrics below target"},
		},
		{
			// upstream TestMetricsEdgeCases "missing metrics from some pods":
			// an empty (not nil) history records no initial recommendation
			name: "missing metrics on a scale-down count as the request", hpa: testHPA(ptrTo[int32](2), 6, cpuMetric(100)), spec: 4, status: 4,
			state: &State{Recommendations: []Recommendation{}},
			pods:  readyPods(4, 1000), metrics: []MetricValues{perPod(400, 95)},
			wantRescale: true, wantDesired: 3, wantReason: "All metrics below target",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 3; reason: All metrics below target"},
		},
		{
			// upstream TestMetricsEdgeCases "superfluous metrics reported"
			name: "superfluous metrics counted", hpa: testHPA(ptrTo[int32](2), 6, cpuMetric(100)), spec: 4, status: 4,
			pods: readyPods(4, 1000), metrics: []MetricValues{perPod(4000, 9500, 3000, 7000, 3200, 2000)},
			wantRescale: true, wantDesired: 6, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, yes, "TooManyReplicas")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 6; reason: cpu resource utilization (percentage of request) above target"},
		},
		{
			name: "current above maxReplicas", hpa: testHPA(ptrTo[int32](1), 4, cpuMetric(50)), spec: 6, status: 6,
			wantRescale: true, wantDesired: 4, wantReason: "Current number of replicas above Spec.MaxReplicas",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(zeroed, no, "NotScaledToZero")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 4; reason: Current number of replicas above Spec.MaxReplicas"},
		},
		{
			name: "current below minReplicas", hpa: testHPA(ptrTo[int32](3), 6, cpuMetric(50)), spec: 1, status: 1,
			wantRescale: true, wantDesired: 3, wantReason: "Current number of replicas below Spec.MinReplicas",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(zeroed, no, "NotScaledToZero")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 3; reason: Current number of replicas below Spec.MinReplicas"},
		},
		{
			name: "replicas 0 disables scaling", hpa: testHPA(ptrTo[int32](1), 6, cpuMetric(50)), spec: 0, status: 0,
			wantDesired: 0, checkMessage: true,
			wantConds: []condSummary{
				{able, yes, "SucceededGetScale", "the HPA controller was able to get the target's current scale"},
				{active, no, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero"},
			},
		},
		{
			name: "ScaleToZero off: stale ScaledToZero condition removed when disabled",
			cfg:  func(c *Config) { c.Features.ScaleToZero = false },
			hpa:  withCond(testHPA(ptrTo[int32](2), 6, externalValueMetric("queue", "10")), autoscalingv2.HorizontalPodAutoscalerCondition{Type: zeroed, Status: yes, Reason: "ScaledToZero"}),
			spec: 0, status: 0,
			wantConds: []condSummary{c(able, yes, "SucceededGetScale"), c(active, no, "ScalingDisabled")},
		},
		{
			name: "scaled to zero with minReplicas raised: back to min", hpa: withCond(testHPA(ptrTo[int32](2), 6, externalValueMetric("queue", "15")),
				autoscalingv2.HorizontalPodAutoscalerCondition{Type: zeroed, Status: yes, Reason: "ScaledToZero"}),
			spec: 0, status: 0, metrics: []MetricValues{{Series: []int64{10000}}},
			wantRescale: true, wantDesired: 2, wantReason: "external metric queue(nil) above target",
			wantConds:  []condSummary{c(zeroed, no, "NotScaledToZero"), c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, yes, "TooFewReplicas")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 2; reason: external metric queue(nil) above target"},
		},
		{
			name: "scale to zero on an External metric", hpa: testHPA(ptrTo[int32](0), 6, externalValueMetric("queue", "10")),
			spec: 2, status: 2, pods: readyPods(2, 100), metrics: []MetricValues{{Series: []int64{0}}},
			state:       &State{Recommendations: []Recommendation{{2, testNow.Add(-10 * time.Minute)}}},
			wantRescale: true, wantDesired: 0, wantReason: "All metrics below target",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange"), c(zeroed, yes, "ScaledToZero")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 0; reason: All metrics below target"},
		},
		{
			name: "scale from zero on an External metric", hpa: withCond(testHPA(ptrTo[int32](0), 6, externalValueMetric("queue", "10")),
				autoscalingv2.HorizontalPodAutoscalerCondition{Type: zeroed, Status: yes, Reason: "ScaledToZero"}),
			spec: 0, status: 0, metrics: []MetricValues{{Series: []int64{25000}}},
			wantRescale: true, wantDesired: 3, wantReason: "external metric queue(nil) above target",
			wantConds:  []condSummary{c(zeroed, no, "NotScaledToZero"), c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 3; reason: external metric queue(nil) above target"},
		},
		{
			name: "one invalid metric, the other scales up: scale", hpa: testHPA(nil, 6, cpuMetric(30), podsMetric("qps", "10")), spec: 3, status: 3,
			pods: readyPods(3, 1000), metrics: []MetricValues{perPod(300, 500, 700), {Err: qpsErr}},
			wantRescale: true, wantDesired: 5, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds: []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, no, "DesiredWithinRange")},
			wantEvents: []string{
				"Warning FailedGetPodsMetric: unable to get metric qps: the server could not find the metric qps",
				"Normal SuccessfulRescale: New size: 5; reason: cpu resource utilization (percentage of request) above target",
			},
			wantErr: "invalid metrics (1 invalid out of 2), first error is: failed to get pods metric value: unable to get metric qps: the server could not find the metric qps",
		},
		{
			name: "one invalid metric, the other scales down: no decision", hpa: testHPA(nil, 6, cpuMetric(50), podsMetric("qps", "10")), spec: 3, status: 3,
			pods: readyPods(3, 1000), metrics: []MetricValues{perPod(100, 100, 100), {Err: qpsErr}}, checkMessage: true,
			wantConds: []condSummary{
				{able, yes, "SucceededGetScale", "the HPA controller was able to get the target's current scale"},
				{active, no, "FailedGetPodsMetric", "the HPA was unable to compute the replica count: unable to get metric qps: the server could not find the metric qps"},
			},
			wantEvents: []string{
				"Warning FailedGetPodsMetric: unable to get metric qps: the server could not find the metric qps",
				"Warning FailedComputeMetricsReplicas: invalid metrics (1 invalid out of 2), first error is: failed to get pods metric value: unable to get metric qps: the server could not find the metric qps",
			},
			wantErr: "failed to compute desired number of replicas based on listed metrics for Deployment/test-namespace/test-deploy: invalid metrics (1 invalid out of 2), first error is: failed to get pods metric value: unable to get metric qps: the server could not find the metric qps",
		},
		{
			name: "resource metrics unavailable", hpa: testHPA(nil, 6, cpuMetric(50)), spec: 3, status: 3,
			pods:    readyPods(3, 1000),
			metrics: []MetricValues{FromPodMetrics(nil, errors.New("boom"), v1.ResourceCPU, "")}, checkMessage: true,
			wantConds: []condSummary{
				{able, yes, "SucceededGetScale", "the HPA controller was able to get the target's current scale"},
				{active, no, "FailedGetResourceMetric", "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: boom"},
			},
			wantEvents: []string{
				"Warning FailedGetResourceMetric: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: boom",
				"Warning FailedComputeMetricsReplicas: invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: boom",
			},
			wantErr: "failed to compute desired number of replicas based on listed metrics for Deployment/test-namespace/test-deploy: invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: boom",
		},
		{
			name: "unknown metric source type", hpa: testHPA(nil, 6, autoscalingv2.MetricSpec{Type: "Bogus"}), spec: 3, status: 3, checkMessage: true,
			wantConds: []condSummary{
				{able, yes, "SucceededGetScale", "the HPA controller was able to get the target's current scale"},
				{active, no, "InvalidMetricSourceType", "the HPA was unable to compute the replica count: unknown metric source type \"Bogus\""},
			},
			wantEvents: []string{
				"Warning InvalidMetricSourceType: unknown metric source type \"Bogus\"",
				"Warning FailedComputeMetricsReplicas: invalid metrics (1 invalid out of 1), first error is: unknown metric source type \"Bogus\"",
			},
			wantErr: "failed to compute desired number of replicas based on listed metrics for Deployment/test-namespace/test-deploy: invalid metrics (1 invalid out of 1), first error is: unknown metric source type \"Bogus\"",
		},
		{
			name: "selector missing", hpa: testHPA(nil, 6, cpuMetric(50)), spec: 3, status: 3, selector: "-", checkMessage: true,
			wantConds: []condSummary{
				{able, yes, "SucceededGetScale", "the HPA controller was able to get the target's current scale"},
				{active, no, "InvalidSelector", "the HPA target's scale is missing a selector"},
			},
			wantEvents: []string{"Warning SelectorRequired: selector is required", "Warning FailedComputeMetricsReplicas: selector is required"},
			wantErr:    "failed to compute desired number of replicas based on listed metrics for Deployment/test-namespace/test-deploy: selector is required",
		},
		{
			name: "selector unparsable", hpa: testHPA(nil, 6, cpuMetric(50)), spec: 3, status: 3, selector: "cheddar cheese",
			wantConds: []condSummary{c(able, yes, "SucceededGetScale"), c(active, no, "InvalidSelector")},
			wantEvents: []string{
				"Warning InvalidSelector: couldn't convert selector into a corresponding internal selector object: unable to parse requirement: found 'cheese', expected: in, notin, =, ==, !=, gt, lt",
				"Warning FailedComputeMetricsReplicas: couldn't convert selector into a corresponding internal selector object: unable to parse requirement: found 'cheese', expected: in, notin, =, ==, !=, gt, lt",
			},
			wantErr: "failed to compute desired number of replicas based on listed metrics for Deployment/test-namespace/test-deploy: couldn't convert selector into a corresponding internal selector object: unable to parse requirement: found 'cheese', expected: in, notin, =, ==, !=, gt, lt",
		},
		{
			name: "ambiguous selector", hpa: testHPA(nil, 6, cpuMetric(50)), spec: 3, status: 3, selecting: []string{"test-namespace/test-hpa", "test-namespace/other"},
			wantConds: []condSummary{c(able, yes, "SucceededGetScale"), c(active, no, "AmbiguousSelector")},
			wantEvents: []string{
				"Warning AmbiguousSelector: pods by selector app=test are controlled by more than one HPA (e.g. [test-namespace/test-hpa test-namespace/other])",
				"Warning FailedComputeMetricsReplicas: pods by selector app=test are controlled by more than one HPA (e.g. [test-namespace/test-hpa test-namespace/other])",
			},
			wantErr: "failed to compute desired number of replicas based on listed metrics for Deployment/test-namespace/test-deploy: pods by selector app=test are controlled by more than one HPA (e.g. [test-namespace/test-hpa test-namespace/other])",
		},
		{
			name: "rescale fails", hpa: testHPA(nil, 6, cpuMetric(30)), spec: 3, status: 3,
			pods: readyPods(3, 1000), metrics: []MetricValues{perPod(300, 500, 700)}, scaleErr: errors.New("conflict"),
			wantRescale: true, wantDesired: 0, wantReason: "cpu resource utilization (percentage of request) above target", checkMessage: true,
			wantConds: []condSummary{
				{able, no, "FailedUpdateScale", "the HPA controller was unable to update the target scale: conflict"},
				{active, yes, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"},
				{limited, no, "DesiredWithinRange", "the desired count is within the acceptable range"},
			},
			wantEvents: []string{"Warning FailedRescale: New size: 5; reason: cpu resource utilization (percentage of request) above target; error: conflict"},
			wantErr:    "failed to rescale Deployment/test-namespace/test-deploy: conflict",
		},
		{
			name: "behavior: scale-up rate limited by a Pods policy",
			hpa: behavior(testHPA(nil, 20, cpuMetric(10)), &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 60}}}}),
			spec: 2, status: 2, pods: readyPods(2, 1000), metrics: []MetricValues{perPod(500, 500)},
			wantRescale: true, wantDesired: 4, wantReason: "cpu resource utilization (percentage of request) above target",
			wantConds:  []condSummary{c(able, yes, "SucceededRescale"), c(active, yes, "ValidMetricFound"), c(limited, yes, "ScaleUpLimit")},
			wantEvents: []string{"Normal SuccessfulRescale: New size: 4; reason: cpu resource utilization (percentage of request) above target"},
		},
		{
			name: "behavior: selectPolicy Disabled for scale down",
			hpa: behavior(testHPA(nil, 20, cpuMetric(50)), &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: ptrTo(autoscalingv2.DisabledPolicySelect), StabilizationWindowSeconds: ptrTo[int32](0)}}),
			spec: 4, status: 4, pods: readyPods(4, 1000), metrics: []MetricValues{perPod(100, 100, 100, 100)},
			wantDesired: 4, wantReason: "All metrics below target",
			wantConds: []condSummary{c(able, yes, "ReadyForNewScale"), c(active, yes, "ValidMetricFound"), c(limited, yes, "ScaleDownLimit")},
		},
	}
	// with HPAScaleToZero on, every successful rescale also records
	// ScaledToZero (False unless it went to zero)
	for i := range cases {
		if cases[i].wantRescale && cases[i].scaleErr == nil && !hasCond(cases[i].wantConds, zeroed) {
			cases[i].wantConds = append(cases[i].wantConds, c(zeroed, no, "NotScaledToZero"))
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runDecide(t, tc) })
	}
}

func hasCond(cs []condSummary, t autoscalingv2.HorizontalPodAutoscalerConditionType) bool {
	for _, c := range cs {
		if c.Type == t {
			return true
		}
	}
	return false
}

// TestDecideStatus checks the whole status written after a scale-up:
// current metrics, replicas, lastScaleTime, observedGeneration.
func TestDecideStatus(t *testing.T) {
	a, _ := newTestAutoscaler(t, nil)
	hpa := testHPA(nil, 6, cpuMetric(30), podsMetric("qps", "10"))
	state := &State{}
	d := a.Decide(state, Input{HPA: hpa, SpecReplicas: 3, StatusReplicas: 3, Selector: "app=test", Pods: readyPods(3, 1000),
		Metrics: []MetricValues{perPod(300, 500, 700), perPod(10000, 10000, 13000)}})
	a.FinishRescale(state, &d, nil)
	util := int32(50)
	avg := resource.MustParse("500m")
	qps := resource.MustParse("11")
	now := metav1.NewTime(testNow)
	want := autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: ptrTo[int64](3),
		LastScaleTime:      &now,
		CurrentReplicas:    3,
		DesiredReplicas:    5,
		CurrentMetrics: []autoscalingv2.MetricStatus{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: v1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: &util, AverageValue: &avg}}},
			{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Current: autoscalingv2.MetricValueStatus{AverageValue: &qps}}},
		},
	}
	got := d.Status.DeepCopy()
	got.Conditions = nil
	if StatusChanged(&want, got) {
		t.Errorf("status mismatch:\n%s", cmp.Diff(want, *got))
	}
	if d.Metrics[1].Replicas != 3 || d.Metrics[0].Replicas != 5 || d.Metric != "cpu resource utilization (percentage of request)" {
		t.Errorf("metric proposals = %d, %d (%q), want 5, 3 (within tolerance) from cpu", d.Metrics[0].Replicas, d.Metrics[1].Replicas, d.Metric)
	}
	wantState := &State{
		Recommendations: []Recommendation{{3, testNow.Add(-time.Nanosecond)}, {5, testNow}},
	}
	if diff := cmp.Diff(wantState, state); diff != "" {
		t.Errorf("state mismatch (-want +got):\n%s", diff)
	}
}

// TestDecideAvoidsUnnecessaryUpdates is upstream's
// TestAvoidUnnecessaryUpdates: a second identical reconcile produces a
// status equal to the one written by the first.
func TestDecideAvoidsUnnecessaryUpdates(t *testing.T) {
	a, clk := newTestAutoscaler(t, nil)
	hpa := testHPA(nil, 6, cpuMetric(50))
	state := &State{}
	in := Input{HPA: hpa, SpecReplicas: 3, StatusReplicas: 3, Selector: "app=test", Pods: readyPods(3, 1000), Metrics: []MetricValues{perPod(500, 500, 500)}}
	d := a.Decide(state, in)
	if d.Rescale || !StatusChanged(&hpa.Status, &d.Status) {
		t.Fatalf("first reconcile: rescale=%v changed=%v, want false, true", d.Rescale, StatusChanged(&hpa.Status, &d.Status))
	}
	hpa.Status = d.Status
	clk.SetTime(testNow.Add(15 * time.Second))
	d2 := a.Decide(state, in)
	if StatusChanged(&hpa.Status, &d2.Status) {
		t.Errorf("second reconcile changed the status:\n%s", cmp.Diff(hpa.Status, d2.Status))
	}
}

// TestDecideStatePersistsScaleEvents drives two reconciles of an HPA with a
// scale-up policy and checks the second is limited by the first's event.
func TestDecideStatePersistsScaleEvents(t *testing.T) {
	a, clk := newTestAutoscaler(t, nil)
	hpa := testHPA(nil, 50, cpuMetric(10))
	hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
		Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 60}}}}
	state := &State{}
	step := func(replicas int32) Decision {
		vals := make([]int64, replicas)
		for i := range vals {
			vals[i] = 1000
		}
		d := a.Decide(state, Input{HPA: hpa, SpecReplicas: replicas, StatusReplicas: replicas, Selector: "app=test", Pods: readyPods(int(replicas), 1000), Metrics: []MetricValues{perPod(vals...)}})
		if d.Rescale {
			a.FinishRescale(state, &d, nil)
		}
		hpa.Status = d.Status
		return d
	}
	if d := step(2); d.DesiredReplicas != 6 {
		t.Fatalf("first step desired = %d, want 6", d.DesiredReplicas)
	}
	clk.SetTime(testNow.Add(30 * time.Second))
	if d := step(6); d.Rescale || d.DesiredReplicas != 6 {
		t.Fatalf("second step (within the period) rescale=%v desired=%d, want no rescale at 6", d.Rescale, d.DesiredReplicas)
	}
	clk.SetTime(testNow.Add(61 * time.Second))
	if d := step(6); d.DesiredReplicas != 10 {
		t.Fatalf("third step (after the period) desired = %d, want 10", d.DesiredReplicas)
	}
	if len(state.ScaleUpEvents) != 1 || state.ScaleUpEvents[0].ReplicaChange != 4 {
		t.Errorf("scale-up events = %+v, want the outdated slot reused by one +4 event", state.ScaleUpEvents)
	}
}

func TestFailedGetScale(t *testing.T) {
	a, _ := newTestAutoscaler(t, nil)
	hpa := testHPA(nil, 6, cpuMetric(50))
	d := a.FailedGetScale(hpa, errors.New("deployments.apps \"test-deploy\" not found"))
	want := []condSummary{{able, no, "FailedGetScale", "the HPA controller was unable to get the target's current scale: deployments.apps \"test-deploy\" not found"}}
	if diff := cmp.Diff(want, conds(d.Status, true)); diff != "" {
		t.Errorf("conditions mismatch (-want +got):\n%s", diff)
	}
	if len(d.Events) != 1 || d.Events[0].Reason != "FailedGetScale" || !StatusChanged(&hpa.Status, &d.Status) {
		t.Errorf("events = %+v; want one FailedGetScale and a changed status", d.Events)
	}
}

func TestNeedsMetrics(t *testing.T) {
	a, _ := newTestAutoscaler(t, nil)
	zero := testHPA(ptrTo[int32](0), 5, externalValueMetric("q", "1"))
	zeroCond := zero.DeepCopy()
	zeroCond.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: zeroed, Status: yes}}
	cases := []struct {
		name string
		hpa  *autoscalingv2.HorizontalPodAutoscaler
		spec int32
		want bool
	}{
		{"in range", testHPA(nil, 5), 3, true},
		{"above max", testHPA(nil, 5), 6, false},
		{"below min", testHPA(ptrTo[int32](2), 5), 1, false},
		{"zero without ScaledToZero", zero, 0, false},
		{"zero with ScaledToZero", zeroCond, 0, true},
	}
	for _, tc := range cases {
		if got := a.NeedsMetrics(tc.hpa, tc.spec); got != tc.want {
			t.Errorf("%s: NeedsMetrics = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Tolerance = -1
	cfg.CPUInitializationPeriod = -time.Second
	_, err := New(cfg, clocktesting.NewFakePassiveClock(testNow))
	if err == nil || !containsAll(err.Error(), "tolerance:", "cpuInitializationPeriod:") {
		t.Errorf("New error = %v, want both fields named", err)
	}
	if _, err := New(DefaultConfig(), nil); err == nil {
		t.Error("New without a clock succeeded")
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func TestDecideReportsStabilizedReplicas(t *testing.T) {
	a, _ := newTestAutoscaler(t, nil)
	hpa := testHPA(nil, 6, cpuMetric(50))
	hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptrTo[int32](300),
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}}}
	state := &State{Recommendations: []Recommendation{{4, testNow.Add(-time.Minute)}}}
	d := a.Decide(state, Input{HPA: hpa, SpecReplicas: 5, StatusReplicas: 5, Selector: "app=test", Pods: readyPods(5, 1000), Metrics: []MetricValues{perPod(100, 100, 100, 100, 100)}})
	// metrics ask for 1, the window holds 4, the policy allows one pod: 4
	if d.MetricReplicas != 1 || d.StabilizedReplicas != 4 || d.DesiredReplicas != 4 {
		t.Errorf("metric %d, stabilized %d, desired %d; want 1, 4, 4", d.MetricReplicas, d.StabilizedReplicas, d.DesiredReplicas)
	}
	state = &State{Recommendations: []Recommendation{{4, testNow.Add(-time.Hour)}}}
	d = a.Decide(state, Input{HPA: hpa, SpecReplicas: 5, StatusReplicas: 5, Selector: "app=test", Pods: readyPods(5, 1000), Metrics: []MetricValues{perPod(100, 100, 100, 100, 100)}})
	// nothing in the window: 1, and the policy allows one pod a minute: 4
	if d.StabilizedReplicas != 1 || d.DesiredReplicas != 4 || Condition(&d.Status, limited).Reason != "ScaleDownLimit" {
		t.Errorf("stabilized %d, desired %d, limited %+v; want 1, 4, ScaleDownLimit", d.StabilizedReplicas, d.DesiredReplicas, Condition(&d.Status, limited))
	}
	if d := a.FailedGetScale(hpa, errors.New("x")); d.StabilizedReplicas != -1 {
		t.Errorf("FailedGetScale stabilized = %d, want -1", d.StabilizedReplicas)
	}
}

func TestDecideWithoutHPA(t *testing.T) {
	a, _ := newTestAutoscaler(t, nil)
	if d := a.Decide(nil, Input{}); d.Err == nil || d.Rescale {
		t.Errorf("Decide without an HPA: %+v, want an error and no rescale", d)
	}
}

func TestDecideReportsNormalization(t *testing.T) {
	a, _ := newTestAutoscaler(t, nil)
	behavior := &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptrTo[int32](60),
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}}}
	cases := []struct {
		name     string
		behavior *autoscalingv2.HorizontalPodAutoscalerBehavior
		state    *State
		current  int32
		usage    int64
		want     *Normalization
	}{
		{name: "no behavior, scale-up limited to max(2×current, 4)", current: 3, usage: 1000, state: &State{},
			want: &Normalization{Stabilized: 6, ScaleDownWindow: 5 * time.Minute, ScaleUpLimit: 6, ScaleDownLimit: -1, LimitReason: "DesiredWithinRange"}},
		{name: "no behavior, scale-up limit of 4 from 1", current: 1, usage: 1000, state: &State{},
			want: &Normalization{Stabilized: 2, ScaleDownWindow: 5 * time.Minute, ScaleUpLimit: 4, ScaleDownLimit: -1, LimitReason: "DesiredWithinRange"}},
		{name: "behavior, scale-down policy counts the events in State", behavior: behavior, current: 5, usage: 100,
			state: &State{Recommendations: []Recommendation{}, ScaleDownEvents: []ScaleEvent{{ReplicaChange: 1, Timestamp: testNow.Add(-30 * time.Second)}}},
			// default scale-up policies from 5: max(5+4, 5×2) = 10; one pod
			// already removed in the last 60s: 6-1 = 5, the current count.
			want: &Normalization{Behavior: true, Stabilized: 1, ScaleDownWindow: time.Minute, ScaleUpLimit: 10, ScaleDownLimit: 5, LimitReason: "ScaleDownLimit"}},
		{name: "metrics failed: no normalization", current: 2, usage: -1, state: &State{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hpa := testHPA(nil, 10, cpuMetric(50))
			hpa.Spec.Behavior = tc.behavior
			values := make([]int64, tc.current)
			for i := range values {
				values[i] = tc.usage
			}
			m := perPod(values...)
			if tc.usage < 0 {
				m = MetricValues{Err: errors.New("no metrics")}
			}
			d := a.Decide(tc.state, Input{HPA: hpa, SpecReplicas: tc.current, StatusReplicas: tc.current, Selector: "app=test",
				Pods: readyPods(int(tc.current), 1000), Metrics: []MetricValues{m}})
			if diff := cmp.Diff(tc.want, d.Normalization); diff != "" {
				t.Errorf("normalization (-want +got):\n%s", diff)
			}
		})
	}
}
