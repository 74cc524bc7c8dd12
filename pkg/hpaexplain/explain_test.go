package hpaexplain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	cmfake "k8s.io/metrics/pkg/client/custom_metrics/fake"
	emfake "k8s.io/metrics/pkg/client/external_metrics/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/controller"
	"github.com/promscaler/promscaler/test/golden"
	"github.com/promscaler/promscaler/test/kubefake"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// world is the cluster a case explains: one HPA on Deployment shop/web.
type world struct {
	hpa *autoscalingv2.HorizontalPodAutoscaler
	// replicas is the Deployment's /scale; pods are web-0.. (ready, with
	// a 500m CPU request), podMilli their custom metric fpm_active_rate
	// and cpuMilli their CPU usage (a negative value: no sample).
	replicas  int32
	pods      int
	podMilli  []int64
	cpuMilli  []int64
	noTarget  bool
	podsError error
}

func hpaFor(minR, maxR int32, metric autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &minR,
			MaxReplicas:    maxR,
			Metrics:        []autoscalingv2.MetricSpec{metric},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{DesiredReplicas: 3},
	}
}

func podsMetric(avg string) autoscalingv2.MetricSpec {
	q := resource.MustParse(avg)
	return autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "fpm_active_rate"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}}}
}

func cpuMetric(util int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: v1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &util}}}
}

func newExplainer(t *testing.T, w world) *Explainer {
	t.Helper()
	objs := []runtime.Object{w.hpa}
	var podMetrics []metricsapi.PodMetrics
	for i := range w.pods {
		start := metav1.NewTime(now.Add(-time.Hour))
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "shop", Labels: map[string]string{"app": "web"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: &start,
				Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: start}}},
		}
		objs = append(objs, p)
		if i < len(w.cpuMilli) && w.cpuMilli[i] >= 0 {
			podMetrics = append(podMetrics, metricsapi.PodMetrics{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: "shop", Labels: p.Labels},
				Timestamp:  metav1.NewTime(now.Add(-10 * time.Second)),
				Window:     metav1.Duration{Duration: 30 * time.Second},
				Containers: []metricsapi.ContainerMetrics{{Name: "app", Usage: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(w.cpuMilli[i], resource.DecimalSI)}}},
			})
		}
	}
	// a pod of another app, which the selector must leave out
	objs = append(objs, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "shop", Labels: map[string]string{"app": "db"}}})
	kube := k8sfake.NewClientset(objs...)

	resourceMetrics := kubefake.PodMetrics(podMetrics)
	custom := &cmfake.FakeCustomMetricsClient{}
	custom.AddReactor("get", "pods", func(a core.Action) (bool, runtime.Object, error) {
		g := a.(cmfake.GetForAction)
		if w.podsError != nil {
			return true, nil, w.podsError
		}
		if g.GetNamespace() != "shop" || g.GetMetricName() != "fpm_active_rate" || g.GetLabelSelector().String() != "app=web" {
			return true, nil, fmt.Errorf("unexpected request %s/%s %s", g.GetNamespace(), g.GetMetricName(), g.GetLabelSelector())
		}
		list := &customapi.MetricValueList{}
		for i, v := range w.podMilli {
			list.Items = append(list.Items, customapi.MetricValue{
				DescribedObject: v1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("web-%d", i), Namespace: "shop"},
				Metric:          customapi.MetricIdentifier{Name: g.GetMetricName()},
				Timestamp:       metav1.NewTime(now.Add(-15 * time.Second)),
				Value:           *resource.NewMilliQuantity(v, resource.DecimalSI),
			})
		}
		return true, list, nil
	})

	scales := kubefake.NewScales()
	if !w.noTarget {
		scales.Set(kubefake.DeploymentScale("shop", "web", w.replicas, "app=web"))
	}

	clk := clocktesting.NewFakePassiveClock(now)
	a, err := autoscaler.New(autoscaler.DefaultConfig(), clk)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{
		Autoscaler: a,
		HPAs:       HPAsFrom(kube),
		Pods:       PodsFrom(kube),
		Scales:     scales,
		Mapper:     kubefake.Mapper(),
		Metrics: &controller.MetricsReader{Client: &controller.APIMetricsClient{
			Resource: resourceMetrics.MetricsV1beta1(), Custom: custom, External: &emfake.FakeExternalMetricsClient{}}},
		Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestExplain explains each case, compares both renderings with the golden
// files in testdata (regenerate with go test ./pkg/hpaexplain -update) and
// checks the decision the case is there for.
func TestExplain(t *testing.T) {
	withBehavior := hpaFor(1, 10, cpuMetric(50))
	withBehavior.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](60),
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}},
	}}
	last := metav1.NewTime(now.Add(-20 * time.Second))
	withBehavior.Status.LastScaleTime = &last
	withBehavior.Status.DesiredReplicas = 4

	cases := []struct {
		name  string
		world world
		check func(t *testing.T, x *Explanation)
	}{
		{
			name:  "pods-scale-up",
			world: world{hpa: hpaFor(2, 8, podsMetric("500m")), replicas: 3, pods: 3, podMilli: []int64{1000, 1000, 1000}},
			check: func(t *testing.T, x *Explanation) {
				m := x.Metrics[0]
				if !x.Rescale || x.DesiredReplicas != 6 || *m.ProposedReplicas != 6 || *m.UsageRatio != 2 || *m.WithinTolerance {
					t.Errorf("want a rescale to 6 from a usage ratio of 2 outside the tolerance, got %+v / %+v", x, m)
				}
				if m.Pods.Ready != 3 || x.Pods.Total != 3 {
					t.Errorf("want the 3 pods of the selector, got %+v, %+v", m.Pods, x.Pods)
				}
			},
		},
		{
			name:  "pods-held-by-tolerance",
			world: world{hpa: hpaFor(2, 8, podsMetric("500m")), replicas: 3, pods: 3, podMilli: []int64{520, 520, 520}},
			check: func(t *testing.T, x *Explanation) {
				m := x.Metrics[0]
				if x.Rescale || x.DesiredReplicas != 3 || *m.UsageRatio != 1.04 || !*m.WithinTolerance {
					t.Errorf("want 3 replicas kept by a ratio of 1.04 within the tolerance, got %+v / %+v", x, m)
				}
			},
		},
		{
			name:  "cpu-scale-down-behavior-missing-pod",
			world: world{hpa: withBehavior, replicas: 5, pods: 5, cpuMilli: []int64{50, 50, 50, 50, -1}},
			check: func(t *testing.T, x *Explanation) {
				m := x.Metrics[0]
				if len(m.Pods.Missing) != 1 || m.Pods.Missing[0] != "web-4" || m.AdjustedUsageRatio == nil {
					t.Errorf("want web-4 missing and filled in, got %+v", m)
				}
				n := x.Normalization
				if n == nil || !n.Behavior || *n.ScaleDownLimit != 4 || n.LimitReason != "ScaleDownLimit" || !x.Rescale || x.DesiredReplicas != 4 {
					t.Errorf("want the 1-pod-per-60s policy to limit the scale-down to 4, got %+v, %+v", n, x)
				}
				if len(x.History.Notes) != 2 || !strings.Contains(x.History.Notes[1], "last rescaled 20s ago") {
					t.Errorf("want notes on the scale-down window and the recent rescale, got %q", x.History.Notes)
				}
			},
		},
		{
			name:  "pods-metric-fails",
			world: world{hpa: hpaFor(2, 8, podsMetric("500m")), replicas: 3, pods: 3, podsError: errors.New("the server is currently unable to handle the request")},
			check: func(t *testing.T, x *Explanation) {
				if x.Rescale || x.ProposedReplicas != nil || x.Metrics[0].Error == "" || x.Error == "" {
					t.Errorf("want no proposal and the metric's error, got %+v", x)
				}
			},
		},
		{
			name:  "target-not-found",
			world: world{hpa: hpaFor(2, 8, podsMetric("500m")), noTarget: true},
			check: func(t *testing.T, x *Explanation) {
				if x.Rescale || !strings.Contains(x.Error, "not found") || x.MetricsSkipped == "" {
					t.Errorf("want the scale read error and no metrics, got %+v", x)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newExplainer(t, tc.world)
			x, err := e.Explain(context.Background(), "shop", "web")
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, x)
			var js, text bytes.Buffer
			if err := x.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if err := x.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", tc.name+".json"), js.Bytes())
			golden.Check(t, filepath.Join("testdata", tc.name+".txt"), text.Bytes())
		})
	}
}

func TestExplainMissingHPA(t *testing.T) {
	e := newExplainer(t, world{hpa: hpaFor(2, 8, podsMetric("500m")), replicas: 3, pods: 3})
	_, err := e.Explain(context.Background(), "shop", "nope")
	if err == nil || !strings.Contains(err.Error(), "reading HPA shop/nope") {
		t.Errorf("err = %v, want one naming the HPA", err)
	}
}

func TestNewNamesMissingDependencies(t *testing.T) {
	_, err := New(Config{})
	for _, dep := range []string{"Autoscaler", "HPAs", "Pods", "Scales", "Mapper", "Metrics"} {
		if err == nil || !strings.Contains(err.Error(), dep+" is required") {
			t.Errorf("err = %v, want %s named", err, dep)
		}
	}
}

func TestPromscalerAnnotations(t *testing.T) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	hpa.Spec.MaxReplicas = 10
	hpa.Annotations = map[string]string{
		"promscaler.io/paused-replicas": "3", "promscaler.io/fallback-behavior": "currentReplicas", "promscaler.io/idle-perod": "1m",
	}
	ps := promscalerOf(hpa)
	want := &Promscaler{
		Settings: []string{
			"fallback: currentReplicas (replicas 0) after 3 failed periods, a period failing on all metrics",
			"paused: replicas 3 (kube-controller-manager is held back only with the promscaler-pause admission policy)",
		},
		Unknown: []string{`annotation promscaler.io/idle-perod="1m": unknown promscaler.io annotation, ignored; did you mean promscaler.io/idle-period?`},
	}
	if diff := cmp.Diff(want, ps); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	var b strings.Builder
	x := &Explanation{Promscaler: ps, MetricsSkipped: "test"}
	if err := x.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "paused: replicas 3") || !strings.Contains(b.String(), "warning: annotation promscaler.io/idle-perod") {
		t.Errorf("text lacks the annotations:\n%s", b.String())
	}
	if promscalerOf(&autoscalingv2.HorizontalPodAutoscaler{}) != nil {
		t.Error("an HPA without promscaler.io annotations has a promscaler section")
	}
}
