package controller

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	core "k8s.io/client-go/testing"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	cmfake "k8s.io/metrics/pkg/client/custom_metrics/fake"
	"k8s.io/utils/ptr"

	"github.com/promscaler/promscaler/pkg/autoscaler"
)

// condSummary is type=status/reason of each condition, in order.
func condSummary(st autoscalingv2.HorizontalPodAutoscalerStatus) []string {
	var out []string
	for _, c := range st.Conditions {
		out = append(out, string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
	}
	return out
}

func TestReconcileCPU(t *testing.T) {
	tests := []struct {
		name         string
		replicas     int32
		usage        []int64 // per pod, request 100m each
		minR, maxR   int32
		wantReplicas int32
		wantEvents   []recordedEvent
		wantConds    []string
		wantDecision map[string]string
		wantScaleOps map[string]string // nil: no scale operation
	}{
		{
			name: "scale up", replicas: 2, usage: []int64{75, 75}, minR: 1, maxR: 10,
			wantReplicas: 3,
			wantEvents: []recordedEvent{{Object: "default/web", Type: v1.EventTypeNormal, Reason: "SuccessfulRescale", Action: "Rescale",
				Note: "New size: 3; reason: cpu resource utilization (percentage of request) above target"}},
			wantConds: []string{
				"AbleToScale=True/SucceededRescale",
				"ScalingActive=True/ValidMetricFound",
				"ScalingLimited=False/DesiredWithinRange",
				"ScaledToZero=False/NotScaledToZero",
			},
			wantDecision: map[string]string{"decision": DecisionScaleUp, "reason": "ReadyForNewScale"},
			wantScaleOps: map[string]string{"direction": "up", "result": ResultSuccess},
		},
		{
			name: "scale up limited by maxReplicas", replicas: 2, usage: []int64{150, 150}, minR: 1, maxR: 4,
			wantReplicas: 4,
			wantEvents: []recordedEvent{{Object: "default/web", Type: v1.EventTypeNormal, Reason: "SuccessfulRescale", Action: "Rescale",
				Note: "New size: 4; reason: cpu resource utilization (percentage of request) above target"}},
			wantConds: []string{
				"AbleToScale=True/SucceededRescale",
				"ScalingActive=True/ValidMetricFound",
				"ScalingLimited=True/TooManyReplicas",
				"ScaledToZero=False/NotScaledToZero",
			},
			wantDecision: map[string]string{"decision": DecisionScaleUp, "reason": "TooManyReplicas"},
			wantScaleOps: map[string]string{"direction": "up", "result": ResultSuccess},
		},
		{
			name: "within tolerance", replicas: 2, usage: []int64{52, 53}, minR: 1, maxR: 10,
			wantReplicas: 2,
			wantConds: []string{
				"AbleToScale=True/ReadyForNewScale",
				"ScalingActive=True/ValidMetricFound",
				"ScalingLimited=False/DesiredWithinRange",
			},
			wantDecision: map[string]string{"decision": DecisionNone, "reason": "ReadyForNewScale"},
		},
		{
			name: "above maxReplicas without reading metrics", replicas: 6, usage: []int64{50, 50, 50, 50, 50, 50}, minR: 1, maxR: 4,
			wantReplicas: 4,
			wantEvents: []recordedEvent{{Object: "default/web", Type: v1.EventTypeNormal, Reason: "SuccessfulRescale", Action: "Rescale",
				Note: "New size: 4; reason: Current number of replicas above Spec.MaxReplicas"}},
			wantConds:    []string{"AbleToScale=True/SucceededRescale", "ScaledToZero=False/NotScaledToZero"},
			wantDecision: map[string]string{"decision": DecisionScaleDown, "reason": "AboveMaxReplicas"},
			wantScaleOps: map[string]string{"direction": "down", "result": ResultSuccess},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, world{
				hpas:    []*autoscalingv2.HorizontalPodAutoscaler{cpuHPA("web", tt.minR, tt.maxR, 50)},
				targets: []target{{name: "web", replicas: tt.replicas, cpuRequest: 100, cpuUsage: tt.usage}},
			})
			if err := h.reconcile("web"); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if got := h.replicas("web"); got != tt.wantReplicas {
				t.Errorf("target replicas = %d, want %d", got, tt.wantReplicas)
			}
			if diff := cmp.Diff(tt.wantEvents, h.events.take()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			st := h.hpa("web").Status
			if diff := cmp.Diff(tt.wantConds, condSummary(st)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if st.CurrentReplicas != tt.replicas || st.DesiredReplicas != tt.wantReplicas {
				t.Errorf("status replicas current=%d desired=%d, want %d %d", st.CurrentReplicas, st.DesiredReplicas, tt.replicas, tt.wantReplicas)
			}
			if rescaled := tt.wantReplicas != tt.replicas; rescaled != (st.LastScaleTime != nil) {
				t.Errorf("lastScaleTime = %v, want set: %v", st.LastScaleTime, rescaled)
			}
			if got := h.counter("promscaler_autoscaler_decisions_total", tt.wantDecision); got != 1 {
				t.Errorf("decisions_total%v = %v, want 1", tt.wantDecision, got)
			}
			if tt.wantScaleOps != nil {
				if got := h.counter("promscaler_autoscaler_scale_operations_total", tt.wantScaleOps); got != 1 {
					t.Errorf("scale_operations_total%v = %v, want 1", tt.wantScaleOps, got)
				}
			} else if n := h.scaleWrites(); n != 0 {
				t.Errorf("%d /scale writes, want none", n)
			}
			if got := h.counter("promscaler_autoscaler_desired_replicas", map[string]string{"namespace": "default", "hpa": "web"}); got != float64(tt.wantReplicas) {
				t.Errorf("desired_replicas = %v, want %d", got, tt.wantReplicas)
			}
		})
	}
}

func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	h := newHarness(t, world{
		hpas:    []*autoscalingv2.HorizontalPodAutoscaler{cpuHPA("web", 1, 10, 50)},
		targets: []target{{name: "web", replicas: 2, cpuRequest: 100, cpuUsage: []int64{52, 53}}},
	})
	for i := range 3 {
		if err := h.reconcile("web"); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		h.waitForCache("web")
		h.clock.Step(15 * time.Second)
	}
	if diff := cmp.Diff([]string{"update/status"}, h.hpaWrites()); diff != "" {
		t.Errorf("HPA writes after 3 unchanged reconciles (-want +got):\n%s", diff)
	}
	if got := h.counter("promscaler_autoscaler_status_updates_total", map[string]string{"result": ResultSuccess}); got != 1 {
		t.Errorf("status_updates_total{success} = %v, want 1", got)
	}
	if got := h.counter("promscaler_autoscaler_reconcile_duration_seconds", map[string]string{"result": ResultSuccess}); got != 3 {
		t.Errorf("reconcile_duration_seconds count = %v, want 3", got)
	}
}

func TestMetricFetchErrorBlocksScaleDown(t *testing.T) {
	// Two metrics: CPU (its read fails) and a Pods metric proposing a
	// scale-down. While any metric fails the HPA must not scale down.
	hpa := cpuHPA("web", 1, 10, 50)
	hpa.Spec.Metrics = append(hpa.Spec.Metrics, autoscalingv2.MetricSpec{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "requests_per_second"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(10, resource.DecimalSI)},
		},
	})
	h := newHarness(t, world{
		hpas:    []*autoscalingv2.HorizontalPodAutoscaler{hpa},
		targets: []target{{name: "web", replicas: 4, cpuRequest: 100, cpuUsage: []int64{10, 10, 10, 10}}},
	})
	h.metrics.PrependReactor("list", "pods", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the server is currently unable to handle the request")
	})
	h.custom.AddReactor("get", "pods", func(a core.Action) (bool, runtime.Object, error) {
		return true, podsCustomMetric(a.(cmfake.GetForAction), map[string]int64{"web-0": 1000, "web-1": 1000, "web-2": 1000, "web-3": 1000}), nil
	})

	err := h.reconcile("web")
	if err == nil || !strings.Contains(err.Error(), "invalid metrics (1 invalid out of 2)") {
		t.Fatalf("reconcile error = %v, want the invalid metrics error", err)
	}
	if got := h.replicas("web"); got != 4 {
		t.Errorf("target replicas = %d, want 4 (no scale-down while a metric fails)", got)
	}
	if n := h.scaleWrites(); n != 0 {
		t.Errorf("%d /scale writes, want none", n)
	}
	evs := h.events.take()
	var reasons []string
	for _, e := range evs {
		reasons = append(reasons, e.Type+" "+e.Reason+" "+e.Action)
	}
	want := []string{"Warning FailedGetResourceMetric GetMetrics", "Warning FailedComputeMetricsReplicas ComputeReplicas"}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !strings.Contains(evs[0].Note, "unable to fetch metrics from resource metrics API") {
		t.Errorf("FailedGetResourceMetric note = %q, want the metrics client's text", evs[0].Note)
	}
	st := h.hpa("web").Status
	c := autoscaler.Condition(&st, autoscalingv2.ScalingActive)
	if c == nil || c.Status != v1.ConditionFalse || c.Reason != "FailedGetResourceMetric" {
		t.Errorf("ScalingActive = %+v, want False/FailedGetResourceMetric", c)
	}
	if got := h.counter("promscaler_autoscaler_metric_fetch_errors_total", map[string]string{"source": "Resource"}); got != 1 {
		t.Errorf("metric_fetch_errors_total{Resource} = %v, want 1", got)
	}
	if got := h.counter("promscaler_autoscaler_metric_fetch_errors_total", map[string]string{"source": "Pods"}); got != 0 {
		t.Errorf("metric_fetch_errors_total{Pods} = %v, want 0", got)
	}
	if got := h.counter("promscaler_autoscaler_decisions_total", map[string]string{"decision": DecisionError, "reason": "FailedGetResourceMetric"}); got != 1 {
		t.Errorf("decisions_total{error,FailedGetResourceMetric} = %v, want 1", got)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(h *harness)
		wantErr    string
		wantEvents []string // type reason action
		wantCond   string   // type=status/reason that must be present
		wantScale  int32
	}{
		{
			name: "get scale fails",
			setup: func(h *harness) {
				h.scales.PrependReactor("get", "deployments", func(core.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("deployments.apps \"web\" not found")
				})
			},
			wantErr:    "failed to query scale subresource for Deployment/default/web",
			wantEvents: []string{"Warning FailedGetScale GetScale"},
			wantCond:   "AbleToScale=False/FailedGetScale",
			wantScale:  2,
		},
		{
			name: "update scale fails",
			setup: func(h *harness) {
				h.scales.PrependReactor("update", "deployments", func(core.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("admission webhook denied the request")
				})
			},
			wantErr:    "failed to rescale Deployment/default/web",
			wantEvents: []string{"Warning FailedRescale Rescale"},
			wantCond:   "AbleToScale=False/FailedUpdateScale",
			wantScale:  2,
		},
		{
			name: "update status fails",
			setup: func(h *harness) {
				h.kube.PrependReactor("update", "horizontalpodautoscalers", func(a core.Action) (bool, runtime.Object, error) {
					if a.GetSubresource() == "status" {
						return true, nil, errors.New("etcdserver: request timed out")
					}
					return false, nil, nil
				})
			},
			wantErr:    "failed to update status for web",
			wantEvents: []string{"Normal SuccessfulRescale Rescale", "Warning FailedUpdateStatus UpdateStatus"},
			wantScale:  3,
		},
		{
			name: "unknown kind",
			setup: func(h *harness) {
				hpa := h.hpa("web")
				hpa.Spec.ScaleTargetRef.Kind = "Widget"
				if _, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers("default").Update(context.Background(), hpa, metav1.UpdateOptions{}); err != nil {
					h.t.Fatal(err)
				}
				h.waitForCache("web")
			},
			wantErr:    "unable to determine resource for scale target reference",
			wantEvents: []string{"Warning FailedGetScale GetScale"},
			wantCond:   "AbleToScale=False/FailedGetScale",
			wantScale:  2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, world{
				hpas:    []*autoscalingv2.HorizontalPodAutoscaler{cpuHPA("web", 1, 10, 50)},
				targets: []target{{name: "web", replicas: 2, cpuRequest: 100, cpuUsage: []int64{75, 75}}},
			})
			tt.setup(h)
			err := h.reconcile("web")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("reconcile error = %v, want one containing %q", err, tt.wantErr)
			}
			var got []string
			for _, e := range h.events.take() {
				got = append(got, e.Type+" "+e.Reason+" "+e.Action)
			}
			if diff := cmp.Diff(tt.wantEvents, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if tt.wantCond != "" {
				conds := condSummary(h.hpa("web").Status)
				found := false
				for _, c := range conds {
					found = found || c == tt.wantCond
				}
				if !found {
					t.Errorf("conditions %v lack %s", conds, tt.wantCond)
				}
			}
			if got := h.replicas("web"); got != tt.wantScale {
				t.Errorf("target replicas = %d, want %d", got, tt.wantScale)
			}
		})
	}
}

func TestDryRun(t *testing.T) {
	for _, annotate := range []bool{false, true} {
		name := "events only"
		if annotate {
			name = "annotate"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, world{
				hpas:    []*autoscalingv2.HorizontalPodAutoscaler{cpuHPA("web", 1, 10, 50)},
				targets: []target{{name: "web", replicas: 2, cpuRequest: 100, cpuUsage: []int64{75, 75}}},
			}, dryRun(annotate))
			for range 2 {
				if err := h.reconcile("web"); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
				if annotate {
					h.waitForCache("web")
				}
				h.clock.Step(15 * time.Second)
			}
			for _, a := range h.scales.Actions() {
				if a.GetVerb() != "get" {
					t.Errorf("dry run sent %s to /scale", a.GetVerb())
				}
			}
			if got := h.replicas("web"); got != 2 {
				t.Errorf("target replicas = %d, want 2", got)
			}
			wantWrites := []string(nil)
			if annotate {
				wantWrites = []string{"patch"} // the second, identical decision is not written
			}
			if diff := cmp.Diff(wantWrites, h.hpaWrites()); diff != "" {
				t.Errorf("HPA writes (-want +got):\n%s", diff)
			}
			hpa := h.hpa("web")
			if len(hpa.Status.Conditions) != 0 || hpa.Status.DesiredReplicas != 0 {
				t.Errorf("dry run wrote status %+v", hpa.Status)
			}
			evs := h.events.take()
			if len(evs) != 2 || evs[0].Reason != "DryRunRescale" || evs[0].Note != "New size: 3; reason: cpu resource utilization (percentage of request) above target; dry run: /scale not updated" {
				t.Errorf("events = %+v, want two DryRunRescale to 3", evs)
			}
			if got := h.counter("promscaler_autoscaler_scale_operations_total", map[string]string{"direction": "up", "result": ResultDryRun}); got != 2 {
				t.Errorf("scale_operations_total{up,dry_run} = %v, want 2", got)
			}
			rec, ok := hpa.Annotations[DryRunAnnotation]
			if ok != annotate {
				t.Fatalf("annotation present = %v, want %v", ok, annotate)
			}
			if annotate {
				var got DryRunRecord
				if err := json.Unmarshal([]byte(rec), &got); err != nil {
					t.Fatalf("annotation %q: %v", rec, err)
				}
				want := DryRunRecord{CurrentReplicas: 2, DesiredReplicas: 3, Rescale: true,
					Reason: "cpu resource utilization (percentage of request) above target",
					Conditions: []DryRunCondition{
						{Type: autoscalingv2.AbleToScale, Status: v1.ConditionTrue, Reason: "ReadyForNewScale"},
						{Type: autoscalingv2.ScalingActive, Status: v1.ConditionTrue, Reason: "ValidMetricFound"},
						{Type: autoscalingv2.ScalingLimited, Status: v1.ConditionFalse, Reason: "DesiredWithinRange"},
					}}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("annotation (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestCustomAndExternalMetrics(t *testing.T) {
	objectHPA := cpuHPA("web", 1, 10, 50)
	objectHPA.Spec.Metrics = []autoscalingv2.MetricSpec{{
		Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"},
			Metric:          autoscalingv2.MetricIdentifier{Name: "requests_per_second"},
			Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: resource.NewQuantity(100, resource.DecimalSI)},
		},
	}}
	namespaceHPA := objectHPA.DeepCopy()
	namespaceHPA.Spec.Metrics[0].Object.DescribedObject = autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "elsewhere"}
	externalHPA := cpuHPA("web", 1, 10, 50)
	externalHPA.Spec.Metrics = []autoscalingv2.MetricSpec{{
		Type: autoscalingv2.ExternalMetricSourceType,
		External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(30, resource.DecimalSI)},
		},
	}}
	podsHPA := cpuHPA("web", 1, 10, 50)
	podsHPA.Spec.Metrics = []autoscalingv2.MetricSpec{{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "requests_per_second"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(10, resource.DecimalSI)},
		},
	}}

	tests := []struct {
		name       string
		hpa        *autoscalingv2.HorizontalPodAutoscaler
		setup      func(h *harness)
		wantReason string
		want       int32
	}{
		{
			name: "object metric",
			hpa:  objectHPA,
			setup: func(h *harness) {
				h.custom.AddReactor("get", "ingresses.networking.k8s.io", func(a core.Action) (bool, runtime.Object, error) {
					g := a.(cmfake.GetForAction)
					if g.GetName() != "main" || g.GetMetricName() != "requests_per_second" || g.GetNamespace() != "default" {
						return true, nil, errors.New("unexpected object metric request")
					}
					return true, &customapi.MetricValueList{Items: []customapi.MetricValue{{
						DescribedObject: v1.ObjectReference{Kind: "Ingress", Name: "main", Namespace: "default"},
						Metric:          customapi.MetricIdentifier{Name: "requests_per_second"},
						Timestamp:       metav1.NewTime(now),
						Value:           *resource.NewQuantity(150, resource.DecimalSI),
					}}}, nil
				})
			},
			wantReason: "Ingress metric requests_per_second above target",
			want:       3, // ceil(1.5 * 2)
		},
		{
			name: "object metric of the namespace reads the HPA's own namespace",
			hpa:  namespaceHPA,
			setup: func(h *harness) {
				h.custom.AddReactor("get", "namespaces", func(a core.Action) (bool, runtime.Object, error) {
					g := a.(cmfake.GetForAction)
					if g.GetName() != "default" || g.GetNamespace() != "" {
						return true, nil, errors.New("unexpected namespace metric request for " + g.GetNamespace() + "/" + g.GetName())
					}
					return true, &customapi.MetricValueList{Items: []customapi.MetricValue{{
						DescribedObject: v1.ObjectReference{Kind: "Namespace", Name: "default"},
						Metric:          customapi.MetricIdentifier{Name: "requests_per_second"},
						Timestamp:       metav1.NewTime(now),
						Value:           *resource.NewQuantity(150, resource.DecimalSI),
					}}}, nil
				})
			},
			wantReason: "Namespace metric requests_per_second above target",
			want:       3,
		},
		{
			name: "external metric per pod",
			hpa:  externalHPA,
			setup: func(h *harness) {
				h.external.AddReactor("list", "queue_depth", func(a core.Action) (bool, runtime.Object, error) {
					if sel := a.(core.ListAction).GetListRestrictions().Labels.String(); sel != "queue=jobs" {
						return true, nil, errors.New("unexpected selector " + sel)
					}
					return true, &externalapi.ExternalMetricValueList{Items: []externalapi.ExternalMetricValue{
						{MetricName: "queue_depth", Timestamp: metav1.NewTime(now), Value: *resource.NewQuantity(100, resource.DecimalSI)},
						{MetricName: "queue_depth", Timestamp: metav1.NewTime(now), Value: *resource.NewQuantity(50, resource.DecimalSI)},
					}}, nil
				})
			},
			wantReason: "external metric queue_depth(&LabelSelector{MatchLabels:map[string]string{queue: jobs,},MatchExpressions:[]LabelSelectorRequirement{},}) above target",
			want:       4, // ceil(150 / 30) = 5, limited to max(2*2, 4)
		},
		{
			name: "pods metric",
			hpa:  podsHPA,
			setup: func(h *harness) {
				h.custom.AddReactor("get", "pods", func(a core.Action) (bool, runtime.Object, error) {
					if sel := a.(cmfake.GetForAction).GetLabelSelector().String(); sel != "app=web" {
						return true, nil, errors.New("unexpected pod selector " + sel)
					}
					return true, podsCustomMetric(a.(cmfake.GetForAction), map[string]int64{"web-0": 20000, "web-1": 20000}), nil
				})
			},
			wantReason: "pods metric requests_per_second above target",
			want:       4, // ceil(2 * 2)
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, world{
				hpas:    []*autoscalingv2.HorizontalPodAutoscaler{tt.hpa},
				targets: []target{{name: "web", replicas: 2, cpuRequest: 100, cpuUsage: []int64{10, 10}}},
			})
			tt.setup(h)
			if err := h.reconcile("web"); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if got := h.replicas("web"); got != tt.want {
				t.Errorf("target replicas = %d, want %d", got, tt.want)
			}
			evs := h.events.take()
			if len(evs) != 1 || evs[0].Reason != "SuccessfulRescale" || !strings.HasSuffix(evs[0].Note, "reason: "+tt.wantReason) {
				t.Errorf("events = %+v, want SuccessfulRescale with reason %q", evs, tt.wantReason)
			}
			if st := h.hpa("web").Status; len(st.CurrentMetrics) != 1 || st.CurrentMetrics[0].Type != tt.hpa.Spec.Metrics[0].Type {
				t.Errorf("currentMetrics = %+v, want one %s status", st.CurrentMetrics, tt.hpa.Spec.Metrics[0].Type)
			}
		})
	}
}

func TestAmbiguousSelector(t *testing.T) {
	a := cpuHPA("a", 1, 10, 50)
	b := cpuHPA("b", 1, 10, 50)
	h := newHarness(t, world{
		hpas: []*autoscalingv2.HorizontalPodAutoscaler{a, b},
		targets: []target{
			{name: "a", replicas: 2, cpuRequest: 100, cpuUsage: []int64{75, 75}},
			{name: "b", replicas: 2, selector: "app=a", cpuRequest: 100}, // selects a's pods
		},
	})
	if err := h.reconcile("a"); err != nil {
		t.Fatalf("reconcile a: %v", err)
	}
	h.events.take()
	err := h.reconcile("b")
	if err == nil || !strings.Contains(err.Error(), "controlled by more than one HPA") {
		t.Fatalf("reconcile b error = %v, want the ambiguous selector error", err)
	}
	var reasons []string
	for _, e := range h.events.take() {
		reasons = append(reasons, e.Reason)
	}
	if diff := cmp.Diff([]string{"AmbiguousSelector", "FailedComputeMetricsReplicas"}, reasons); diff != "" {
		t.Errorf("events of b (-want +got):\n%s", diff)
	}
	st := h.hpa("b").Status
	if c := autoscaler.Condition(&st, autoscalingv2.ScalingActive); c == nil || c.Reason != "AmbiguousSelector" {
		t.Errorf("ScalingActive of b = %+v, want AmbiguousSelector", c)
	}
}

func TestRunReconcilesAndDropsDeletedHPA(t *testing.T) {
	h := newHarness(t, world{
		hpas:    []*autoscalingv2.HorizontalPodAutoscaler{cpuHPA("web", 1, 10, 50)},
		targets: []target{{name: "web", replicas: 2, cpuRequest: 100, cpuUsage: []int64{75, 75}}},
	})
	done := make(chan string, 16)
	h.c.reconciled = func(key string) { done <- key }
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- h.c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	waitKey(t, done, "default/web")
	if got := h.replicas("web"); got != 3 {
		t.Fatalf("target replicas after the first sync = %d, want 3", got)
	}
	if !h.c.hasState("default/web") || !h.c.Ready() {
		t.Fatalf("state kept = %v, ready = %v; want both", h.c.hasState("default/web"), h.c.Ready())
	}
	if err := h.kube.AutoscalingV2().HorizontalPodAutoscalers("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !h.c.hasState("default/web"), nil
	})
	if err != nil {
		t.Fatalf("state of the deleted HPA was never dropped")
	}
	if got := h.counter("promscaler_autoscaler_hpas", nil); got != 0 {
		t.Errorf("hpas gauge = %v, want 0", got)
	}
	if got := h.counter("promscaler_autoscaler_desired_replicas", map[string]string{"namespace": "default", "hpa": "web"}); got != 0 {
		t.Errorf("desired_replicas series of the deleted HPA still exported: %v", got)
	}
	if got := h.c.selectors.matching("default", []*v1.Pod{readyPod("web-0", "web", 100)}, 0); len(got) != 0 {
		t.Errorf("selector of the deleted HPA still tracked: %v", got)
	}
}

func waitKey(t *testing.T, done <-chan string, key string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case k := <-done:
			if k == key {
				return
			}
		case <-timeout:
			t.Fatalf("%s was never reconciled", key)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	errs := (&Config{Mode: ModeFull, DryRunAnnotate: true, RequestTimeout: -time.Second}).Validate()
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		"controller config: Autoscaler is required",
		"controller config: HPAs is required",
		"controller config: Scales is required",
		"controller config: Mapper is required",
		"controller config: Metrics is required",
		"controller config: HPAInformer is required",
		"controller config: PodInformer is required",
		"controller config: Recorder is required",
		"controller config: Telemetry is required",
		"controller config: SyncPeriod 0s must be positive",
		"controller config: Workers 0 must be at least 1",
		"controller config: RequestTimeout -1s must not be negative",
		"controller config: DryRunAnnotate needs DryRun",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
}

func TestSelectorStore(t *testing.T) {
	s := newSelectorStore()
	mustParse := func(sel string) labels.Selector {
		parsed, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		return parsed
	}
	if !s.putIfAbsent("ns", "a", mustParse("app=x")) || s.putIfAbsent("ns", "a", mustParse("app=y")) {
		t.Fatal("putIfAbsent: want added once")
	}
	if s.putIfPresent("ns", "missing", mustParse("app=x")) {
		t.Error("putIfPresent added an unknown HPA")
	}
	s.putIfAbsent("ns", "b", mustParse("tier=web"))
	s.putIfAbsent("other", "c", mustParse("app=x"))
	pod := func(l map[string]string) *v1.Pod { return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: l}} }
	tests := []struct {
		name  string
		pods  []*v1.Pod
		limit int
		want  []string
	}{
		{"one match", []*v1.Pod{pod(map[string]string{"app": "x"})}, 2, []string{"ns/a"}},
		{"both", []*v1.Pod{pod(map[string]string{"app": "x", "tier": "web"})}, 0, []string{"ns/a", "ns/b"}},
		{"limit", []*v1.Pod{pod(map[string]string{"app": "x", "tier": "web"})}, 1, nil},
		{"none", []*v1.Pod{pod(map[string]string{"app": "z"})}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.matching("ns", tt.pods, tt.limit)
			if tt.limit == 1 {
				if len(got) != 1 {
					t.Errorf("matching with limit 1 = %v, want one key", got)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("matching (-want +got):\n%s", diff)
			}
		})
	}
	s.delete("ns", "a")
	if got := s.matching("ns", []*v1.Pod{pod(map[string]string{"app": "x"})}, 0); len(got) != 0 {
		t.Errorf("after delete, matching = %v", got)
	}
}

// podsCustomMetric answers a custom metrics GetForObjects for pods.
func podsCustomMetric(a cmfake.GetForAction, milli map[string]int64) *customapi.MetricValueList {
	list := &customapi.MetricValueList{}
	for name, v := range milli {
		list.Items = append(list.Items, customapi.MetricValue{
			DescribedObject: v1.ObjectReference{Kind: "Pod", Name: name, Namespace: "default"},
			Metric:          customapi.MetricIdentifier{Name: a.GetMetricName()},
			Timestamp:       metav1.NewTime(now),
			WindowSeconds:   ptr.To[int64](60),
			Value:           *resource.NewMilliQuantity(v, resource.DecimalSI),
		})
	}
	return list
}
