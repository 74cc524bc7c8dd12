package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	cmfake "k8s.io/metrics/pkg/client/custom_metrics/fake"
	emfake "k8s.io/metrics/pkg/client/external_metrics/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/test/kubefake"
)

// now is the fake time every test starts at.
var now = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// recordedEvent is one event the controller recorded.
type recordedEvent struct {
	Object string // namespace/name of the regarding object
	Type   string
	Reason string
	Action string
	Note   string
}

// eventLog is an events.EventRecorder that keeps what it is given.
type eventLog struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (l *eventLog) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	m, err := meta.Accessor(regarding)
	obj := "?"
	if err == nil {
		obj = m.GetNamespace() + "/" + m.GetName()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, recordedEvent{Object: obj, Type: eventtype, Reason: reason, Action: action, Note: fmt.Sprintf(note, args...)})
}

func (l *eventLog) take() []recordedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// target is a Deployment with its /scale and pods.
type target struct {
	name     string
	replicas int32
	selector string // empty: "app=<name>"
	// pods of the target: cpu request per pod, cpu usage per pod (milli).
	cpuRequest int64
	cpuUsage   []int64
}

// world is what a test starts the fakes with.
type world struct {
	hpas    []*autoscalingv2.HorizontalPodAutoscaler
	targets []target
	// extra objects for the core clientset.
	objects []runtime.Object
}

// harness wires a Controller to client-go and k8s.io/metrics fakes.
type harness struct {
	t        *testing.T
	kube     *k8sfake.Clientset
	scales   *kubefake.Scales
	metrics  *metricsfake.Clientset
	custom   *cmfake.FakeCustomMetricsClient
	external *emfake.FakeExternalMetricsClient
	events   *eventLog
	clock    *testingclock.FakeClock
	reg      *prometheus.Registry
	c        *Controller
	factory  informers.SharedInformerFactory
}

// harnessOption changes the controller's Config; it may use the
// harness's fakes (its clock).
type harnessOption func(*harness, *Config)

func dryRun(annotate bool) harnessOption {
	return func(_ *harness, c *Config) { c.DryRun, c.DryRunAnnotate = true, annotate }
}

func newHarness(t *testing.T, w world, opts ...harnessOption) *harness {
	t.Helper()
	h := &harness{
		t:        t,
		events:   &eventLog{},
		clock:    testingclock.NewFakeClock(now),
		reg:      prometheus.NewRegistry(),
		scales:   kubefake.NewScales(),
		custom:   &cmfake.FakeCustomMetricsClient{},
		external: &emfake.FakeExternalMetricsClient{},
	}
	objs := append([]runtime.Object{}, w.objects...)
	var podMetrics []metricsapi.PodMetrics
	for _, hpa := range w.hpas {
		objs = append(objs, hpa)
	}
	for _, tg := range w.targets {
		sel := tg.selector
		if sel == "" {
			sel = "app=" + tg.name
		}
		h.scales.Set(kubefake.DeploymentScale("default", tg.name, tg.replicas, sel))
		for i, usage := range tg.cpuUsage {
			p := readyPod(fmt.Sprintf("%s-%d", tg.name, i), tg.name, tg.cpuRequest)
			objs = append(objs, p)
			podMetrics = append(podMetrics, metricsapi.PodMetrics{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels},
				Timestamp:  metav1.NewTime(now),
				Window:     metav1.Duration{Duration: 30 * time.Second},
				Containers: []metricsapi.ContainerMetrics{{
					Name:  "app",
					Usage: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(usage, resource.DecimalSI)},
				}},
			})
		}
	}
	h.kube = k8sfake.NewClientset(objs...)
	h.metrics = kubefake.PodMetrics(podMetrics)

	core, err := autoscaler.New(autoscaler.DefaultConfig(), h.clock)
	if err != nil {
		t.Fatal(err)
	}
	tel, err := NewMetrics(h.reg)
	if err != nil {
		t.Fatal(err)
	}
	h.factory = informers.NewSharedInformerFactory(h.kube, 0)
	cfg := Config{
		Mode:        ModeFull,
		Autoscaler:  core,
		HPAs:        h.kube.AutoscalingV2(),
		Scales:      h.scales,
		Mapper:      kubefake.Mapper(),
		Metrics:     &APIMetricsClient{Resource: h.metrics.MetricsV1beta1(), Custom: h.custom, External: h.external},
		HPAInformer: h.factory.Autoscaling().V2().HorizontalPodAutoscalers(),
		PodInformer: h.factory.Core().V1().Pods(),
		Recorder:    h.events,
		Clock:       h.clock,
		Telemetry:   tel,
		SyncPeriod:  15 * time.Second,
		Workers:     2,
	}
	for _, o := range opts {
		o(h, &cfg)
	}
	h.c, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		h.factory.Shutdown()
	})
	h.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), h.c.HasSynced) {
		t.Fatal("caches did not sync")
	}
	return h
}

// reconcile runs one reconcile of default/name, as a worker would.
func (h *harness) reconcile(name string) error {
	h.t.Helper()
	_, err := h.c.reconcileKey(context.Background(), "default/"+name)
	return err
}

// hpa returns the HPA as the API (the fake) holds it.
func (h *harness) hpa(name string) *autoscalingv2.HorizontalPodAutoscaler {
	h.t.Helper()
	hpa, err := h.kube.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return hpa
}

// waitForCache waits until the informer's copy of the HPA equals what the
// API holds (so the next reconcile sees our writes). The fake clientset
// keeps resourceVersion as given, so annotations, spec and status are
// compared.
func (h *harness) waitForCache(name string) {
	h.t.Helper()
	want := h.hpa(name)
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, err := h.c.hpaLister.HorizontalPodAutoscalers("default").Get(name)
		return err == nil && apiequality.Semantic.DeepEqual(got.Annotations, want.Annotations) &&
			apiequality.Semantic.DeepEqual(got.Spec, want.Spec) && apiequality.Semantic.DeepEqual(got.Status, want.Status), nil
	})
	if err != nil {
		h.t.Fatalf("informer never caught up with HPA %s", name)
	}
}

// replicas returns the target's /scale spec.replicas.
func (h *harness) replicas(name string) int32 {
	return h.scales.Get("default", name).Spec.Replicas
}

// actions returns the verbs (with subresource) of the core clientset's
// writes to HPAs.
func (h *harness) hpaWrites() []string {
	var out []string
	for _, a := range h.kube.Actions() {
		if a.GetResource().Resource != "horizontalpodautoscalers" {
			continue
		}
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		v := a.GetVerb()
		if s := a.GetSubresource(); s != "" {
			v += "/" + s
		}
		out = append(out, v)
	}
	return out
}

// scaleWrites counts update actions on /scale.
func (h *harness) scaleWrites() int {
	n := 0
	for _, a := range h.scales.Actions() {
		if a.GetVerb() == "update" || a.GetVerb() == "patch" {
			n++
		}
	}
	return n
}

// counter returns the value of a counter (or gauge) with the given labels,
// 0 when the series does not exist.
func (h *harness) counter(name string, labels map[string]string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsMatch(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
	}
	return 0
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// readyPod is a Running pod of the target app, started and ready long
// before now.
func readyPod(name, app string, cpuRequestMilli int64) *v1.Pod {
	started := metav1.NewTime(now.Add(-10 * time.Minute))
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": app}},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "app",
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: *resource.NewMilliQuantity(cpuRequestMilli, resource.DecimalSI),
			}},
		}}},
		Status: v1.PodStatus{
			Phase:     v1.PodRunning,
			StartTime: &started,
			Conditions: []v1.PodCondition{{
				Type: v1.PodReady, Status: v1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(now.Add(-9 * time.Minute)),
			}},
		},
	}
}

// cpuHPA is an HPA of Deployment name with a CPU utilization target.
func cpuHPA(name string, minR, maxR, utilization int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Generation: 1, ResourceVersion: "1"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    ptr.To(minR),
			MaxReplicas:    maxR,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   v1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(utilization)},
				},
			}},
		},
	}
}
