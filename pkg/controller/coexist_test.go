package controller

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/promscaler/promscaler/pkg/scaletozero"
)

func coexist(h *harness, c *Config) { c.Mode = ModeCoexist; c.PodInformer = nil }

// queueHPA is an HPA on an External metric "queue_depth", minReplicas 2.
func queueHPA(name string, ann map[string]string) *autoscalingv2.HorizontalPodAutoscaler {
	hpa := cpuHPA(name, 2, 10, 50)
	hpa.Annotations = ann
	hpa.Spec.Metrics = []autoscalingv2.MetricSpec{{
		Type: autoscalingv2.ExternalMetricSourceType,
		External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(30, resource.DecimalSI)},
		},
	}}
	return hpa
}

// queue serves the external metric queue_depth: a value, or an error.
type queue struct {
	mu    sync.Mutex
	value int64
	err   error
	reads int
}

func (q *queue) set(v int64, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.value, q.err = v, err
}

func (q *queue) serve(h *harness) {
	h.external.AddReactor("list", "queue_depth", func(core.Action) (bool, runtime.Object, error) {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.reads++
		if q.err != nil {
			return true, nil, q.err
		}
		return true, &externalapi.ExternalMetricValueList{Items: []externalapi.ExternalMetricValue{
			{MetricName: "queue_depth", Timestamp: metav1.NewTime(now), Value: *resource.NewQuantity(q.value, resource.DecimalSI)},
		}}, nil
	})
}

func statusOf(t *testing.T, h *harness, name string) scaletozero.Status {
	t.Helper()
	var st scaletozero.Status
	v, ok := h.hpa(name).Annotations[scaletozero.AnnotationStatus]
	if !ok {
		return st
	}
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		t.Fatalf("status annotation %q: %v", v, err)
	}
	return st
}

// checkStep waits for the cache to see our writes to HPA name, then checks
// its target's replicas and the events (type reason action), all on name.
func checkStep(t *testing.T, h *harness, step int, name string, wantReplicas int32, wantEvents []string) {
	t.Helper()
	h.waitForCache(name)
	if got := h.replicas(name); got != wantReplicas {
		t.Errorf("step %d: replicas %d, want %d", step, got, wantReplicas)
	}
	var got []string
	for _, e := range h.events.take() {
		if e.Object != "default/"+name {
			t.Errorf("step %d: event on %s: %+v", step, e.Object, e)
		}
		got = append(got, e.Type+" "+e.Reason+" "+e.Action)
	}
	if diff := cmp.Diff(wantEvents, got); diff != "" {
		t.Errorf("step %d: events (-want +got):\n%s", step, diff)
	}
}

func TestCoexistScaleToZeroAndBack(t *testing.T) {
	ann := map[string]string{
		scaletozero.AnnotationActivationMetric:    "queue_depth",
		scaletozero.AnnotationActivationThreshold: "5",
		scaletozero.AnnotationIdlePeriod:          "1m",
	}
	h := newHarness(t, world{
		hpas: []*autoscalingv2.HorizontalPodAutoscaler{
			queueHPA("worker", ann),
			queueHPA("plain", nil), // not annotated: never read nor written
		},
		targets: []target{{name: "worker", replicas: 2}, {name: "plain", replicas: 2}},
	}, coexist)
	q := &queue{}
	q.serve(h)

	type step struct {
		wait   time.Duration
		value  int64
		want   int32
		events []string
		state  string
	}
	steps := []step{
		{value: 3, want: 2},
		{wait: 30 * time.Second, value: 5, want: 2},
		{wait: 30 * time.Second, value: 0, want: 0, events: []string{"Normal ScaledToZero Rescale"}, state: "ScaledToZero"},
		{wait: 15 * time.Second, value: 5, want: 0, state: "ScaledToZero"},
		{wait: 15 * time.Second, value: 6, want: 2, events: []string{"Normal Activated Rescale"}, state: "Active"},
		{wait: 15 * time.Second, value: 0, want: 2, state: "Active"},
	}
	for i, s := range steps {
		h.clock.Step(s.wait)
		q.set(s.value, nil)
		if err := h.reconcile("worker"); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if err := h.reconcile("plain"); err != nil {
			t.Fatalf("step %d, unannotated: %v", i, err)
		}
		checkStep(t, h, i, "worker", s.want, s.events)
		if s.state != "" {
			st := statusOf(t, h, "worker")
			if st.State != s.state || st.Valid.Status != "True" {
				t.Errorf("step %d: status %+v, want state %s", i, st, s.state)
			}
		}
	}
	st := statusOf(t, h, "worker")
	if st.LastAction != scaletozero.ActionActivate || st.LastActionTime == "" || !strings.Contains(st.Reason, "above the threshold 5") {
		t.Errorf("status %+v, want the activation as last action", st)
	}
	// Two /scale writes (to 0, to 2), both on worker; the unannotated HPA
	// saw nothing read or written.
	if n := h.scaleWrites(); n != 2 {
		t.Errorf("%d /scale writes, want 2", n)
	}
	for _, a := range append(h.scales.Actions(), h.kube.Actions()...) {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		if n, ok := a.(interface{ GetName() string }); ok && n.GetName() == "plain" {
			t.Errorf("unannotated HPA touched: %s %s %s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		}
	}
	// The status annotation: first seen (Active), ScaledToZero, Active.
	if diff := cmp.Diff([]string{"patch", "patch", "patch"}, h.hpaWrites()); diff != "" {
		t.Errorf("HPA writes (-want +got):\n%s", diff)
	}
	if got := h.counter("promscaler_autoscaler_coexist_actions_total", map[string]string{"action": "ScaledToZero"}); got != 1 {
		t.Errorf("coexist_actions_total{ScaledToZero} = %v, want 1", got)
	}
}

func TestCoexistFallback(t *testing.T) {
	ann := map[string]string{
		scaletozero.AnnotationActivationMetric: "queue_depth",
		scaletozero.AnnotationFallbackReplicas: "4",
		scaletozero.AnnotationFallbackAfter:    "3",
	}
	h := newHarness(t, world{
		hpas:    []*autoscalingv2.HorizontalPodAutoscaler{queueHPA("worker", ann)},
		targets: []target{{name: "worker", replicas: 0}},
	}, coexist)
	q := &queue{}
	q.serve(h)
	down := apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	steps := []struct {
		err    error
		want   int32
		events []string
	}{
		{err: down, want: 0},
		{err: down, want: 0},
		{err: down, want: 4, events: []string{"Warning FallbackApplied Rescale"}},
		{err: down, want: 4},
		{want: 4, events: []string{"Normal FallbackEnded Recover"}},
	}
	for i, s := range steps {
		h.clock.Step(15 * time.Second)
		q.set(0, s.err)
		if err := h.reconcile("worker"); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		checkStep(t, h, i, "worker", s.want, s.events)
	}
	if st := statusOf(t, h, "worker"); st.State != "Active" || st.LastAction != scaletozero.ActionRecover {
		t.Errorf("status %+v, want Active after FallbackEnded", st)
	}
}

func TestCoexistInvalidAnnotation(t *testing.T) {
	h := newHarness(t, world{
		hpas:    []*autoscalingv2.HorizontalPodAutoscaler{queueHPA("worker", map[string]string{scaletozero.AnnotationActivationMetric: "queue_depth", scaletozero.AnnotationIdlePeriod: "soon"})},
		targets: []target{{name: "worker", replicas: 2}},
	}, coexist)
	for i := range 3 {
		if err := h.reconcile("worker"); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		h.waitForCache("worker")
	}
	evs := h.events.take()
	if len(evs) != 1 || evs[0].Type != v1.EventTypeWarning || evs[0].Reason != "InvalidAnnotation" ||
		!strings.Contains(evs[0].Note, `promscaler.io/idle-period="soon"`) {
		t.Errorf("events %+v, want one InvalidAnnotation warning naming the annotation", evs)
	}
	st := statusOf(t, h, "worker")
	if st.State != scaletozero.StateInvalid || st.Valid.Status != "False" || !strings.Contains(st.Valid.Message, "idle-period") {
		t.Errorf("status %+v, want Invalid naming idle-period", st)
	}
	if diff := cmp.Diff([]string{"patch"}, h.hpaWrites()); diff != "" {
		t.Errorf("HPA writes after 3 reconciles (-want +got):\n%s", diff)
	}
	if n := h.scaleWrites(); n != 0 {
		t.Errorf("%d /scale writes, want none", n)
	}
}

// TestCoexistConflictNotRetried: kube-controller-manager scaled the target
// between our read and our write; ours must not overwrite its value.
func TestCoexistConflictNotRetried(t *testing.T) {
	h := newHarness(t, world{
		hpas: []*autoscalingv2.HorizontalPodAutoscaler{queueHPA("worker", map[string]string{
			scaletozero.AnnotationActivationMetric: "queue_depth", scaletozero.AnnotationIdlePeriod: "1s"})},
		targets: []target{{name: "worker", replicas: 2}},
	}, coexist)
	q := &queue{}
	q.serve(h)
	h.scales.PrependReactor("update", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "worker", errors.New("modified"))
	})
	if err := h.reconcile("worker"); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(2 * time.Second)
	err := h.reconcile("worker")
	if !apierrors.IsConflict(err) {
		t.Fatalf("reconcile = %v, want the conflict", err)
	}
	if n := h.scaleWrites(); n != 1 {
		t.Errorf("%d /scale writes, want 1 (no retry on a re-read value)", n)
	}
	if evs := h.events.take(); len(evs) != 0 {
		t.Errorf("events %+v, want none for a write that did not happen", evs)
	}
}

func TestOwnedHPAs(t *testing.T) {
	mine := cpuHPA("mine", 1, 10, 50)
	mine.Labels = map[string]string{"promscaler.io/controller": "promscaler"}
	h := newHarness(t, world{
		hpas:    []*autoscalingv2.HorizontalPodAutoscaler{mine, cpuHPA("theirs", 1, 10, 50)},
		targets: []target{{name: "mine", replicas: 2, cpuRequest: 100, cpuUsage: []int64{90, 90}}, {name: "theirs", replicas: 2, cpuRequest: 100, cpuUsage: []int64{90, 90}}},
	}, func(_ *harness, c *Config) {
		c.Selector = labels.SelectorFromSet(labels.Set{"promscaler.io/controller": "promscaler"})
		c.Namespaces = []string{"default"}
	})
	for _, name := range []string{"mine", "theirs"} {
		if err := h.reconcile(name); err != nil {
			t.Fatal(err)
		}
	}
	if h.replicas("mine") != 4 || h.replicas("theirs") != 2 {
		t.Errorf("replicas mine=%d theirs=%d, want 4 and 2 (theirs not owned)", h.replicas("mine"), h.replicas("theirs"))
	}
	if h.c.hasState("default/theirs") {
		t.Error("state kept for an HPA not owned")
	}
}

// TestCoexistUnknownAnnotation: an HPA whose only promscaler annotation is
// misspelt is picked up and warned about once, with the nearest name.
func TestCoexistUnknownAnnotation(t *testing.T) {
	h := newHarness(t, world{
		hpas:    []*autoscalingv2.HorizontalPodAutoscaler{queueHPA("worker", map[string]string{"promscaler.io/idle-perod": "10m"})},
		targets: []target{{name: "worker", replicas: 2}},
	}, coexist)
	for i := range 3 {
		if err := h.reconcile("worker"); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		h.waitForCache("worker")
	}
	evs := h.events.take()
	if len(evs) != 1 || evs[0].Type != v1.EventTypeWarning || evs[0].Reason != "UnknownAnnotation" ||
		!strings.Contains(evs[0].Note, "did you mean promscaler.io/idle-period?") {
		t.Errorf("events %+v, want one UnknownAnnotation warning suggesting idle-period", evs)
	}
	st := statusOf(t, h, "worker")
	if st.State != "Active" || len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "idle-perod") {
		t.Errorf("status %+v, want Active with the warning", st)
	}
	if n := h.scaleWrites(); n != 0 {
		t.Errorf("%d /scale writes, want none", n)
	}
}

// TestCoexistPause: paused-replicas writes the count once and holds it;
// paused-scale-in keeps an idle target from zero; lifting the pause is
// reported.
func TestCoexistPause(t *testing.T) {
	h := newHarness(t, world{
		hpas: []*autoscalingv2.HorizontalPodAutoscaler{queueHPA("worker", map[string]string{
			scaletozero.AnnotationActivationMetric: "queue_depth", scaletozero.AnnotationIdlePeriod: "1s",
			scaletozero.AnnotationPausedReplicas: "5"})},
		targets: []target{{name: "worker", replicas: 2}},
	}, coexist)
	q := &queue{}
	q.serve(h)
	setAnn := func(k, v string) {
		t.Helper()
		hpa := h.hpa("worker").DeepCopy()
		if v == "" {
			delete(hpa.Annotations, k)
		} else {
			hpa.Annotations[k] = v
		}
		if _, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers("default").Update(context.Background(), hpa, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.waitForCache("worker")
	}
	for i := range 3 {
		h.clock.Step(15 * time.Second)
		if err := h.reconcile("worker"); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		var want []string
		if i == 0 {
			want = []string{"Normal Paused Pause"}
		}
		checkStep(t, h, i, "worker", 5, want)
	}
	if st := statusOf(t, h, "worker"); st.State != "Paused" || st.Pause != "replicas 5" {
		t.Errorf("status %+v, want Paused at replicas 5", st)
	}
	setAnn(scaletozero.AnnotationPausedReplicas, "")
	setAnn(scaletozero.AnnotationPausedScaleIn, "true")
	sc := h.scales.Get("default", "worker").DeepCopy()
	sc.Spec.Replicas = 2 // a user scales by hand
	h.scales.Set(sc)
	for i := range 3 {
		h.clock.Step(15 * time.Second)
		if err := h.reconcile("worker"); err != nil {
			t.Fatalf("scale-in reconcile %d: %v", i, err)
		}
		var want []string
		if i == 0 {
			want = []string{"Normal PauseEnded Recover"}
		}
		checkStep(t, h, i, "worker", 2, want)
	}
	if st := statusOf(t, h, "worker"); st.Pause != "scale-in" || st.State != "Active" || st.LastAction != scaletozero.ActionUnpause {
		t.Errorf("status %+v, want pause scale-in after PauseEnded", st)
	}
	if n := h.scaleWrites(); n != 1 {
		t.Errorf("%d /scale writes by promscaler, want 1 (the paused replicas)", n)
	}
}
