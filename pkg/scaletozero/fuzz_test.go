package scaletozero

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzParse: any annotation values give a Spec or problems, never a panic;
// every problem names an input annotation; a Spec without problems is in
// range and its decisions never write outside 0..maxReplicas.
func FuzzParse(f *testing.F) {
	f.Add("queue_depth", "5", "5m", "4", "3", "static", "all", "", "", "", "", "")
	f.Add("external:jobs{queue in (a,b)}", "500m", "90s", "2", "1", "currentReplicasIfHigher", "any", "true", "", "", "", "")
	f.Add("external:x{", "-1", "0s", "0", "-3", "bogus", "x", "yes", "-1", "1", "0", "promscaler.io/idle-perod")
	f.Add("hits", "1E", "1h", "10", "2147483648", "currentReplicas", "", "false", "3", "true", "false", "promscaler.io/")
	f.Add("", "", "", "", "", "", "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, metric, threshold, idle, replicas, after, behavior, on, paused, pausedReplicas, pausedIn, pausedOut, other string) {
		ann := map[string]string{}
		for k, v := range map[string]string{
			AnnotationActivationMetric: metric, AnnotationActivationThreshold: threshold, AnnotationIdlePeriod: idle,
			AnnotationFallbackReplicas: replicas, AnnotationFallbackAfter: after, AnnotationFallbackBehavior: behavior,
			AnnotationFallbackOn: on, AnnotationPaused: paused, AnnotationPausedReplicas: pausedReplicas,
			AnnotationPausedScaleIn: pausedIn, AnnotationPausedScaleOut: pausedOut, other: "x",
		} {
			if v != "" {
				ann[k] = v
			}
		}
		hpa := testHPA(ann)
		spec, problems := Parse(hpa)
		for _, p := range Unknown(ann) {
			if !strings.HasPrefix(p.Annotation, Prefix) || slices.Contains(inputAnnotations, p.Annotation) {
				t.Fatalf("unknown %+v is not an unknown promscaler.io annotation", p)
			}
		}
		for _, p := range problems {
			if !slices.Contains(inputAnnotations, p.Annotation) || p.Message == "" {
				t.Fatalf("problem %+v names no input annotation or says nothing", p)
			}
			if !strings.Contains(p.Error(), p.Annotation) {
				t.Fatalf("problem text %q does not name %s", p.Error(), p.Annotation)
			}
		}
		if len(problems) > 0 {
			if c := ValidCondition(problems); c.Status != "False" {
				t.Fatalf("condition %+v for problems", c)
			}
			return
		}
		if a := spec.Activation; a != nil {
			if a.ThresholdMilli < 0 || a.IdlePeriod <= 0 || a.Metric.Spec.External == nil && a.Metric.Spec.Object == nil {
				t.Fatalf("activation out of range: %+v", a)
			}
		}
		if fb := spec.Fallback; fb != nil && (fb.Behavior != FallbackCurrentReplicas && (fb.Replicas < 2 || fb.Replicas > 10) || fb.After < 1) {
			t.Fatalf("fallback out of range: %+v", fb)
		}
		var st State
		for i, replicas := range []int32{0, 2, 2, 2, 5, 0} {
			for _, failed := range []bool{false, true} {
				d := Decide(spec, st, Input{Now: t0.Add(time.Duration(i) * time.Hour), Replicas: replicas, MinReplicas: 2, MaxReplicas: 10, ActivationMilli: int64(i) * 1000, MetricsFailed: failed, SomeFailed: failed || i%2 == 0})
				if d.Scale != nil && (*d.Scale < 0 || *d.Scale > 10) {
					t.Fatalf("scale to %d", *d.Scale)
				}
				if p := spec.Pause; d.Scale != nil && p != nil && (p.Replicas == nil || *d.Scale != *p.Replicas) && p.Blocks(replicas, *d.Scale) {
					t.Fatalf("a write from %d to %d that %s blocks", replicas, *d.Scale, p)
				}
				st = d.State
			}
		}
	})
}
