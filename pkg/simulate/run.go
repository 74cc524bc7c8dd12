package simulate

import (
	"errors"
	"fmt"
	"sort"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

const defaultWindow = time.Minute

// Config returns the autoscaler settings the scenario's controller section
// gives (kube-controller-manager 1.37 defaults for what it leaves unset).
func (s *Scenario) Config() autoscaler.Config {
	cfg := autoscaler.DefaultConfig()
	c := s.Controller
	if c.Tolerance != nil {
		cfg.Tolerance = *c.Tolerance
	}
	if c.DownscaleStabilization != nil {
		cfg.DownscaleStabilizationWindow = c.DownscaleStabilization.Duration
	}
	if c.CPUInitializationPeriod != nil {
		cfg.CPUInitializationPeriod = c.CPUInitializationPeriod.Duration
	}
	if c.InitialReadinessDelay != nil {
		cfg.InitialReadinessDelay = c.InitialReadinessDelay.Duration
	}
	if f := c.Features; f != nil {
		if f.ScaleToZero != nil {
			cfg.Features.ScaleToZero = *f.ScaleToZero
		}
		if f.PodLevelResources != nil {
			cfg.Features.PodLevelResources = *f.PodLevelResources
		}
		if f.ObservedGeneration != nil {
			cfg.Features.ObservedGeneration = *f.ObservedGeneration
		}
	}
	return cfg
}

// genPod is a pod of the generator, created at an offset.
type genPod struct {
	name    string
	created time.Duration
	initial bool
}

// world is the simulated cluster between steps.
type world struct {
	s        *Scenario
	start    time.Time
	hpa      *autoscalingv2.HorizontalPodAutoscaler
	replicas int32
	selector string
	explicit []Pod
	gen      []genPod
	nextGen  int
	values   map[int]MetricValue
}

// Options change what Run reports.
type Options struct {
	// History adds the controllers' memory after each step to the result.
	History bool
}

// Run replays the scenario and returns every step's decision. The
// scenario must come from Parse or Load (validated).
func Run(s *Scenario, opts Options) (*Result, error) {
	a, clk, w, err := newWorld(s)
	if err != nil {
		return nil, err
	}
	specs := autoscaler.MetricSpecs(&s.HPA)
	keySpecs := s.keySpecs()
	state := w.preloadedState()
	scalerSpec, scaler := s.scalerSpec()
	zero := w.preloadedScaler()
	res := &Result{HPA: w.hpa.Namespace + "/" + w.hpa.Name, Start: w.start}
	for i := range s.Steps {
		st := &s.Steps[i]
		now := w.start.Add(st.At.Duration)
		clk.SetTime(now)
		if st.Replicas != nil {
			w.replicas = *st.Replicas
		}
		if st.Pods != nil {
			w.explicit = st.Pods
		}
		w.follow(st.At.Duration)
		for key, mv := range st.Metrics {
			idx, _ := s.resolveKey(key)
			w.values[idx] = mv
		}
		pods := w.pods(st.At.Duration)
		statusReplicas := countLive(pods)
		if st.StatusReplicas != nil {
			statusReplicas = *st.StatusReplicas
		}
		in := autoscaler.Input{
			HPA:            w.hpa,
			SpecReplicas:   w.replicas,
			StatusReplicas: statusReplicas,
			Selector:       w.selector,
			Pods:           pods,
		}
		for j, spec := range specs {
			in.Metrics = append(in.Metrics, w.metricValues(j, spec, pods, now))
		}
		current := w.replicas
		d := a.Decide(state, in)
		if d.Rescale {
			var scaleErr error
			switch p := scalerSpec.Pause; {
			case st.ScaleError != "":
				scaleErr = errors.New(st.ScaleError)
			case scaler && p.Blocks(current, d.DesiredReplicas):
				// The promscaler-pause admission policy denies
				// kube-controller-manager this write.
				scaleErr = fmt.Errorf("denied by the promscaler-pause ValidatingAdmissionPolicy: the HPA's pause annotations (%s) forbid %d -> %d", p, current, d.DesiredReplicas)
			}
			a.FinishRescale(state, &d, scaleErr)
			if scaleErr == nil {
				w.replicas = d.DesiredReplicas
				w.follow(st.At.Duration)
			}
		}
		w.hpa = w.hpa.DeepCopy()
		w.hpa.Status = d.Status
		r := stepResult(i, st.At, now, current, statusReplicas, pods, specs, d, w.replicas)
		if scaler {
			r.Scaler = w.scalerStep(scalerSpec, &zero, keySpecs, st, now)
			r.Replicas = w.replicas
		}
		if opts.History {
			r.History = w.history(state, zero, scaler)
		}
		res.Steps = append(res.Steps, r)
	}
	return res, nil
}

// preloadedState is kube-controller-manager's memory before the first
// step: empty (nil) unless the scenario gives a history, in which case the
// first step is not the HPA's first reconcile.
func (w *world) preloadedState() *autoscaler.State {
	h := w.s.History
	if h == nil {
		return &autoscaler.State{}
	}
	st := &autoscaler.State{Recommendations: []autoscaler.Recommendation{}}
	for _, r := range h.Recommendations {
		st.Recommendations = append(st.Recommendations, autoscaler.Recommendation{Replicas: r.Replicas, Timestamp: w.start.Add(r.At.Duration)})
	}
	for _, e := range h.ScaleUpEvents {
		st.ScaleUpEvents = append(st.ScaleUpEvents, autoscaler.ScaleEvent{ReplicaChange: e.Change, Timestamp: w.start.Add(e.At.Duration)})
	}
	for _, e := range h.ScaleDownEvents {
		st.ScaleDownEvents = append(st.ScaleDownEvents, autoscaler.ScaleEvent{ReplicaChange: e.Change, Timestamp: w.start.Add(e.At.Duration)})
	}
	return st
}

// preloadedScaler is promscaler's coexistence state before the first step.
func (w *world) preloadedScaler() scaletozero.State {
	var z scaletozero.State
	if h := w.s.History; h != nil && h.Scaler != nil {
		z.Phase = scaletozero.Phase(h.Scaler.Phase)
		if h.Scaler.IdleSince != nil {
			z.IdleSince = w.start.Add(h.Scaler.IdleSince.Duration)
		}
		z.Failures = h.Scaler.Failures
	}
	return z
}

// scalerStep is promscaler's coexistence period after
// kube-controller-manager's reconcile of the same step: it reads the
// metrics the controller reads in that mode (scaletozero.ReadMetrics), lets
// pkg/scaletozero decide, and applies its /scale write.
func (w *world) scalerStep(spec scaletozero.Spec, z *scaletozero.State, keySpecs []autoscalingv2.MetricSpec, st *Step, now time.Time) *ScalerResult {
	in := scaletozero.Input{Now: now, Replicas: w.replicas, MinReplicas: 1, MaxReplicas: w.hpa.Spec.MaxReplicas}
	if m := w.hpa.Spec.MinReplicas; m != nil {
		in.MinReplicas = *m
	}
	pods := w.pods(st.At.Duration)
	scaletozero.ReadMetrics(w.hpa, spec, w.selector != "", &in, func(index int, m *autoscalingv2.MetricSpec) autoscaler.MetricValues {
		if index < 0 {
			index = len(keySpecs) - 1 // the explicit activation metric's values
		}
		return w.metricValues(index, *m, pods, now)
	})
	d := scaletozero.Decide(spec, *z, in)
	r := &ScalerResult{Phase: string(d.State.Phase), Failures: d.State.Failures, Action: string(d.Action), Reason: d.Reason}
	if d.Scale != nil {
		r.Scale = ptr.To(*d.Scale)
		if st.ScaleError != "" {
			// As the controller does (pkg/controller/coexist.go): a failed
			// write keeps the state, and the next period decides again from
			// what /scale then says.
			r.Error = st.ScaleError
			r.Phase, r.Failures = string(z.Phase), z.Failures
			return r
		}
		w.replicas = *d.Scale
		w.follow(st.At.Duration)
	}
	*z = d.State
	return r
}

// history is the controllers' memory after a step, times as offsets.
func (w *world) history(st *autoscaler.State, z scaletozero.State, scaler bool) *HistoryResult {
	off := func(t time.Time) string { return t.Sub(w.start).String() }
	h := &HistoryResult{Recommendations: []HistoryRecommendation{}}
	for _, r := range st.Recommendations {
		h.Recommendations = append(h.Recommendations, HistoryRecommendation{At: off(r.Timestamp), Replicas: r.Replicas})
	}
	events := func(es []autoscaler.ScaleEvent) []HistoryEvent {
		var out []HistoryEvent
		for _, e := range es {
			out = append(out, HistoryEvent{At: off(e.Timestamp), Change: e.ReplicaChange, Outdated: e.Outdated})
		}
		return out
	}
	h.ScaleUpEvents, h.ScaleDownEvents = events(st.ScaleUpEvents), events(st.ScaleDownEvents)
	if scaler {
		hs := &HistoryScaler{Phase: string(z.Phase), Failures: z.Failures}
		if !z.IdleSince.IsZero() {
			hs.IdleSince = off(z.IdleSince)
		}
		h.Scaler = hs
	}
	return h
}

func newWorld(s *Scenario) (*autoscaler.Autoscaler, *clocktesting.FakePassiveClock, *world, error) {
	start := DefaultStart
	if s.Start != nil {
		start = s.Start.UTC()
	}
	clk := clocktesting.NewFakePassiveClock(start)
	a, err := autoscaler.New(s.Config(), clk)
	if err != nil {
		return nil, nil, nil, err
	}
	hpa := s.HPA.DeepCopy()
	if hpa.Name == "" {
		hpa.Name = "scenario"
	}
	if hpa.Namespace == "" {
		hpa.Namespace = "default"
	}
	w := &world{s: s, start: start, hpa: hpa, replicas: *s.Target.Replicas, explicit: s.Pods, values: map[int]MetricValue{}}
	w.selector = "app=" + hpa.Spec.ScaleTargetRef.Name
	if s.Target.Selector != nil {
		w.selector = *s.Target.Selector
	}
	if t := s.PodTemplate; t != nil {
		n := w.replicas
		if t.Count != nil {
			n = *t.Count
		}
		for i := int32(0); i < n; i++ {
			w.gen = append(w.gen, genPod{name: w.genName(), initial: true})
		}
	}
	return a, clk, w, nil
}

func (w *world) genName() string {
	prefix := w.s.PodTemplate.NamePrefix
	if prefix == "" {
		prefix = w.hpa.Spec.ScaleTargetRef.Name
	}
	name := fmt.Sprintf("%s-%d", prefix, w.nextGen)
	w.nextGen++
	return name
}

// follow makes generated pods match the target's replicas (unless the
// template fixes the count): new pods are created at offset at, surplus
// pods (newest first) disappear.
func (w *world) follow(at time.Duration) {
	t := w.s.PodTemplate
	if t == nil || t.Count != nil {
		return
	}
	for int32(len(w.gen)) < w.replicas {
		w.gen = append(w.gen, genPod{name: w.genName(), created: at})
	}
	if int32(len(w.gen)) > w.replicas {
		w.gen = w.gen[:w.replicas]
	}
}

// pods returns the pods as the pod lister would at offset at.
func (w *world) pods(at time.Duration) []*v1.Pod {
	var out []*v1.Pod
	if t := w.s.PodTemplate; t != nil {
		for _, g := range w.gen {
			if g.initial {
				out = append(out, w.buildPod(g.name, &t.PodSpecFields))
				continue
			}
			f := t.PodSpecFields
			age := at - g.created
			readyAt := max(t.NewPods.PendingFor.Duration, t.NewPods.ReadyAfter.Duration)
			running := g.created + t.NewPods.PendingFor.Duration
			switch {
			case age < t.NewPods.PendingFor.Duration:
				f.Phase = v1.PodPending
				f.NoStartTime, f.StartTime = true, nil
				f.Ready = ptr.To(false)
				f.ReadySince = &Duration{g.created}
			case age < readyAt:
				f.Phase = v1.PodRunning
				f.NoStartTime, f.StartTime = false, &Duration{running}
				f.Ready = ptr.To(false)
				f.ReadySince = &Duration{running}
			default:
				f.Phase = v1.PodRunning
				f.NoStartTime, f.StartTime = false, &Duration{running}
				f.Ready = ptr.To(true)
				f.ReadySince = &Duration{g.created + readyAt}
			}
			f.DeletedAt = nil
			out = append(out, w.buildPod(g.name, &f))
		}
		return out
	}
	for i := range w.explicit {
		out = append(out, w.buildPod(w.explicit[i].Name, &w.explicit[i].PodSpecFields))
	}
	return out
}

var defaultPodAge = Duration{-time.Hour}

func (w *world) buildPod(name string, f *PodSpecFields) *v1.Pod {
	at := func(d Duration) metav1.Time { return metav1.NewTime(w.start.Add(d.Duration)) }
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.hpa.Namespace}}
	p.Status.Phase = f.Phase
	if p.Status.Phase == "" {
		p.Status.Phase = v1.PodRunning
	}
	start := defaultPodAge
	if f.StartTime != nil {
		start = *f.StartTime
	}
	if !f.NoStartTime {
		t := at(start)
		p.Status.StartTime = &t
	}
	ready := f.Ready == nil || *f.Ready
	since := start
	if f.ReadySince != nil {
		since = *f.ReadySince
	}
	status := v1.ConditionTrue
	if !ready {
		status = v1.ConditionFalse
	}
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: status, LastTransitionTime: at(since)}}
	if f.DeletedAt != nil {
		t := at(*f.DeletedAt)
		p.DeletionTimestamp = &t
	}
	conv := func(cs []Container) []v1.Container {
		var out []v1.Container
		for _, c := range cs {
			out = append(out, v1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy, Resources: v1.ResourceRequirements{Requests: c.Requests}})
		}
		return out
	}
	p.Spec.Containers = conv(f.Containers)
	p.Spec.InitContainers = conv(f.InitContainers)
	if f.Requests != nil {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: f.Requests}
	}
	p.Spec.Overhead = f.Overhead
	return p
}

// countLive is the default status.replicas: pods neither deleting nor
// terminated.
func countLive(pods []*v1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase != v1.PodFailed && p.Status.Phase != v1.PodSucceeded {
			n++
		}
	}
	return n
}

// metricValues builds what the metrics APIs would return for spec j at
// now, through the same conversion the controller uses.
func (w *world) metricValues(j int, spec autoscalingv2.MetricSpec, pods []*v1.Pod, now time.Time) autoscaler.MetricValues {
	mv, ok := w.values[j]
	var apiErr error
	if ok && mv.Error != "" {
		apiErr = errors.New(mv.Error)
	}
	ts := now
	switch {
	case mv.Age != nil:
		ts = now.Add(-mv.Age.Duration)
	case mv.Timestamp != nil:
		ts = w.start.Add(mv.Timestamp.Duration)
	}
	window := defaultWindow
	if mv.Window != nil {
		window = mv.Window.Duration
	}
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType:
		res, container := v1.ResourceCPU, ""
		if spec.Resource != nil {
			res = spec.Resource.Name
		}
		if spec.ContainerResource != nil {
			res, container = spec.ContainerResource.Name, spec.ContainerResource.Container
		}
		cname := container
		if cname == "" {
			cname = "main"
		}
		var items []metricsapi.PodMetrics
		for _, name := range w.sampleNames(mv, pods) {
			q := mv.valueFor(name)
			items = append(items, metricsapi.PodMetrics{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.hpa.Namespace},
				Timestamp:  metav1.NewTime(ts),
				Window:     metav1.Duration{Duration: window},
				Containers: []metricsapi.ContainerMetrics{{Name: cname, Usage: v1.ResourceList{res: q}}},
			})
		}
		return autoscaler.FromPodMetrics(items, apiErr, res, container)
	case autoscalingv2.PodsMetricSourceType:
		secs := int64(window / time.Second)
		var items []customapi.MetricValue
		for _, name := range w.sampleNames(mv, pods) {
			items = append(items, customapi.MetricValue{
				DescribedObject: v1.ObjectReference{Kind: "Pod", Name: name, Namespace: w.hpa.Namespace},
				Timestamp:       metav1.NewTime(ts),
				WindowSeconds:   &secs,
				Value:           mv.valueFor(name),
			})
		}
		return autoscaler.FromPodsCustomMetrics(items, apiErr)
	case autoscalingv2.ObjectMetricSourceType:
		if apiErr == nil && mv.Value == nil {
			apiErr = errors.New("the scenario gives no value for this metric yet")
		}
		if apiErr != nil {
			return autoscaler.FromObjectCustomMetric(nil, apiErr)
		}
		return autoscaler.FromObjectCustomMetric(&customapi.MetricValue{Timestamp: metav1.NewTime(ts), Value: *mv.Value}, nil)
	case autoscalingv2.ExternalMetricSourceType:
		var items []externalapi.ExternalMetricValue
		series := mv.Series
		if mv.Value != nil {
			series = append(series, *mv.Value)
		}
		if q, isSchedule := w.scheduleValue(spec, now); !ok && isSchedule {
			series = []resource.Quantity{q}
		}
		for _, q := range series {
			items = append(items, externalapi.ExternalMetricValue{Timestamp: metav1.NewTime(ts), Value: q})
		}
		return autoscaler.FromExternalMetrics(items, apiErr)
	}
	return autoscaler.MetricValues{Err: fmt.Errorf("unsupported metric type %q", spec.Type)}
}

// sampleNames lists the pods with a sample: those in perPod (existing or
// not), and with allPods every Running pod not missing.
func (w *world) sampleNames(mv MetricValue, pods []*v1.Pod) []string {
	missing := map[string]bool{}
	for _, n := range mv.Missing {
		missing[n] = true
	}
	seen := map[string]bool{}
	var names []string
	for _, p := range pods {
		_, listed := mv.PerPod[p.Name]
		if missing[p.Name] || (!listed && (mv.AllPods == nil || p.Status.Phase != v1.PodRunning)) {
			continue
		}
		names = append(names, p.Name)
		seen[p.Name] = true
	}
	var extra []string
	for n := range mv.PerPod {
		if !seen[n] && !missing[n] {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	return append(names, extra...)
}

func (mv MetricValue) valueFor(name string) resource.Quantity {
	if q, ok := mv.PerPod[name]; ok {
		return q
	}
	return *mv.AllPods
}
