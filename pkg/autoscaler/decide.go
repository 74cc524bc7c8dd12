package autoscaler

import (
	"errors"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
)

// Autoscaler makes HPA decisions. It is safe for concurrent use as long as
// each State is used by one goroutine at a time.
type Autoscaler struct {
	cfg   Config
	clock clock.PassiveClock
}

// New returns an Autoscaler with the given settings, reading time from clk.
func New(cfg Config, clk clock.PassiveClock) (*Autoscaler, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid autoscaler config: %w", errors.Join(errs...))
	}
	if clk == nil {
		return nil, errors.New("invalid autoscaler config: a clock is required")
	}
	return &Autoscaler{cfg: cfg, clock: clk}, nil
}

// Config returns the settings the Autoscaler was built with.
func (a *Autoscaler) Config() Config { return a.cfg }

// Tolerances returns the tolerances for hpa: the global tolerance,
// overridden per direction by behavior.scaleUp/scaleDown.tolerance
// (KEP-4951, GA in 1.37).
func (a *Autoscaler) Tolerances(hpa *autoscalingv2.HorizontalPodAutoscaler) Tolerances {
	t := Tolerances{ScaleDown: a.cfg.Tolerance, ScaleUp: a.cfg.Tolerance}
	b := hpa.Spec.Behavior
	if b == nil {
		return t
	}
	if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
		t.ScaleDown = b.ScaleDown.Tolerance.AsApproximateFloat64()
	}
	if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
		t.ScaleUp = b.ScaleUp.Tolerance.AsApproximateFloat64()
	}
	return t
}

// NeedsMetrics reports whether Decide will evaluate the metrics for hpa
// when the target's spec.replicas is specReplicas; when false the caller
// need not fetch any (current count out of [min, max], or scaling disabled
// at zero replicas).
func (a *Autoscaler) NeedsMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler, specReplicas int32) bool {
	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	if specReplicas == 0 {
		needs, _ := a.zeroReplicas(hpa, minReplicas)
		return needs
	}
	return specReplicas <= hpa.Spec.MaxReplicas && specReplicas >= minReplicas
}

// zeroReplicas is shouldComputeMetricsForZeroReplicas.
func (a *Autoscaler) zeroReplicas(hpa *autoscalingv2.HorizontalPodAutoscaler, minReplicas int32) (needsMetrics, scaledToZero bool) {
	scaledToZero = a.cfg.Features.ScaleToZero && scaledToZeroCondition(hpa)
	canScaleFromZero := scaledToZero && HasObjectOrExternal(hpa.Spec.Metrics)
	return (minReplicas != 0 && scaledToZero) || canScaleFromZero, scaledToZero
}

// pendingRescale is what FinishRescale needs to complete a decision.
type pendingRescale struct {
	hpa            *autoscalingv2.HorizontalPodAutoscaler
	minReplicas    int32
	hasObjectOrExt bool
	statuses       []autoscalingv2.MetricStatus
	reference      string
	done           bool
}

// Decide runs one reconcile of in.HPA: upstream's reconcileAutoscaler from
// the point the target's scale was read, without the /scale update. It
// records the unstabilized recommendation in state. When the decision is
// to rescale, the caller updates /scale and then calls FinishRescale.
func (a *Autoscaler) Decide(state *State, in Input) Decision {
	if in.HPA == nil {
		return Decision{MetricReplicas: -1, StabilizedReplicas: -1, Err: errors.New("autoscaler: Decide called without an HPA")}
	}
	if state == nil {
		state = &State{}
	}
	now := a.clock.Now()
	hpa := workingCopy(in.HPA)
	current := in.SpecReplicas
	reference := fmt.Sprintf("%s/%s/%s", hpa.Spec.ScaleTargetRef.Kind, hpa.Namespace, hpa.Spec.ScaleTargetRef.Name)
	d := Decision{CurrentReplicas: current, MetricReplicas: -1, StabilizedReplicas: -1}

	a.setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	if state.Recommendations == nil {
		// Upstream stamps this first recommendation with an earlier
		// time.Now() than the one normalization compares against, so it
		// is strictly older than "now": with a zero stabilization window
		// it already counts as expired. One nanosecond keeps that order.
		state.Recommendations = []Recommendation{{Replicas: current, Timestamp: now.Add(-time.Nanosecond)}}
	}

	minReplicas := *hpa.Spec.MinReplicas
	hasObjectOrExt := HasObjectOrExternal(hpa.Spec.Metrics)
	var (
		desired        int32
		reason         string
		rescale        = true
		needsMetrics   = true
		scaledToZero   bool
		metricStatuses []autoscalingv2.MetricStatus
	)
	switch {
	case current == 0:
		var needs bool
		needs, scaledToZero = a.zeroReplicas(hpa, minReplicas)
		if !needs {
			needsMetrics, rescale = false, false
			a.setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
			if !a.cfg.Features.ScaleToZero {
				removeCondition(hpa, autoscalingv2.ScaledToZero)
			}
		}
	case current > hpa.Spec.MaxReplicas:
		reason = "Current number of replicas above Spec.MaxReplicas"
		desired = hpa.Spec.MaxReplicas
		needsMetrics = false
	case current < minReplicas:
		reason = "Current number of replicas below Spec.MinReplicas"
		desired = minReplicas
		needsMetrics = false
	}

	if needsMetrics {
		d.MetricsComputed = true
		metricDesired, metricName, statuses, err := a.computeReplicasForMetrics(hpa, in, &d)
		metricStatuses = statuses
		if err != nil && metricDesired == -1 {
			a.setStatus(hpa, current, hpa.Status.DesiredReplicas, metricStatuses, false, now)
			d.Events = append(d.Events, Event{Type: v1.EventTypeWarning, Reason: "FailedComputeMetricsReplicas", Message: err.Error()})
			d.Err = fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", reference, err)
			d.DesiredReplicas = hpa.Status.DesiredReplicas
			d.Status = hpa.Status
			return d
		}
		d.Err = err
		d.MetricReplicas, d.Metric = metricDesired, metricName

		rescaleMetric := ""
		if metricDesired > desired {
			desired = metricDesired
			rescaleMetric = metricName
		}
		if desired > current {
			reason = fmt.Sprintf("%s above target", rescaleMetric)
		}
		if desired < current {
			reason = "All metrics below target"
		}
		var n Normalization
		if hpa.Spec.Behavior == nil {
			desired, n = a.normalize(state, hpa, now, current, desired, minReplicas)
		} else {
			desired, n = a.normalizeWithBehavior(state, hpa, now, current, desired, minReplicas)
		}
		d.StabilizedReplicas, d.Normalization = n.Stabilized, &n
		if current == 0 && minReplicas != 0 && scaledToZero && desired < minReplicas {
			desired = minReplicas
			if reason == "" {
				reason = "Current number of replicas below Spec.MinReplicas"
			}
		}
		rescale = desired != current
	}

	d.Reason = reason
	if rescale {
		d.Rescale = true
		d.DesiredReplicas = desired
		d.Status = hpa.Status
		d.pending = &pendingRescale{
			hpa:            hpa,
			minReplicas:    minReplicas,
			hasObjectOrExt: hasObjectOrExt,
			statuses:       metricStatuses,
			reference:      reference,
		}
		return d
	}
	d.DesiredReplicas = current
	a.setStatus(hpa, current, current, metricStatuses, false, now)
	d.Status = hpa.Status
	return d
}

// workingCopy returns a copy of hpa that Decide may modify: the status and
// behavior are copied deeply, the rest (read-only here) is shared; then the
// API server defaults are applied to it.
func workingCopy(in *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	hpa := *in
	in.Status.DeepCopyInto(&hpa.Status)
	if in.Spec.Behavior != nil {
		b := *in.Spec.Behavior
		hpa.Spec.Behavior = &b
	}
	ApplyDefaults(&hpa)
	return &hpa
}

// FinishRescale completes a decision with Rescale set, once the caller has
// tried to update /scale: scaleErr is that update's error (nil on success).
// On success it records the scale event in state, sets AbleToScale
// SucceededRescale, the ScaledToZero condition and lastScaleTime, and adds
// the SuccessfulRescale event; on failure it sets AbleToScale
// FailedUpdateScale, adds FailedRescale and sets d.Err. Calling it for a
// decision without Rescale, or twice, does nothing.
func (a *Autoscaler) FinishRescale(state *State, d *Decision, scaleErr error) {
	p := d.pending
	if p == nil || p.done {
		return
	}
	p.done = true
	if state == nil {
		state = &State{}
	}
	now := a.clock.Now()
	hpa := p.hpa
	hpa.Status = d.Status
	current, desired := d.CurrentReplicas, d.DesiredReplicas
	if scaleErr != nil {
		d.Events = append(d.Events, Event{Type: v1.EventTypeWarning, Reason: "FailedRescale",
			Message: fmt.Sprintf("New size: %d; reason: %s; error: %v", desired, d.Reason, scaleErr.Error())})
		a.setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", scaleErr)
		a.setStatus(hpa, current, hpa.Status.DesiredReplicas, p.statuses, false, now)
		d.Status = hpa.Status
		d.Err = fmt.Errorf("failed to rescale %s: %w", p.reference, scaleErr)
		return
	}
	a.setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired)
	d.Events = append(d.Events, Event{Type: v1.EventTypeNormal, Reason: "SuccessfulRescale",
		Message: fmt.Sprintf("New size: %d; reason: %s", desired, d.Reason)})
	state.storeScaleEvent(now, hpa.Spec.Behavior, current, desired)
	if a.cfg.Features.ScaleToZero {
		if current > 0 && desired == 0 && p.minReplicas == 0 && p.hasObjectOrExt {
			a.setCondition(hpa, autoscalingv2.ScaledToZero, v1.ConditionTrue, "ScaledToZero", "the HPA controller scaled the workload to zero")
		} else {
			a.setCondition(hpa, autoscalingv2.ScaledToZero, v1.ConditionFalse, "NotScaledToZero", "the HPA controller did not scale the workload to zero")
		}
	} else {
		removeCondition(hpa, autoscalingv2.ScaledToZero)
	}
	a.setStatus(hpa, current, desired, p.statuses, true, now)
	d.Status = hpa.Status
}

// FailedGetScale is the decision when the target's /scale (or its REST
// mapping, or its API version) could not be read: AbleToScale=False
// FailedGetScale and a FailedGetScale event; the rest of the status is kept.
func (a *Autoscaler) FailedGetScale(hpa *autoscalingv2.HorizontalPodAutoscaler, err error) Decision {
	h := hpa.DeepCopy()
	a.setCondition(h, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
	return Decision{
		CurrentReplicas:    h.Status.CurrentReplicas,
		MetricReplicas:     -1,
		StabilizedReplicas: -1,
		DesiredReplicas:    h.Status.DesiredReplicas,
		Status:             h.Status,
		Events:             []Event{{Type: v1.EventTypeWarning, Reason: "FailedGetScale", Message: err.Error()}},
		Err:                err,
	}
}

// computeReplicasForMetrics evaluates every metric and combines them: the
// highest valid proposal wins; when every metric failed, or some failed and
// the rest propose a scale-down, there is no proposal (-1).
func (a *Autoscaler) computeReplicasForMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler, in Input, d *Decision) (int32, string, []autoscalingv2.MetricStatus, error) {
	if err := a.validateSelector(hpa, in, d); err != nil {
		return -1, "", nil, err
	}
	specs := hpa.Spec.Metrics
	statuses := make([]autoscalingv2.MetricStatus, len(specs))
	d.Metrics = make([]MetricResult, len(specs))
	env := calcEnv{
		now:            a.clock.Now(),
		cpuInit:        a.cfg.CPUInitializationPeriod,
		readinessDelay: a.cfg.InitialReadinessDelay,
		podLevel:       a.cfg.Features.PodLevelResources,
		tolerances:     a.Tolerances(hpa),
		pods:           in.Pods,
	}
	var (
		replicas      int32
		metric        string
		invalidCount  int
		firstErr      error
		firstCondType *autoscalingv2.HorizontalPodAutoscalerCondition
	)
	for i, spec := range specs {
		mi := metricInput{hpa: hpa, env: &env, specReplicas: in.SpecReplicas, statusReplicas: in.StatusReplicas}
		if i < len(in.Metrics) {
			mi.values = in.Metrics[i]
		} else {
			mi.values = MetricValues{Err: fmt.Errorf("no values supplied for metrics[%d]", i)}
		}
		res, ev := evaluateMetric(&mi, spec)
		d.Metrics[i] = res
		if ev != nil {
			d.Events = append(d.Events, *ev)
		}
		if res.Err != nil {
			if invalidCount <= 0 {
				firstCondType = res.Condition
				firstErr = res.Err
			}
			invalidCount++
			continue
		}
		statuses[i] = res.Status
		if replicas == 0 || res.Replicas > replicas {
			replicas = res.Replicas
			metric = res.Name
		}
	}
	var err error
	if firstErr != nil {
		err = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %w", invalidCount, len(specs), firstErr)
	}
	if invalidCount >= len(specs) || (invalidCount > 0 && replicas < in.SpecReplicas) {
		var c autoscalingv2.HorizontalPodAutoscalerCondition
		if firstCondType != nil {
			c = *firstCondType
		}
		a.setCondition(hpa, c.Type, c.Status, c.Reason, "%s", c.Message)
		return -1, "", statuses, err
	}
	a.setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", metric)
	return replicas, metric, statuses, err
}

// validateSelector is the pure part of validateAndParseSelector.
func (a *Autoscaler) validateSelector(hpa *autoscalingv2.HorizontalPodAutoscaler, in Input, d *Decision) error {
	if in.Selector == "" {
		msg := "selector is required"
		d.Events = append(d.Events, Event{Type: v1.EventTypeWarning, Reason: "SelectorRequired", Message: msg})
		a.setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return errors.New(msg)
	}
	if _, err := labels.Parse(in.Selector); err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		d.Events = append(d.Events, Event{Type: v1.EventTypeWarning, Reason: "InvalidSelector", Message: msg})
		a.setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "InvalidSelector", "%s", msg)
		return errors.New(msg)
	}
	if len(in.SelectingHPAs) > 1 {
		msg := fmt.Sprintf("pods by selector %v are controlled by more than one HPA (e.g. %v)", in.Selector, in.SelectingHPAs)
		d.Events = append(d.Events, Event{Type: v1.EventTypeWarning, Reason: "AmbiguousSelector", Message: msg})
		a.setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "AmbiguousSelector", "%s", msg)
		return errors.New(msg)
	}
	return nil
}

// normalize is normalizeDesiredReplicas (no behavior).
func (a *Autoscaler) normalize(state *State, hpa *autoscalingv2.HorizontalPodAutoscaler, now time.Time, current, desired, minReplicas int32) (int32, Normalization) {
	stabilized := state.stabilize(now, a.cfg.DownscaleStabilizationWindow, desired)
	if stabilized != desired {
		a.setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ScaleDownStabilized", msgDownStabilzed)
	} else {
		a.setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ReadyForNewScale", msgReadyForScale)
	}
	l := convertWithRules(current, stabilized, minReplicas, hpa.Spec.MaxReplicas)
	a.setLimited(hpa, l, stabilized)
	return l.replicas, Normalization{
		Stabilized:      stabilized,
		ScaleDownWindow: a.cfg.DownscaleStabilizationWindow,
		ScaleUpLimit:    scaleUpLimitWithoutBehavior(current),
		ScaleDownLimit:  -1,
		LimitReason:     l.reason,
	}
}

// normalizeWithBehavior is normalizeDesiredReplicasWithBehaviors.
func (a *Autoscaler) normalizeWithBehavior(state *State, hpa *autoscalingv2.HorizontalPodAutoscaler, now time.Time, current, desired, minReplicas int32) (int32, Normalization) {
	b := hpa.Spec.Behavior
	if b.ScaleDown.StabilizationWindowSeconds == nil {
		w := int32(a.cfg.DownscaleStabilizationWindow.Seconds())
		b.ScaleDown.StabilizationWindowSeconds = &w
	}
	// The rate limits in both directions, from the history before this
	// reconcile (only the one of the change's direction applies).
	n := Normalization{
		Behavior:        true,
		ScaleUpWindow:   time.Duration(*b.ScaleUp.StabilizationWindowSeconds) * time.Second,
		ScaleDownWindow: time.Duration(*b.ScaleDown.StabilizationWindowSeconds) * time.Second,
		ScaleUpLimit:    max(scaleLimit(now, current, state.ScaleUpEvents, state.ScaleDownEvents, b.ScaleUp, true), current),
		ScaleDownLimit:  min(scaleLimit(now, current, state.ScaleUpEvents, state.ScaleDownEvents, b.ScaleDown, false), current),
	}
	stabilized, reason, message := state.stabilizeWithBehavior(now, b, current, desired)
	if stabilized != desired {
		a.setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, reason, "%s", message)
	} else {
		a.setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ReadyForNewScale", msgReadyForScale)
	}
	l := state.convertWithBehaviorRate(now, b, current, stabilized, minReplicas, hpa.Spec.MaxReplicas)
	a.setLimited(hpa, l, stabilized)
	n.Stabilized, n.LimitReason = stabilized, l.reason
	return l.replicas, n
}

func (a *Autoscaler) setLimited(hpa *autoscalingv2.HorizontalPodAutoscaler, l limit, stabilized int32) {
	status := v1.ConditionTrue
	if l.replicas == stabilized {
		status = v1.ConditionFalse
	}
	a.setCondition(hpa, autoscalingv2.ScalingLimited, status, l.reason, "%s", l.message)
}

// setStatus is upstream's setStatus: the status is rebuilt, keeping only
// lastScaleTime (renewed on a rescale) and the conditions.
func (a *Autoscaler) setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired int32, statuses []autoscalingv2.MetricStatus, rescale bool, now time.Time) {
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: current,
		DesiredReplicas: desired,
		LastScaleTime:   hpa.Status.LastScaleTime,
		CurrentMetrics:  statuses,
		Conditions:      hpa.Status.Conditions,
	}
	if a.cfg.Features.ObservedGeneration {
		gen := hpa.Generation
		hpa.Status.ObservedGeneration = &gen
	}
	if rescale {
		t := metav1.NewTime(now)
		hpa.Status.LastScaleTime = &t
	}
}

// StatusChanged reports whether newStatus differs from oldStatus in a way
// worth an UpdateStatus call (semantic equality, as upstream's
// updateStatusIfNeeded).
func StatusChanged(oldStatus, newStatus *autoscalingv2.HorizontalPodAutoscalerStatus) bool {
	return !apiequality.Semantic.DeepEqual(oldStatus, newStatus)
}

// HasObjectOrExternal reports whether metrics hold an Object or External
// metric, without which an HPA cannot scale from zero (minReplicas 0).
func HasObjectOrExternal(metrics []autoscalingv2.MetricSpec) bool {
	for _, m := range metrics {
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}

func scaledToZeroCondition(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, c := range hpa.Status.Conditions {
		if c.Type == autoscalingv2.ScaledToZero {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
