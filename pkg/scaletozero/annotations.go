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
	"k8s.io/utils/ptr"

	"github.com/promscaler/promscaler/internal/textdist"
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
	// AnnotationFallbackBehavior is one of the FallbackBehavior values;
	// default static.
	AnnotationFallbackBehavior = "promscaler.io/fallback-behavior"
	// AnnotationFallbackOn is "all" (a period fails when every metric read
	// failed; the default) or "any" (when any of the HPA's own metrics
	// failed).
	AnnotationFallbackOn = "promscaler.io/fallback-on"
	// AnnotationPaused "true" holds the target where it is.
	AnnotationPaused = "promscaler.io/paused"
	// AnnotationPausedReplicas holds the target at a replica count.
	AnnotationPausedReplicas = "promscaler.io/paused-replicas"
	// AnnotationPausedScaleIn "true" stops scaling in.
	AnnotationPausedScaleIn = "promscaler.io/paused-scale-in"
	// AnnotationPausedScaleOut "true" stops scaling out.
	AnnotationPausedScaleOut = "promscaler.io/paused-scale-out"
	// AnnotationStatus is written by the autoscaler: a JSON Status.
	AnnotationStatus = "promscaler.io/scaler-status"
	// AnnotationDryRunDecision is written by the autoscaler's full mode
	// with --dry-run-annotate.
	AnnotationDryRunDecision = "promscaler.io/dry-run-decision"
)

// Prefix is the prefix of every promscaler annotation.
const Prefix = "promscaler.io/"

// Defaults of the optional annotations.
const (
	DefaultIdlePeriod    = 5 * time.Minute
	DefaultFallbackAfter = 3
)

// inputAnnotations are the annotations a user sets, in report order.
var inputAnnotations = []string{
	AnnotationActivationMetric, AnnotationActivationThreshold, AnnotationIdlePeriod,
	AnnotationFallbackReplicas, AnnotationFallbackAfter, AnnotationFallbackBehavior, AnnotationFallbackOn,
	AnnotationPaused, AnnotationPausedReplicas, AnnotationPausedScaleIn, AnnotationPausedScaleOut,
}

// writtenAnnotations are the annotations the autoscaler writes.
var writtenAnnotations = []string{AnnotationStatus, AnnotationDryRunDecision}

// InputAnnotations lists the annotations a user sets.
func InputAnnotations() []string { return slices.Clone(inputAnnotations) }

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

// Problem is one invalid (or, from Unknown, unknown) annotation.
type Problem struct {
	Annotation string
	Value      string
	Message    string
}

func (p Problem) Error() string {
	return fmt.Sprintf("annotation %s=%q: %s", p.Annotation, p.Value, p.Message)
}

// Annotated reports whether the HPA opts in: it carries a promscaler.io/
// annotation other than those the autoscaler writes (a misspelt one
// included, so that it is reported). The autoscaler never writes an HPA
// that does not.
func Annotated(annotations map[string]string) bool {
	for k := range annotations {
		if strings.HasPrefix(k, Prefix) && !slices.Contains(writtenAnnotations, k) {
			return true
		}
	}
	return false
}

// Unknown reports each promscaler.io/ annotation that is neither one a
// user sets nor one the autoscaler writes, with the nearest known name
// when one is close. They are warnings: the known annotations still apply.
func Unknown(annotations map[string]string) []Problem {
	var out []Problem
	for k, v := range annotations {
		if !strings.HasPrefix(k, Prefix) || slices.Contains(inputAnnotations, k) || slices.Contains(writtenAnnotations, k) {
			continue
		}
		msg := "unknown promscaler.io annotation, ignored"
		if near := nearest(k); near != "" {
			msg += "; did you mean " + near + "?"
		}
		out = append(out, Problem{Annotation: k, Value: v, Message: msg})
	}
	slices.SortFunc(out, func(a, b Problem) int { return strings.Compare(a.Annotation, b.Annotation) })
	return out
}

// nearest is the input annotation closest to name by edit distance, or ""
// when none is within a third of its length (at least 2 edits).
func nearest(name string) string {
	best, bestD := "", max(2, len(name)/3)+1
	for _, k := range inputAnnotations {
		if d := textdist.Levenshtein(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// Parse reads the HPA's annotations. It returns the Spec and every problem
// found (in annotation order); with problems, the Spec must not be used.
// Unknown promscaler.io/ annotations are not problems (see Unknown).
func Parse(hpa *autoscalingv2.HorizontalPodAutoscaler) (Spec, []Problem) {
	p := parser{hpa: hpa, ann: hpa.Annotations, minR: 1}
	if hpa.Spec.MinReplicas != nil {
		p.minR = *hpa.Spec.MinReplicas
	}
	var spec Spec
	spec.Activation = p.activation()
	spec.Fallback = p.fallback()
	spec.Pause = p.pause()
	slices.SortStableFunc(p.problems, func(a, b Problem) int {
		return slices.Index(inputAnnotations, a.Annotation) - slices.Index(inputAnnotations, b.Annotation)
	})
	return spec, p.problems
}

// parser collects the problems of one Parse.
type parser struct {
	hpa      *autoscalingv2.HorizontalPodAutoscaler
	ann      map[string]string
	minR     int32
	problems []Problem
}

func (p *parser) bad(name, msg string, args ...any) {
	p.problems = append(p.problems, Problem{Annotation: name, Value: p.ann[name], Message: fmt.Sprintf(msg, args...)})
}

// needs reports each of names that is set without the annotation it
// depends on.
func (p *parser) needs(on string, names ...string) {
	for _, name := range names {
		if _, ok := p.ann[name]; ok {
			p.bad(name, "needs %s", on)
		}
	}
}

func (p *parser) activation() *Activation {
	metric, ok := p.ann[AnnotationActivationMetric]
	if !ok {
		p.needs(AnnotationActivationMetric, AnnotationActivationThreshold, AnnotationIdlePeriod)
		return nil
	}
	a := &Activation{IdlePeriod: DefaultIdlePeriod}
	ref, msg := parseMetric(p.hpa, metric)
	if msg != "" {
		p.bad(AnnotationActivationMetric, "%s", msg)
	} else if p.minR < 1 {
		p.bad(AnnotationActivationMetric, "the HPA's minReplicas is 0: kube-controller-manager (HPAScaleToZero) scales it to zero when its External/Object metrics propose 0, after behavior.scaleDown.stabilizationWindowSeconds, and back on any value above 0, and would undo promscaler's zero; set minReplicas to 1 for an activation threshold and idle period, or keep 0 and make the metric read 0 at or below the threshold")
	}
	a.Metric = ref
	if v, ok := p.ann[AnnotationActivationThreshold]; ok {
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		switch f := q.AsApproximateFloat64(); {
		case err != nil:
			p.bad(AnnotationActivationThreshold, "not a quantity (e.g. 5, 0.5, 500m): %v", err)
		case q.Sign() < 0:
			p.bad(AnnotationActivationThreshold, "must not be negative")
		case f > maxThreshold:
			p.bad(AnnotationActivationThreshold, "must be at most %g", float64(maxThreshold))
		default:
			a.ThresholdMilli = q.MilliValue()
		}
	}
	if v, ok := p.ann[AnnotationIdlePeriod]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		switch {
		case err != nil:
			p.bad(AnnotationIdlePeriod, "not a duration (e.g. 90s, 5m): %v", err)
		case d <= 0:
			p.bad(AnnotationIdlePeriod, "must be positive")
		default:
			a.IdlePeriod = d
		}
	}
	return a
}

func (p *parser) fallback() *Fallback {
	replicas, hasReplicas := p.ann[AnnotationFallbackReplicas]
	behavior, hasBehavior := p.ann[AnnotationFallbackBehavior]
	if !hasReplicas && !hasBehavior {
		p.needs(AnnotationFallbackReplicas, AnnotationFallbackAfter, AnnotationFallbackOn)
		return nil
	}
	f := &Fallback{After: DefaultFallbackAfter, Behavior: FallbackStatic, On: FallbackOnAll}
	if hasBehavior {
		b := FallbackBehavior(strings.TrimSpace(behavior))
		if !slices.Contains(fallbackBehaviors, b) {
			p.bad(AnnotationFallbackBehavior, "want one of %s", joinQuoted(fallbackBehaviors))
		}
		f.Behavior = b
	}
	switch {
	case hasReplicas:
		n, err := strconv.ParseInt(strings.TrimSpace(replicas), 10, 32)
		switch {
		case err != nil:
			p.bad(AnnotationFallbackReplicas, "not a whole number: %v", numErr(err))
		case int32(n) < p.minR || int32(n) > p.hpa.Spec.MaxReplicas:
			// Outside the range kube-controller-manager would move it
			// back at once (it enforces min/max even without metrics).
			p.bad(AnnotationFallbackReplicas, "must be within the HPA's minReplicas %d and maxReplicas %d", p.minR, p.hpa.Spec.MaxReplicas)
		default:
			f.Replicas = int32(n)
		}
	case f.Behavior != FallbackCurrentReplicas:
		p.bad(AnnotationFallbackBehavior, "%s needs %s", f.Behavior, AnnotationFallbackReplicas)
	}
	if v, ok := p.ann[AnnotationFallbackAfter]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		switch {
		case err != nil:
			p.bad(AnnotationFallbackAfter, "not a whole number: %v", numErr(err))
		case n < 1:
			p.bad(AnnotationFallbackAfter, "must be at least 1")
		default:
			f.After = int32(n)
		}
	}
	if v, ok := p.ann[AnnotationFallbackOn]; ok {
		f.On = FallbackOn(strings.TrimSpace(v))
		if f.On != FallbackOnAll && f.On != FallbackOnAny {
			p.bad(AnnotationFallbackOn, "want %q or %q", FallbackOnAll, FallbackOnAny)
		}
	}
	return f
}

// pause reads the four pause annotations; nil when none pauses.
func (p *parser) pause() *Pause {
	var ps Pause
	flag := func(name string) bool {
		v, ok := p.ann[name]
		if !ok {
			return false
		}
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			return true
		case "false":
			return false
		}
		p.bad(name, "want \"true\" or \"false\"")
		return false
	}
	all := flag(AnnotationPaused)
	ps.ScaleIn = flag(AnnotationPausedScaleIn) || all
	ps.ScaleOut = flag(AnnotationPausedScaleOut) || all
	ps.Hold = all
	if v, ok := p.ann[AnnotationPausedReplicas]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		switch {
		case err != nil:
			p.bad(AnnotationPausedReplicas, "not a whole number: %v", numErr(err))
		case n < 0 || int32(n) > p.hpa.Spec.MaxReplicas:
			p.bad(AnnotationPausedReplicas, "must be within 0 and the HPA's maxReplicas %d", p.hpa.Spec.MaxReplicas)
		default:
			ps.Replicas = ptr.To(int32(n))
			ps.Hold, ps.ScaleIn, ps.ScaleOut = true, true, true
		}
	}
	if !ps.ScaleIn && !ps.ScaleOut {
		return nil
	}
	return &ps
}

func joinQuoted[T ~string](vs []T) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(string(v))
	}
	return strings.Join(q, ", ")
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
	// State is a Phase ("Idle" is reported as "Active"), "Invalid" or "Off".
	State string `json:"state"`
	// LastAction, LastActionTime and Reason describe the last action.
	LastAction     Action `json:"lastAction,omitempty"`
	LastActionTime string `json:"lastActionTime,omitempty"`
	Reason         string `json:"reason,omitempty"`
	// Valid is a condition: AnnotationsValid True, or False with the
	// reason InvalidAnnotation and a message naming each annotation and
	// its problem.
	Valid Condition `json:"annotationsValid"`
	// Pause says what the pause annotations hold back ("scale-in",
	// "scale-out", "all", "replicas N"); empty when not paused.
	Pause string `json:"pause,omitempty"`
	// Warnings name unknown promscaler.io annotations (see Unknown).
	Warnings []string `json:"warnings,omitempty"`
}

// Condition is a condition-like record.
type Condition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Messages are the problems' texts.
func Messages(problems []Problem) []string {
	var out []string
	for _, p := range problems {
		out = append(out, p.Error())
	}
	return out
}

// StateInvalid is Status.State when the annotations are invalid.
const StateInvalid = "Invalid"

// StateOff is Status.State of an HPA that no longer carries promscaler.io
// annotations (the status annotation is the last one left).
const StateOff = "Off"

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
