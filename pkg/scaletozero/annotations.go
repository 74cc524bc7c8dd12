package scaletozero

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The annotations an HPA opts in with. Values are documented in
// docs/autoscaler.md.
const (
	// AnnotationActivationMetric names the metric that decides activation:
	// NAME (one of the HPA's own External or Object metrics) or
	// external:NAME, external:NAME{SELECTOR} (an external metric read
	// with a Kubernetes label selector).
	AnnotationActivationMetric = "promscaler.io/activation-metric"
	// AnnotationActivationThreshold is a quantity ("0", "5", "0.5",
	// "500m"); default 0.
	AnnotationActivationThreshold = "promscaler.io/activation-threshold"
	// AnnotationIdlePeriod is a duration ("5m", "90s"); default 5m.
	AnnotationIdlePeriod = "promscaler.io/idle-period"
	// AnnotationFallbackReplicas is a replica count within the HPA's
	// minReplicas..maxReplicas.
	AnnotationFallbackReplicas = "promscaler.io/fallback-replicas"
	// AnnotationFallbackAfter is the number of consecutive failed periods
	// before the fallback; default 3.
	AnnotationFallbackAfter = "promscaler.io/fallback-after"
	// AnnotationStatus is written by the autoscaler: a JSON Status.
	AnnotationStatus = "promscaler.io/scaler-status"
)

// Defaults of the optional annotations.
const (
	DefaultIdlePeriod    = 5 * time.Minute
	DefaultFallbackAfter = 3
)

// inputAnnotations are the annotations a user sets, in report order.
var inputAnnotations = []string{
	AnnotationActivationMetric, AnnotationActivationThreshold, AnnotationIdlePeriod,
	AnnotationFallbackReplicas, AnnotationFallbackAfter,
}

// maxThreshold keeps thresholds (and their milli-units) far from int64
// overflow.
const maxThreshold = 1e15

// MetricRef is the activation metric: an External or Object metric spec
// as the HPA would carry it (its target is not used).
type MetricRef struct {
	Spec autoscalingv2.MetricSpec
	// HPAIndex is its index in the HPA's spec.metrics, or -1 for an
	// explicit external:NAME metric.
	HPAIndex int
}

// String names the metric for messages.
func (m MetricRef) String() string {
	switch {
	case m.Spec.External != nil:
		s := m.Spec.External.Metric.Name
		if sel := m.Spec.External.Metric.Selector; sel != nil {
			if ls, err := metav1.LabelSelectorAsSelector(sel); err == nil && !ls.Empty() {
				s += "{" + ls.String() + "}"
			}
		}
		return s
	case m.Spec.Object != nil:
		return m.Spec.Object.Metric.Name
	}
	return "?"
}

// Problem is one invalid annotation.
type Problem struct {
	Annotation string
	Value      string
	Message    string
}

func (p Problem) Error() string {
	return fmt.Sprintf("annotation %s=%q: %s", p.Annotation, p.Value, p.Message)
}

// Annotated reports whether the HPA opts in (carries any of the input
// annotations). The autoscaler never writes an HPA that does not.
func Annotated(annotations map[string]string) bool {
	for _, a := range inputAnnotations {
		if _, ok := annotations[a]; ok {
			return true
		}
	}
	return false
}

// Parse reads the HPA's annotations. It returns the Spec and every problem
// found (in annotation order); with problems, the Spec must not be used.
func Parse(hpa *autoscalingv2.HorizontalPodAutoscaler) (Spec, []Problem) {
	var (
		spec     Spec
		problems []Problem
		ann      = hpa.Annotations
	)
	bad := func(name, msg string, args ...any) {
		problems = append(problems, Problem{Annotation: name, Value: ann[name], Message: fmt.Sprintf(msg, args...)})
	}
	minR := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minR = *hpa.Spec.MinReplicas
	}

	metric, hasMetric := ann[AnnotationActivationMetric]
	if hasMetric {
		a := &Activation{IdlePeriod: DefaultIdlePeriod}
		ref, msg := parseMetric(hpa, metric)
		if msg != "" {
			bad(AnnotationActivationMetric, "%s", msg)
		} else if minR < 1 {
			bad(AnnotationActivationMetric, "the HPA's minReplicas is %d: scale to zero needs minReplicas of at least 1 (with 0, kube-controller-manager's HPAScaleToZero handles it)", minR)
		}
		a.Metric = ref
		if v, ok := ann[AnnotationActivationThreshold]; ok {
			q, err := resource.ParseQuantity(strings.TrimSpace(v))
			switch f := q.AsApproximateFloat64(); {
			case err != nil:
				bad(AnnotationActivationThreshold, "not a quantity (e.g. 5, 0.5, 500m): %v", err)
			case q.Sign() < 0:
				bad(AnnotationActivationThreshold, "must not be negative")
			case f > maxThreshold:
				bad(AnnotationActivationThreshold, "must be at most %g", float64(maxThreshold))
			default:
				a.ThresholdMilli = q.MilliValue()
			}
		}
		if v, ok := ann[AnnotationIdlePeriod]; ok {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			switch {
			case err != nil:
				bad(AnnotationIdlePeriod, "not a duration (e.g. 90s, 5m): %v", err)
			case d <= 0:
				bad(AnnotationIdlePeriod, "must be positive")
			default:
				a.IdlePeriod = d
			}
		}
		spec.Activation = a
	} else {
		for _, name := range []string{AnnotationActivationThreshold, AnnotationIdlePeriod} {
			if _, ok := ann[name]; ok {
				bad(name, "needs %s", AnnotationActivationMetric)
			}
		}
	}

	replicas, hasFallback := ann[AnnotationFallbackReplicas]
	if hasFallback {
		f := &Fallback{After: DefaultFallbackAfter}
		n, err := strconv.ParseInt(strings.TrimSpace(replicas), 10, 32)
		switch {
		case err != nil:
			bad(AnnotationFallbackReplicas, "not a whole number: %v", numErr(err))
		case int32(n) < minR || int32(n) > hpa.Spec.MaxReplicas:
			// Outside the range kube-controller-manager would move it
			// back at once (it enforces min/max even without metrics).
			bad(AnnotationFallbackReplicas, "must be within the HPA's minReplicas %d and maxReplicas %d", minR, hpa.Spec.MaxReplicas)
		default:
			f.Replicas = int32(n)
		}
		if v, ok := ann[AnnotationFallbackAfter]; ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			switch {
			case err != nil:
				bad(AnnotationFallbackAfter, "not a whole number: %v", numErr(err))
			case n < 1:
				bad(AnnotationFallbackAfter, "must be at least 1")
			default:
				f.After = int32(n)
			}
		}
		spec.Fallback = f
	} else if _, ok := ann[AnnotationFallbackAfter]; ok {
		bad(AnnotationFallbackAfter, "needs %s", AnnotationFallbackReplicas)
	}
	slices.SortStableFunc(problems, func(a, b Problem) int {
		return slices.Index(inputAnnotations, a.Annotation) - slices.Index(inputAnnotations, b.Annotation)
	})
	return spec, problems
}

func numErr(err error) error {
	if ne, ok := err.(*strconv.NumError); ok {
		return ne.Err
	}
	return err
}

// metricName is what an explicit external metric name may hold.
var metricName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_:.\-]*$`)

// parseMetric resolves the activation-metric value; a non-empty message
// says what is wrong.
func parseMetric(hpa *autoscalingv2.HorizontalPodAutoscaler, v string) (MetricRef, string) {
	v = strings.TrimSpace(v)
	if rest, ok := strings.CutPrefix(v, "external:"); ok {
		name, sel, hasSel := strings.Cut(rest, "{")
		if !metricName.MatchString(name) {
			return MetricRef{}, fmt.Sprintf("external metric name %q: want letters, digits, _ : . - (not starting with a digit)", name)
		}
		id := autoscalingv2.MetricIdentifier{Name: name}
		if hasSel {
			body, ok := strings.CutSuffix(sel, "}")
			if !ok {
				return MetricRef{}, "label selector: missing closing }"
			}
			ls, err := labels.Parse(body)
			if err != nil {
				return MetricRef{}, fmt.Sprintf("label selector %q: %v", body, err)
			}
			if !ls.Empty() {
				lsel, err := metav1.ParseToLabelSelector(body)
				if err != nil {
					return MetricRef{}, fmt.Sprintf("label selector %q: %v", body, err)
				}
				id.Selector = lsel
			}
		}
		return MetricRef{HPAIndex: -1, Spec: autoscalingv2.MetricSpec{
			Type:     autoscalingv2.ExternalMetricSourceType,
			External: &autoscalingv2.ExternalMetricSource{Metric: id},
		}}, ""
	}
	if v == "" {
		return MetricRef{}, "empty: want the name of one of the HPA's External or Object metrics, or external:NAME[{SELECTOR}]"
	}
	found := -1
	for i, m := range hpa.Spec.Metrics {
		var name string
		switch {
		case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
			name = m.External.Metric.Name
		case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
			name = m.Object.Metric.Name
		default:
			continue
		}
		if name != v {
			continue
		}
		if found >= 0 {
			return MetricRef{}, fmt.Sprintf("spec.metrics[%d] and spec.metrics[%d] are both named %q: use external:NAME{SELECTOR}", found, i, v)
		}
		found = i
	}
	if found < 0 {
		return MetricRef{}, fmt.Sprintf("no External or Object metric named %q in spec.metrics (Pods and Resource metrics cannot be read at zero replicas; use external:NAME for another metric)", v)
	}
	return MetricRef{HPAIndex: found, Spec: *hpa.Spec.Metrics[found].DeepCopy()}, ""
}

// Status is the JSON the autoscaler writes to AnnotationStatus, shown by
// `kubectl describe hpa`. It holds no metric values or counters that move
// every period, so it changes (and is written) only on an action, a phase
// change or a change of the annotations' validity.
type Status struct {
	// State is a Phase ("Idle" is reported as "Active"), or "Invalid".
	State string `json:"state"`
	// LastAction, LastActionTime and Reason describe the last action.
	LastAction     Action `json:"lastAction,omitempty"`
	LastActionTime string `json:"lastActionTime,omitempty"`
	Reason         string `json:"reason,omitempty"`
	// Valid is a condition: AnnotationsValid True, or False with the
	// reason InvalidAnnotation and a message naming each annotation and
	// its problem.
	Valid Condition `json:"annotationsValid"`
}

// Condition is a condition-like record.
type Condition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// StateInvalid is Status.State when the annotations are invalid.
const StateInvalid = "Invalid"

// ValidCondition is the AnnotationsValid condition for problems.
func ValidCondition(problems []Problem) Condition {
	if len(problems) == 0 {
		return Condition{Status: "True", Reason: "ValidAnnotations"}
	}
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.Error()
	}
	return Condition{Status: "False", Reason: "InvalidAnnotation", Message: strings.Join(msgs, "; ")}
}

// ReportedState is the phase as Status shows it.
func ReportedState(p Phase) string {
	if p == PhaseIdle || p == "" {
		return string(PhaseActive)
	}
	return string(p)
}
