package scaletozero

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	activation := &Activation{Metric: MetricRef{HPAIndex: -1}, ThresholdMilli: 5000, IdlePeriod: time.Minute}
	fallback := &Fallback{Replicas: 4, After: 3, Behavior: FallbackStatic, On: FallbackOnAll}
	both := Spec{Activation: activation, Fallback: fallback}
	type step struct {
		at       time.Duration // since t0
		replicas int32
		value    int64 // activation metric, milli
		actErr   bool
		failed   bool
		some     bool // some of the HPA's own metrics failed
		want     *int32
		action   Action
		phase    Phase
	}
	tests := []struct {
		name  string
		spec  Spec
		steps []step
	}{
		{
			name: "at zero, below the threshold: stays",
			spec: both,
			steps: []step{
				{replicas: 0, value: 5000, phase: PhaseScaledToZero},
				{at: time.Hour, replicas: 0, value: 0, phase: PhaseScaledToZero},
			},
		},
		{
			name: "wakes to minReplicas above the threshold",
			spec: both,
			steps: []step{
				{replicas: 0, value: 5001, want: ref[int32](2), action: ActionActivate, phase: PhaseActive},
			},
		},
		{
			name: "idle at minReplicas for the idle period, then to zero",
			spec: both,
			steps: []step{
				{replicas: 2, value: 1000, phase: PhaseIdle},
				{at: 30 * time.Second, replicas: 2, value: 5000, phase: PhaseIdle},
				{at: 60 * time.Second, replicas: 2, value: 0, want: ref[int32](0), action: ActionScaleToZero, phase: PhaseScaledToZero},
			},
		},
		{
			name: "a rise above the threshold restarts the idle period",
			spec: both,
			steps: []step{
				{replicas: 2, value: 1000, phase: PhaseIdle},
				{at: 50 * time.Second, replicas: 2, value: 6000, phase: PhaseActive},
				{at: 60 * time.Second, replicas: 2, value: 1000, phase: PhaseIdle},
				{at: 110 * time.Second, replicas: 2, value: 1000, phase: PhaseIdle},
				{at: 120 * time.Second, replicas: 2, value: 1000, want: ref[int32](0), action: ActionScaleToZero, phase: PhaseScaledToZero},
			},
		},
		{
			name: "above minReplicas: kube-controller-manager's to scale down first",
			spec: both,
			steps: []step{
				{replicas: 3, value: 0, phase: PhaseActive},
				{at: time.Hour, replicas: 3, value: 0, phase: PhaseActive},
			},
		},
		{
			name: "an unreadable activation metric neither wakes nor idles",
			spec: both,
			steps: []step{
				{replicas: 2, value: 0, phase: PhaseIdle},
				{at: 59 * time.Second, replicas: 2, actErr: true, phase: PhaseActive},
				{at: 61 * time.Second, replicas: 2, value: 0, phase: PhaseIdle},
				{at: 62 * time.Second, replicas: 0, actErr: true, phase: PhaseScaledToZero},
			},
		},
		{
			name: "fallback after N failed periods, recovery when metrics return",
			spec: both,
			steps: []step{
				{replicas: 2, failed: true, phase: ""},
				{at: 15 * time.Second, replicas: 2, failed: true, phase: ""},
				{at: 30 * time.Second, replicas: 2, failed: true, want: ref[int32](4), action: ActionFallback, phase: PhaseFallback},
				{at: 45 * time.Second, replicas: 4, failed: true, phase: PhaseFallback},
				{at: 60 * time.Second, replicas: 4, value: 9000, action: ActionRecover, phase: PhaseActive},
				{at: 75 * time.Second, replicas: 5, value: 9000, phase: PhaseActive},
			},
		},
		{
			name: "fallback from zero",
			spec: both,
			steps: []step{
				{replicas: 0, failed: true},
				{replicas: 0, failed: true},
				{replicas: 0, failed: true, want: ref[int32](4), action: ActionFallback, phase: PhaseFallback},
			},
		},
		{
			name: "fallback already at the count: reported, not written",
			spec: both,
			steps: []step{
				{replicas: 4, failed: true},
				{replicas: 4, failed: true},
				{replicas: 4, failed: true, action: ActionFallback, phase: PhaseFallback},
				{replicas: 4, failed: true, phase: PhaseFallback},
			},
		},
		{
			name: "fallback applied once: a change during it is not undone",
			spec: both,
			steps: []step{
				{replicas: 3, failed: true},
				{replicas: 3, failed: true},
				{replicas: 3, failed: true, want: ref[int32](4), action: ActionFallback, phase: PhaseFallback},
				{replicas: 6, failed: true, phase: PhaseFallback},
				{replicas: 6, failed: true, phase: PhaseFallback},
			},
		},
		{
			name: "a good period resets the failure count",
			spec: both,
			steps: []step{
				{replicas: 3, failed: true},
				{replicas: 3, failed: true},
				{replicas: 3, value: 9000, phase: PhaseActive},
				{replicas: 3, failed: true, phase: PhaseActive},
				{replicas: 3, failed: true, phase: PhaseActive},
				{replicas: 3, failed: true, want: ref[int32](4), action: ActionFallback, phase: PhaseFallback},
			},
		},
		{
			name: "failures without a fallback change nothing",
			spec: Spec{Activation: activation},
			steps: []step{
				{replicas: 2, value: 0, phase: PhaseIdle},
				{at: 30 * time.Second, replicas: 2, failed: true, phase: PhaseActive},
				{at: 2 * time.Minute, replicas: 2, failed: true, phase: PhaseActive},
			},
		},
		{
			name: "fallback currentReplicas: reported, never written",
			spec: Spec{Fallback: &Fallback{After: 1, Behavior: FallbackCurrentReplicas, On: FallbackOnAll}},
			steps: []step{
				{replicas: 7, failed: true, action: ActionFallback, phase: PhaseFallback},
				{replicas: 7, failed: true, phase: PhaseFallback},
			},
		},
		{
			name: "fallback currentReplicasIfHigher: current above the count is kept",
			spec: Spec{Fallback: &Fallback{Replicas: 4, After: 1, Behavior: FallbackCurrentReplicasIfHigher, On: FallbackOnAll}},
			steps: []step{
				{replicas: 7, failed: true, action: ActionFallback, phase: PhaseFallback},
				{replicas: 7, value: 1, action: ActionRecover, phase: PhaseActive},
				{replicas: 2, failed: true, want: ref[int32](4), action: ActionFallback, phase: PhaseFallback},
			},
		},
		{
			name: "fallback currentReplicasIfLower: current below the count is kept",
			spec: Spec{Fallback: &Fallback{Replicas: 4, After: 1, Behavior: FallbackCurrentReplicasIfLower, On: FallbackOnAll}},
			steps: []step{
				{replicas: 2, failed: true, action: ActionFallback, phase: PhaseFallback},
				{replicas: 2, value: 1, action: ActionRecover, phase: PhaseActive},
				{replicas: 7, failed: true, want: ref[int32](4), action: ActionFallback, phase: PhaseFallback},
			},
		},
		{
			name: "fallback-on all: some metrics failing is not a failed period",
			spec: Spec{Fallback: &Fallback{Replicas: 4, After: 1, Behavior: FallbackStatic, On: FallbackOnAll}},
			steps: []step{
				{replicas: 2, some: true, phase: PhaseActive},
			},
		},
		{
			name: "fallback-on any: some metrics failing only raises",
			spec: Spec{Fallback: &Fallback{Replicas: 4, After: 2, Behavior: FallbackStatic, On: FallbackOnAny}},
			steps: []step{
				{replicas: 2, some: true},
				{replicas: 2, some: true, want: ref[int32](4), action: ActionFallback, phase: PhaseFallback},
				{replicas: 6, value: 1, action: ActionRecover, phase: PhaseActive},
				{replicas: 6, some: true, phase: PhaseActive},
				{replicas: 6, some: true, action: ActionFallback, phase: PhaseFallback},
			},
		},
		{
			name: "paused-replicas: written on entering and whenever moved, then ended",
			spec: Spec{Activation: activation, Pause: &Pause{Hold: true, Replicas: ref[int32](3), ScaleIn: true, ScaleOut: true}},
			steps: []step{
				{replicas: 2, value: 0, want: ref[int32](3), action: ActionPause, phase: PhasePaused},
				{at: time.Hour, replicas: 3, value: 0, phase: PhasePaused},
				{at: 2 * time.Hour, replicas: 5, failed: true, want: ref[int32](3), action: ActionPause, phase: PhasePaused},
			},
		},
		{
			name: "paused: nothing written, no idle countdown, no fallback",
			spec: Spec{Activation: activation, Fallback: &Fallback{Replicas: 4, After: 1, Behavior: FallbackStatic, On: FallbackOnAll}, Pause: &Pause{Hold: true, ScaleIn: true, ScaleOut: true}},
			steps: []step{
				{replicas: 2, value: 0, action: ActionPause, phase: PhasePaused},
				{at: time.Hour, replicas: 2, value: 0, phase: PhasePaused},
				{at: 2 * time.Hour, replicas: 0, value: 9000, phase: PhasePaused},
				{at: 3 * time.Hour, replicas: 2, failed: true, phase: PhasePaused},
			},
		},
		{
			name: "paused-scale-in: no scale to zero, activation still works",
			spec: Spec{Activation: activation, Pause: &Pause{ScaleIn: true}},
			steps: []step{
				{replicas: 2, value: 0, phase: PhaseIdle},
				{at: time.Hour, replicas: 2, value: 0, phase: PhaseIdle},
				{at: 2 * time.Hour, replicas: 0, value: 9000, want: ref[int32](2), action: ActionActivate, phase: PhaseActive},
			},
		},
		{
			name: "paused-scale-out: no activation, no fallback up; scale to zero still works",
			spec: Spec{Activation: activation, Fallback: &Fallback{Replicas: 4, After: 1, Behavior: FallbackStatic, On: FallbackOnAll}, Pause: &Pause{ScaleOut: true}},
			steps: []step{
				{replicas: 0, value: 9000, phase: PhaseScaledToZero},
				{replicas: 2, failed: true, phase: PhaseActive},
				{replicas: 2, value: 0, phase: PhaseIdle},
				{at: time.Hour, replicas: 2, value: 0, want: ref[int32](0), action: ActionScaleToZero, phase: PhaseScaledToZero},
			},
		},
		{
			name: "fallback only: never to zero",
			spec: Spec{Fallback: fallback},
			steps: []step{
				{replicas: 1, value: 0, phase: PhaseActive},
				{at: time.Hour, replicas: 1, value: 0, phase: PhaseActive},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st State
			for i, s := range tt.steps {
				in := Input{Now: t0.Add(s.at), Replicas: s.replicas, MinReplicas: 2, MaxReplicas: 10, ActivationMilli: s.value, MetricsFailed: s.failed, SomeFailed: s.failed || s.some}
				if s.actErr {
					in.ActivationErr = errors.New("no metrics returned from external metrics API")
				}
				d := Decide(tt.spec, st, in)
				if diff := cmp.Diff(s.want, d.Scale); diff != "" {
					t.Errorf("step %d: scale (-want +got):\n%s\nreason: %s", i, diff, d.Reason)
				}
				if d.Action != s.action {
					t.Errorf("step %d: action %q, want %q (reason: %s)", i, d.Action, s.action, d.Reason)
				}
				if d.State.Phase != s.phase {
					t.Errorf("step %d: phase %q, want %q (reason: %s)", i, d.State.Phase, s.phase, d.Reason)
				}
				if d.Reason == "" {
					t.Errorf("step %d: no reason", i)
				}
				st = d.State
			}
		})
	}
}

func TestDecideReasons(t *testing.T) {
	spec := Spec{Activation: &Activation{
		Metric:         MetricRef{HPAIndex: -1},
		ThresholdMilli: 500, IdlePeriod: time.Minute,
	}}
	spec.Activation.Metric.Spec.External = nil
	d := Decide(spec, State{}, Input{Now: t0, Replicas: 0, MinReplicas: 1, ActivationMilli: 1500})
	want := "activation metric ? is 1.5, above the threshold 0.5: scaled from 0 to minReplicas 1"
	if d.Reason != want {
		t.Errorf("reason %q, want %q", d.Reason, want)
	}
}

func TestDecideUnpause(t *testing.T) {
	d := Decide(Spec{}, State{Phase: PhasePaused}, Input{Now: t0, Replicas: 3, MinReplicas: 1, MaxReplicas: 10})
	if d.Action != ActionUnpause || d.State.Phase != PhaseActive || d.Scale != nil {
		t.Errorf("got %+v, want PauseEnded, Active, no write", d)
	}
}
