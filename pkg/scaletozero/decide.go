// Package scaletozero decides what promscaler's autoscaler does beside
// kube-controller-manager's HPA controller for one annotated HPA: take an
// idle target to zero replicas, wake it to minReplicas when its activation
// metric rises above a threshold, and hold fallback replicas while the
// HPA's metrics cannot be read. Everything here is a pure function of
// plain values and the time given in the Input: the controller
// (pkg/controller) does the reading and writing, and `autoscaler simulate`
// replays the same decisions offline.
package scaletozero

import (
	"fmt"
	"time"
)

// Spec is what an HPA's annotations ask for (see Parse). A nil part is
// off.
type Spec struct {
	// Activation, when set, enables scale to zero and back.
	Activation *Activation
	// Fallback, when set, holds a replica count while metrics fail.
	Fallback *Fallback
	// Pause, when set, holds the target or one direction of scaling.
	Pause *Pause
}

// Activation configures scale to zero and back.
type Activation struct {
	// Metric is the metric that decides activation (an External or Object
	// metric: it must be readable while the target has no pods).
	Metric MetricRef
	// ThresholdMilli is the activation threshold in milli-units: the
	// target is active while the metric is above it.
	ThresholdMilli int64
	// IdlePeriod is how long the target must sit at minReplicas with the
	// metric at or below the threshold before it is taken to zero.
	IdlePeriod time.Duration
}

// Fallback configures the replicas held while metrics fail.
type Fallback struct {
	// Replicas is the count of the static behaviour, and the bound of the
	// IfHigher and IfLower ones.
	Replicas int32
	// After is the number of consecutive failed periods that trigger it.
	After int32
	// Behavior chooses the count from Replicas and the current replicas.
	Behavior FallbackBehavior
	// On says which periods fail.
	On FallbackOn
}

// FallbackBehavior is how the fallback count is chosen (KEDA's names and
// meanings).
type FallbackBehavior string

// Fallback behaviours.
const (
	// FallbackStatic sets Replicas.
	FallbackStatic FallbackBehavior = "static"
	// FallbackCurrentReplicas keeps the current replicas (no write).
	FallbackCurrentReplicas FallbackBehavior = "currentReplicas"
	// FallbackCurrentReplicasIfHigher keeps the current replicas when they
	// are above Replicas, else sets Replicas.
	FallbackCurrentReplicasIfHigher FallbackBehavior = "currentReplicasIfHigher"
	// FallbackCurrentReplicasIfLower keeps the current replicas when they
	// are below Replicas, else sets Replicas.
	FallbackCurrentReplicasIfLower FallbackBehavior = "currentReplicasIfLower"
)

var fallbackBehaviors = []FallbackBehavior{FallbackStatic, FallbackCurrentReplicas, FallbackCurrentReplicasIfHigher, FallbackCurrentReplicasIfLower}

// FallbackOn says which periods count as failed.
type FallbackOn string

// Values of FallbackOn.
const (
	// FallbackOnAll: a period fails when every metric read failed.
	FallbackOnAll FallbackOn = "all"
	// FallbackOnAny: a period fails when any of the HPA's own metrics
	// failed. While some still read, the fallback only raises the
	// replicas (kube-controller-manager cannot scale down while a metric
	// fails, and scales up on the readable ones).
	FallbackOnAny FallbackOn = "any"
)

// target is the fallback count for a target at current replicas; partial
// reports that some of the HPA's metrics still read.
func (f *Fallback) target(current int32, partial bool) int32 {
	t := f.Replicas
	switch f.Behavior {
	case FallbackCurrentReplicas:
		t = current
	case FallbackCurrentReplicasIfHigher:
		t = max(current, f.Replicas)
	case FallbackCurrentReplicasIfLower:
		t = min(current, f.Replicas)
	}
	if partial {
		t = max(current, t)
	}
	return t
}

// Pause is what the pause annotations hold back. Beside
// kube-controller-manager it takes the promscaler-pause
// ValidatingAdmissionPolicy (deploy/components/autoscaler-pause) to keep
// kube-controller-manager's own /scale writes back as well.
type Pause struct {
	// Hold stops every scaling (paused, or paused-replicas).
	Hold bool
	// Replicas, when set, is the count the target is held at.
	Replicas *int32
	// ScaleIn and ScaleOut stop one direction.
	ScaleIn, ScaleOut bool
}

// Blocks reports whether the pause stops a change from one count to
// another.
func (p *Pause) Blocks(from, to int32) bool {
	return p != nil && (to < from && p.ScaleIn || to > from && p.ScaleOut)
}

// String says what is paused, for the status and explain.
func (p *Pause) String() string {
	switch {
	case p == nil:
		return ""
	case p.Replicas != nil:
		return fmt.Sprintf("replicas %d", *p.Replicas)
	case p.Hold || p.ScaleIn && p.ScaleOut:
		return "all"
	case p.ScaleIn:
		return "scale-in"
	}
	return "scale-out"
}

// Phase is where an HPA stands.
type Phase string

// Phases.
const (
	// PhaseActive: kube-controller-manager scales the target as usual.
	PhaseActive Phase = "Active"
	// PhaseIdle: at minReplicas with the activation metric at or below the
	// threshold, counting down the idle period.
	PhaseIdle Phase = "Idle"
	// PhaseScaledToZero: the target has no replicas; the activation metric
	// is watched.
	PhaseScaledToZero Phase = "ScaledToZero"
	// PhaseFallback: metrics failed; the fallback replicas are held.
	PhaseFallback Phase = "Fallback"
	// PhasePaused: paused or paused-replicas holds the target.
	PhasePaused Phase = "Paused"
)

// Action is what a decision did.
type Action string

// Actions; each is recorded as an event reason.
const (
	ActionNone        Action = ""
	ActionScaleToZero Action = "ScaledToZero"
	ActionActivate    Action = "Activated"
	ActionFallback    Action = "FallbackApplied"
	ActionRecover     Action = "FallbackEnded"
	ActionPause       Action = "Paused"
	ActionUnpause     Action = "PauseEnded"
)

// State is what Decide needs from one period to the next. The zero value
// is an HPA never seen before. The caller keeps one per HPA.
type State struct {
	Phase Phase
	// IdleSince is when the target was first seen idle (zero: not idle).
	IdleSince time.Time
	// Failures counts consecutive periods whose metric reads all failed.
	Failures int32
}

// Input is one period's observation.
type Input struct {
	// Now is the decision time.
	Now time.Time
	// Replicas is the target's /scale spec.replicas.
	Replicas int32
	// MinReplicas and MaxReplicas are the HPA's (MinReplicas defaulted to 1).
	MinReplicas, MaxReplicas int32
	// ActivationMilli is the activation metric's value in milli-units,
	// valid when ActivationErr is nil (ignored without an Activation).
	ActivationMilli int64
	ActivationErr   error
	// MetricsFailed reports that every metric read this period failed (the
	// HPA's own metrics and the activation metric): kube-controller-manager
	// then leaves the replicas unchanged, so a fallback cannot fight it.
	MetricsFailed bool
	// SomeFailed reports that at least one of the HPA's own metrics read
	// this period failed (it counts with FallbackOnAny).
	SomeFailed bool
}

// Decision is the outcome of one period.
type Decision struct {
	// State is the state to keep for the next period.
	State State
	// Scale, when set, is the replica count to write to the target's /scale.
	Scale *int32
	// Action is what happened (ActionNone: nothing to report).
	Action Action
	// Reason explains the action, or the phase when there is none.
	Reason string
}

// Decide takes one period's decision. It never scales a target that
// kube-controller-manager is scaling: it writes 0 only at minReplicas,
// minReplicas only at 0, and the fallback once, when N consecutive periods
// found no metric readable.
func Decide(spec Spec, st State, in Input) Decision {
	p := spec.Pause
	switch {
	case p != nil && p.Hold:
		return decidePaused(p, st, in)
	case st.Phase == PhasePaused:
		d := Decision{State: State{Phase: PhaseActive}, Action: ActionUnpause,
			Reason: fmt.Sprintf("the pause annotations are gone: the HPA scales from %d replicas", in.Replicas)}
		if in.Replicas == 0 {
			d.State.Phase = PhaseScaledToZero
		}
		return d
	}
	d := decide(spec, st, in)
	if d.Scale != nil && p.Blocks(in.Replicas, *d.Scale) {
		held := Decision{State: st, Reason: fmt.Sprintf("%s to %d replicas held back: %s", d.Action, *d.Scale, pauseAnnotation(p, in.Replicas, *d.Scale))}
		held.State.Failures = d.State.Failures
		switch {
		case in.Replicas == 0:
			held.State.Phase = PhaseScaledToZero
		case held.State.Phase == "" || held.State.Phase == PhaseScaledToZero:
			held.State.Phase = PhaseActive
		}
		return held
	}
	return d
}

// decide is one period's decision without a pause.
func decide(spec Spec, st State, in Input) Decision {
	d := Decision{State: st}
	if in.MetricsFailed || in.SomeFailed && spec.Fallback != nil && spec.Fallback.On == FallbackOnAny {
		return decideFailed(spec, st, in)
	}
	d.State.Failures = 0
	if st.Phase == PhaseFallback {
		d.State.Phase, d.State.IdleSince = PhaseActive, time.Time{}
		d.Action = ActionRecover
		d.Reason = fmt.Sprintf("metrics are readable again after %d failed periods; the HPA scales from %d replicas", st.Failures, in.Replicas)
		return d
	}
	a := spec.Activation
	if a == nil {
		d.State.Phase, d.State.IdleSince = PhaseActive, time.Time{}
		d.Reason = "no activation metric: scale to zero is off"
		return d
	}
	if in.ActivationErr != nil {
		// Unknown: never wake or idle on a value not read.
		d.State.IdleSince = time.Time{}
		if in.Replicas == 0 {
			d.State.Phase = PhaseScaledToZero
		} else {
			d.State.Phase = PhaseActive
		}
		d.Reason = fmt.Sprintf("activation metric %s unreadable: %v", a.Metric, in.ActivationErr)
		return d
	}
	value := formatMilli(in.ActivationMilli)
	threshold := formatMilli(a.ThresholdMilli)
	above := in.ActivationMilli > a.ThresholdMilli
	switch {
	case in.Replicas == 0 && above:
		d.State.Phase, d.State.IdleSince = PhaseActive, time.Time{}
		d.Scale = ref(in.MinReplicas)
		d.Action = ActionActivate
		d.Reason = fmt.Sprintf("activation metric %s is %s, above the threshold %s: scaled from 0 to minReplicas %d", a.Metric, value, threshold, in.MinReplicas)
	case in.Replicas == 0:
		d.State.Phase, d.State.IdleSince = PhaseScaledToZero, time.Time{}
		d.Reason = fmt.Sprintf("activation metric %s is %s, at or below the threshold %s", a.Metric, value, threshold)
	case above || in.Replicas != in.MinReplicas:
		d.State.Phase, d.State.IdleSince = PhaseActive, time.Time{}
		d.Reason = fmt.Sprintf("%d replicas (minReplicas %d), activation metric %s is %s (threshold %s)", in.Replicas, in.MinReplicas, a.Metric, value, threshold)
	default:
		if st.IdleSince.IsZero() || st.Phase != PhaseIdle {
			d.State.IdleSince = in.Now
		}
		d.State.Phase = PhaseIdle
		idle := in.Now.Sub(d.State.IdleSince)
		if idle < a.IdlePeriod {
			d.Reason = fmt.Sprintf("activation metric %s is %s, at or below the threshold %s at minReplicas for %v of %v", a.Metric, value, threshold, idle.Round(100*time.Millisecond), a.IdlePeriod)
			return d
		}
		d.State.Phase, d.State.IdleSince = PhaseScaledToZero, time.Time{}
		d.Scale = ref(int32(0))
		d.Action = ActionScaleToZero
		d.Reason = fmt.Sprintf("activation metric %s is %s, at or below the threshold %s at minReplicas %d for %v: scaled to 0", a.Metric, value, threshold, in.MinReplicas, idle.Round(100*time.Millisecond))
	}
	return d
}

// decidePaused holds the target: at the paused replicas (written
// whenever /scale differs), or where it is.
func decidePaused(p *Pause, st State, in Input) Decision {
	d := Decision{State: State{Phase: PhasePaused}}
	if st.Phase != PhasePaused {
		d.Action = ActionPause
	}
	if p.Replicas == nil {
		d.Reason = fmt.Sprintf("%s: held at %d replicas", AnnotationPaused, in.Replicas)
		return d
	}
	if in.Replicas == *p.Replicas {
		d.Reason = fmt.Sprintf("%s: held at %d replicas", AnnotationPausedReplicas, *p.Replicas)
		return d
	}
	d.Scale = ref(*p.Replicas)
	d.Action = ActionPause
	d.Reason = fmt.Sprintf("%s: scaled from %d to %d replicas", AnnotationPausedReplicas, in.Replicas, *p.Replicas)
	return d
}

// pauseAnnotation names the annotation that blocks a change.
func pauseAnnotation(p *Pause, from, to int32) string {
	if to < from {
		if p.Hold {
			return AnnotationPaused
		}
		return AnnotationPausedScaleIn
	}
	if p.Hold {
		return AnnotationPaused
	}
	return AnnotationPausedScaleOut
}

// decideFailed is a period whose metric reads all failed.
func decideFailed(spec Spec, st State, in Input) Decision {
	d := Decision{State: st}
	d.State.Failures++
	d.State.IdleSince = time.Time{}
	f := spec.Fallback
	if f == nil || d.State.Failures < f.After {
		if st.Phase == PhaseIdle {
			d.State.Phase = PhaseActive
		}
		if f == nil {
			d.Reason = fmt.Sprintf("metrics unreadable for %d periods; no fallback configured", d.State.Failures)
		} else {
			d.Reason = fmt.Sprintf("metrics unreadable for %d of %d periods before the fallback", d.State.Failures, f.After)
		}
		return d
	}
	d.State.Phase = PhaseFallback
	target := f.target(in.Replicas, !in.MetricsFailed)
	if st.Phase == PhaseFallback {
		// Applied once, on entering: if the replicas moved since, someone
		// (kube-controller-manager, reading a metric after all) chose them;
		// writing again would fight it.
		d.Reason = fmt.Sprintf("metrics unreadable for %d consecutive periods: fallback (%s) applied when it began", d.State.Failures, f.Behavior)
		return d
	}
	d.Action = ActionFallback
	d.Reason = fmt.Sprintf("metrics unreadable for %d consecutive periods: holding %d replicas (fallback %s)", d.State.Failures, target, f.Behavior)
	if in.Replicas != target {
		d.Scale = ref(target)
		d.Reason = fmt.Sprintf("metrics unreadable for %d consecutive periods: scaled from %d to %d replicas (fallback %s)", d.State.Failures, in.Replicas, target, f.Behavior)
	}
	return d
}

// formatMilli prints a milli-unit value as a plain decimal.
func formatMilli(m int64) string {
	if m%1000 == 0 {
		return fmt.Sprintf("%d", m/1000)
	}
	return fmt.Sprintf("%g", float64(m)/1000)
}

func ref[T any](v T) *T { return &v }
