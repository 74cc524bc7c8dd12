package scaletozero

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func testHPA(ann map[string]string) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: ann},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			MinReplicas: ptr.To[int32](2),
			MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "rps"}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{
					Name: "queue_depth", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}}}},
				{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "hits"}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "twice"}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "twice"}}},
			},
		},
	}
}

// summary is what a test compares of a parse.
type summary struct {
	Pause      *Pause
	Metric     string
	HPAIndex   int
	Threshold  int64
	Idle       time.Duration
	Fallback   *Fallback
	Problems   []string
	Annotated  bool
	Activation bool
}

func summarize(hpa *autoscalingv2.HorizontalPodAutoscaler) summary {
	spec, problems := Parse(hpa)
	s := summary{Fallback: spec.Fallback, Pause: spec.Pause, Annotated: Annotated(hpa.Annotations)}
	if a := spec.Activation; a != nil {
		s.Activation = true
		s.Metric, s.HPAIndex, s.Threshold, s.Idle = a.Metric.String(), a.Metric.HPAIndex, a.ThresholdMilli, a.IdlePeriod
	}
	for _, p := range problems {
		s.Problems = append(s.Problems, p.Error())
	}
	return s
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		want summary
	}{
		{name: "not annotated", ann: map[string]string{"other": "x"}, want: summary{}},
		{
			name: "own external metric, defaults",
			ann:  map[string]string{AnnotationActivationMetric: "queue_depth"},
			want: summary{Annotated: true, Activation: true, Metric: "queue_depth{queue=jobs}", HPAIndex: 1, Idle: 5 * time.Minute},
		},
		{
			name: "own object metric, threshold and idle period",
			ann:  map[string]string{AnnotationActivationMetric: " hits ", AnnotationActivationThreshold: "500m", AnnotationIdlePeriod: "90s"},
			want: summary{Annotated: true, Activation: true, Metric: "hits", HPAIndex: 2, Threshold: 500, Idle: 90 * time.Second},
		},
		{
			name: "explicit external metric with a selector",
			ann:  map[string]string{AnnotationActivationMetric: "external:jobs_waiting{queue in (a,b),env=prod}", AnnotationActivationThreshold: "5"},
			want: summary{Annotated: true, Activation: true, Metric: "jobs_waiting{env=prod,queue in (a,b)}", HPAIndex: -1, Threshold: 5000, Idle: 5 * time.Minute},
		},
		{
			name: "explicit external metric without a selector",
			ann:  map[string]string{AnnotationActivationMetric: "external:jobs_waiting"},
			want: summary{Annotated: true, Activation: true, Metric: "jobs_waiting", HPAIndex: -1, Idle: 5 * time.Minute},
		},
		{
			name: "fallback",
			ann:  map[string]string{AnnotationFallbackReplicas: "4", AnnotationFallbackAfter: "5"},
			want: summary{Annotated: true, Fallback: &Fallback{Replicas: 4, After: 5, Behavior: FallbackStatic, On: FallbackOnAll}},
		},
		{
			name: "fallback, default after",
			ann:  map[string]string{AnnotationFallbackReplicas: "2"},
			want: summary{Annotated: true, Fallback: &Fallback{Replicas: 2, After: 3, Behavior: FallbackStatic, On: FallbackOnAll}},
		},
		{
			name: "every annotation wrong",
			ann: map[string]string{
				AnnotationActivationMetric: "rps", AnnotationActivationThreshold: "-1", AnnotationIdlePeriod: "5x",
				AnnotationFallbackReplicas: "11", AnnotationFallbackAfter: "0",
			},
			want: summary{Annotated: true, Activation: true, Metric: "?", Idle: 5 * time.Minute, Fallback: &Fallback{After: 3, Behavior: FallbackStatic, On: FallbackOnAll}, Problems: []string{
				`annotation promscaler.io/activation-metric="rps": no External or Object metric named "rps" in spec.metrics (Pods and Resource metrics cannot be read at zero replicas; use external:NAME for another metric)`,
				`annotation promscaler.io/activation-threshold="-1": must not be negative`,
				`annotation promscaler.io/idle-period="5x": not a duration (e.g. 90s, 5m): time: unknown unit "x" in duration "5x"`,
				`annotation promscaler.io/fallback-replicas="11": must be within the HPA's minReplicas 2 and maxReplicas 10`,
				`annotation promscaler.io/fallback-after="0": must be at least 1`,
			}},
		},
		{
			name: "ambiguous own metric",
			ann:  map[string]string{AnnotationActivationMetric: "twice"},
			want: summary{Annotated: true, Activation: true, Metric: "?", Idle: 5 * time.Minute, Problems: []string{
				`annotation promscaler.io/activation-metric="twice": spec.metrics[3] and spec.metrics[4] are both named "twice": use external:NAME{SELECTOR}`,
			}},
		},
		{
			name: "bad explicit metrics",
			ann:  map[string]string{AnnotationActivationMetric: "external:9lives{a=", AnnotationActivationThreshold: "lots"},
			want: summary{Annotated: true, Activation: true, Metric: "?", Idle: 5 * time.Minute, Problems: []string{
				`annotation promscaler.io/activation-metric="external:9lives{a=": external metric name "9lives": want letters, digits, _ : . - (not starting with a digit)`,
				`annotation promscaler.io/activation-threshold="lots": not a quantity (e.g. 5, 0.5, 500m): quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
			}},
		},
		{
			name: "unclosed selector",
			ann:  map[string]string{AnnotationActivationMetric: "external:jobs{a=b"},
			want: summary{Annotated: true, Activation: true, Metric: "?", Idle: 5 * time.Minute, Problems: []string{
				`annotation promscaler.io/activation-metric="external:jobs{a=b": label selector: missing closing }`,
			}},
		},
		{
			name: "settings without what they configure",
			ann:  map[string]string{AnnotationIdlePeriod: "1m", AnnotationActivationThreshold: "1", AnnotationFallbackAfter: "2"},
			want: summary{Annotated: true, Problems: []string{
				`annotation promscaler.io/activation-threshold="1": needs promscaler.io/activation-metric`,
				`annotation promscaler.io/idle-period="1m": needs promscaler.io/activation-metric`,
				`annotation promscaler.io/fallback-after="2": needs promscaler.io/fallback-replicas`,
			}},
		},
		{
			name: "fallback behaviour and fallback-on",
			ann:  map[string]string{AnnotationFallbackReplicas: "3", AnnotationFallbackBehavior: "currentReplicasIfHigher", AnnotationFallbackOn: "any"},
			want: summary{Annotated: true, Fallback: &Fallback{Replicas: 3, After: 3, Behavior: FallbackCurrentReplicasIfHigher, On: FallbackOnAny}},
		},
		{
			name: "currentReplicas needs no count",
			ann:  map[string]string{AnnotationFallbackBehavior: "currentReplicas"},
			want: summary{Annotated: true, Fallback: &Fallback{After: 3, Behavior: FallbackCurrentReplicas, On: FallbackOnAll}},
		},
		{
			name: "bad fallback behaviour and fallback-on",
			ann:  map[string]string{AnnotationFallbackBehavior: "currentReplicasIfLower", AnnotationFallbackOn: "some"},
			want: summary{Annotated: true, Fallback: &Fallback{After: 3, Behavior: FallbackCurrentReplicasIfLower, On: "some"}, Problems: []string{
				`annotation promscaler.io/fallback-behavior="currentReplicasIfLower": currentReplicasIfLower needs promscaler.io/fallback-replicas`,
				`annotation promscaler.io/fallback-on="some": want "all" or "any"`,
			}},
		},
		{
			name: "unknown fallback behaviour",
			ann:  map[string]string{AnnotationFallbackReplicas: "3", AnnotationFallbackBehavior: "current"},
			want: summary{Annotated: true, Fallback: &Fallback{Replicas: 3, After: 3, Behavior: "current", On: FallbackOnAll}, Problems: []string{
				`annotation promscaler.io/fallback-behavior="current": want one of "static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"`,
			}},
		},
		{
			name: "paused",
			ann:  map[string]string{AnnotationPaused: " True "},
			want: summary{Annotated: true, Pause: &Pause{Hold: true, ScaleIn: true, ScaleOut: true}},
		},
		{
			name: "paused false is no pause",
			ann:  map[string]string{AnnotationPaused: "false", AnnotationPausedScaleIn: "false"},
			want: summary{Annotated: true},
		},
		{
			name: "paused-replicas wins over the others",
			ann:  map[string]string{AnnotationPausedReplicas: "0", AnnotationPausedScaleOut: "true"},
			want: summary{Annotated: true, Pause: &Pause{Hold: true, Replicas: ptr.To[int32](0), ScaleIn: true, ScaleOut: true}},
		},
		{
			name: "paused-scale-in and paused-scale-out",
			ann:  map[string]string{AnnotationPausedScaleIn: "true"},
			want: summary{Annotated: true, Pause: &Pause{ScaleIn: true}},
		},
		{
			name: "bad pause values",
			ann:  map[string]string{AnnotationPaused: "yes", AnnotationPausedReplicas: "11", AnnotationPausedScaleOut: "1"},
			want: summary{Annotated: true, Problems: []string{
				`annotation promscaler.io/paused="yes": want "true" or "false"`,
				`annotation promscaler.io/paused-replicas="11": must be within 0 and the HPA's maxReplicas 10`,
				`annotation promscaler.io/paused-scale-out="1": want "true" or "false"`,
			}},
		},
		{
			name: "a misspelt annotation alone opts in (to be reported)",
			ann:  map[string]string{"promscaler.io/idle-perod": "10m"},
			want: summary{Annotated: true},
		},
		{
			name: "written annotations alone do not opt in",
			ann:  map[string]string{AnnotationStatus: "{}", AnnotationDryRunDecision: "{}"},
			want: summary{},
		},
		{
			name: "huge threshold, zero idle, fractional replicas",
			ann:  map[string]string{AnnotationActivationMetric: "hits", AnnotationActivationThreshold: "1E", AnnotationIdlePeriod: "0s", AnnotationFallbackReplicas: "2.5"},
			want: summary{Annotated: true, Activation: true, Metric: "hits", HPAIndex: 2, Idle: 5 * time.Minute, Fallback: &Fallback{After: 3, Behavior: FallbackStatic, On: FallbackOnAll}, Problems: []string{
				`annotation promscaler.io/activation-threshold="1E": must be at most 1e+15`,
				`annotation promscaler.io/idle-period="0s": must be positive`,
				`annotation promscaler.io/fallback-replicas="2.5": not a whole number: invalid syntax`,
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, summarize(testHPA(tt.ann))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMinReplicasZero(t *testing.T) {
	hpa := testHPA(map[string]string{AnnotationActivationMetric: "hits"})
	hpa.Spec.MinReplicas = ptr.To[int32](0)
	_, problems := Parse(hpa)
	want := []string{`annotation promscaler.io/activation-metric="hits": the HPA's minReplicas is 0: ` +
		`kube-controller-manager (HPAScaleToZero) scales it to zero when its External/Object metrics propose 0, ` +
		`after behavior.scaleDown.stabilizationWindowSeconds, and back on any value above 0, and would undo promscaler's zero; ` +
		`set minReplicas to 1 for an activation threshold and idle period, or keep 0 and make the metric read 0 at or below the threshold`}
	if diff := cmp.Diff(want, Messages(problems)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Fallback and pause keep their meaning at minReplicas 0.
	hpa.Annotations = map[string]string{AnnotationFallbackReplicas: "2", AnnotationPausedScaleIn: "true"}
	spec, problems := Parse(hpa)
	if len(problems) != 0 || spec.Fallback == nil || spec.Fallback.Replicas != 2 || spec.Pause == nil || !spec.Pause.ScaleIn || spec.Pause.ScaleOut {
		t.Errorf("fallback and pause at minReplicas 0: spec %+v, problems %v", spec, problems)
	}
}

func TestValidCondition(t *testing.T) {
	if diff := cmp.Diff(Condition{Status: "True", Reason: "ValidAnnotations"}, ValidCondition(nil)); diff != "" {
		t.Error(diff)
	}
	got := ValidCondition([]Problem{{Annotation: AnnotationIdlePeriod, Value: "x", Message: "bad"}, {Annotation: AnnotationFallbackAfter, Value: "0", Message: "worse"}})
	want := Condition{Status: "False", Reason: "InvalidAnnotation",
		Message: `annotation promscaler.io/idle-period="x": bad; annotation promscaler.io/fallback-after="0": worse`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

func TestUnknown(t *testing.T) {
	got := Unknown(map[string]string{
		"promscaler.io/idle-perod":         "10m",
		"promscaler.io/pause":              "true",
		"promscaler.io/fallback-replica":   "2",
		"promscaler.io/something-else-yet": "x",
		AnnotationIdlePeriod:               "5m",
		AnnotationStatus:                   "{}",
		"example.com/idle-perod":           "1",
	})
	want := []string{
		`annotation promscaler.io/fallback-replica="2": unknown promscaler.io annotation, ignored; did you mean promscaler.io/fallback-replicas?`,
		`annotation promscaler.io/idle-perod="10m": unknown promscaler.io annotation, ignored; did you mean promscaler.io/idle-period?`,
		`annotation promscaler.io/pause="true": unknown promscaler.io annotation, ignored; did you mean promscaler.io/paused?`,
		`annotation promscaler.io/something-else-yet="x": unknown promscaler.io annotation, ignored`,
	}
	if diff := cmp.Diff(want, Messages(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
