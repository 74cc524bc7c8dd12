package hpaexplain

import (
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

// Explanation is one explained decision. Its JSON form is the output of
// `autoscaler explain -o json` (docs/explain.md); fields are only added.
type Explanation struct {
	// HPA is "namespace/name"; Time when the explanation was made.
	HPA  string    `json:"hpa"`
	Time time.Time `json:"time"`
	// Target is the scale target as its /scale read.
	Target Target `json:"target"`
	// MinReplicas and MaxReplicas are the HPA's bounds (minReplicas
	// defaulted to 1).
	MinReplicas int32 `json:"minReplicas"`
	MaxReplicas int32 `json:"maxReplicas"`
	// Tolerance is the usage-ratio band that changes nothing.
	Tolerance Tolerance `json:"tolerance"`
	// Pods counts the pods the target's selector matched, and the Running
	// and Ready ones among them.
	Pods autoscaler.PodCount `json:"pods"`
	// MetricsSkipped says why the metrics were not evaluated (the current
	// count is out of [min, max], or scaling is disabled at zero).
	MetricsSkipped string `json:"metricsSkipped,omitempty"`
	// Metrics has one entry per metric spec.
	Metrics []Metric `json:"metrics,omitempty"`
	// ProposedReplicas is the largest valid proposal and ProposingMetric
	// the metric that made it; absent when the metrics gave none.
	ProposedReplicas *int32 `json:"proposedReplicas,omitempty"`
	ProposingMetric  string `json:"proposingMetric,omitempty"`
	// Normalization is how the proposal was normalized, absent when it
	// was not.
	Normalization *Normalization `json:"normalization,omitempty"`
	// DesiredReplicas is the count the controller would set now, Rescale
	// whether that changes the target, Reason upstream's rescale reason.
	DesiredReplicas int32  `json:"desiredReplicas"`
	Rescale         bool   `json:"rescale"`
	Reason          string `json:"reason,omitempty"`
	// Conditions are the status conditions the reconcile would write.
	Conditions []Condition `json:"conditions"`
	// Events are the events it would record.
	Events []autoscaler.Event `json:"events,omitempty"`
	// History is what the controller's in-memory history could change.
	History History `json:"history"`
	// Error is the reconcile's error, if any.
	Error string `json:"error,omitempty"`
	// Promscaler is what the HPA's promscaler.io annotations ask of the
	// coexistence autoscaler; absent without them.
	Promscaler *Promscaler `json:"promscaler,omitempty"`
}

// Promscaler is the parsed promscaler.io annotations of an HPA.
type Promscaler struct {
	// Settings are "annotation: meaning" lines for each valid setting.
	Settings []string `json:"settings,omitempty"`
	// Problems name each invalid annotation (nothing then applies), and
	// Unknown each unknown promscaler.io annotation.
	Problems []string `json:"problems,omitempty"`
	Unknown  []string `json:"unknown,omitempty"`
	// Status is the status annotation the autoscaler last wrote.
	Status string `json:"status,omitempty"`
}

// promscalerOf parses the HPA's promscaler.io annotations.
func promscalerOf(hpa *autoscalingv2.HorizontalPodAutoscaler) *Promscaler {
	if !scaletozero.Annotated(hpa.Annotations) {
		return nil
	}
	spec, problems := scaletozero.Parse(hpa)
	ps := &Promscaler{Problems: scaletozero.Messages(problems), Unknown: scaletozero.Messages(scaletozero.Unknown(hpa.Annotations)),
		Status: hpa.Annotations[scaletozero.AnnotationStatus]}
	if len(problems) > 0 {
		return ps
	}
	if a := spec.Activation; a != nil {
		ps.Settings = append(ps.Settings, fmt.Sprintf("scale to zero: after %v at minReplicas with %s at or below %gm; back to minReplicas above it", a.IdlePeriod, a.Metric, float64(a.ThresholdMilli)))
	}
	if f := spec.Fallback; f != nil {
		ps.Settings = append(ps.Settings, fmt.Sprintf("fallback: %s (replicas %d) after %d failed periods, a period failing on %s metrics", f.Behavior, f.Replicas, f.After, f.On))
	}
	if pz := spec.Pause; pz != nil {
		ps.Settings = append(ps.Settings, fmt.Sprintf("paused: %s (kube-controller-manager is held back only with the promscaler-pause admission policy)", pz))
	}
	return ps
}

// Target is the scale target.
type Target struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// SpecReplicas and StatusReplicas are /scale's spec.replicas and
	// status.replicas; Selector its status.selector.
	SpecReplicas   int32  `json:"specReplicas"`
	StatusReplicas int32  `json:"statusReplicas"`
	Selector       string `json:"selector"`
}

// Tolerance is the band [1-scaleDown, 1+scaleUp] of usage ratios that
// change nothing.
type Tolerance struct {
	ScaleDown float64 `json:"scaleDown"`
	ScaleUp   float64 `json:"scaleUp"`
}

// Metric is one metric spec's evaluation.
type Metric struct {
	// Index is the position in spec.metrics; Type the source type.
	Index int    `json:"index"`
	Type  string `json:"type"`
	// Name describes the metric as upstream's reasons do.
	Name string `json:"name"`
	// Target describes the spec's target.
	Target string `json:"target"`
	// Current is the value as status.currentMetrics would show it.
	Current *autoscalingv2.MetricValueStatus `json:"current,omitempty"`
	// Pods is how the pods were grouped (per-pod metrics).
	Pods *autoscaler.PodGroups `json:"pods,omitempty"`
	// UsageRatio is current/target; AdjustedUsageRatio the ratio once
	// missing and unready pods were filled in, when they were.
	UsageRatio         *float64 `json:"usageRatio,omitempty"`
	AdjustedUsageRatio *float64 `json:"adjustedUsageRatio,omitempty"`
	// WithinTolerance reports whether the (adjusted) ratio is within the
	// tolerance band; absent when no tolerance applies (from zero replicas).
	WithinTolerance *bool `json:"withinTolerance,omitempty"`
	// ProposedReplicas is this metric's proposal; absent on error.
	ProposedReplicas *int32 `json:"proposedReplicas,omitempty"`
	// Error is why the metric gave no proposal.
	Error string `json:"error,omitempty"`
}

// Normalization is what stabilization and the rate limits did.
type Normalization struct {
	// Behavior reports whether spec.behavior's rules applied.
	Behavior bool `json:"behavior"`
	// StabilizedReplicas is the proposal after the stabilization windows,
	// as far as this explanation can know them (see History).
	StabilizedReplicas int32 `json:"stabilizedReplicas"`
	// ScaleUpWindow and ScaleDownWindow are the stabilization windows.
	ScaleUpWindow   string `json:"scaleUpWindow"`
	ScaleDownWindow string `json:"scaleDownWindow"`
	// ScaleUpLimit is the highest count the scale-up rate allows from the
	// current count; ScaleDownLimit the lowest the scale-down policies
	// allow (absent without behavior, where only minReplicas bounds it).
	ScaleUpLimit   int32  `json:"scaleUpLimit"`
	ScaleDownLimit *int32 `json:"scaleDownLimit,omitempty"`
	// ScaleUp and ScaleDown are the behavior rules, defaults applied.
	ScaleUp   *autoscalingv2.HPAScalingRules `json:"scaleUp,omitempty"`
	ScaleDown *autoscalingv2.HPAScalingRules `json:"scaleDown,omitempty"`
	// LimitReason is the ScalingLimited condition's reason.
	LimitReason string `json:"limitReason"`
}

// History is what the controller keeps in memory, not in the API, and
// could change the decision.
type History struct {
	// LastScaleTime is status.lastScaleTime; StatusDesiredReplicas the
	// status.desiredReplicas of the controller's last reconcile.
	LastScaleTime         *time.Time `json:"lastScaleTime,omitempty"`
	StatusDesiredReplicas int32      `json:"statusDesiredReplicas"`
	// Notes say, each in one sentence, what that history could hold back.
	Notes []string `json:"notes"`
}

// Condition is an HPA condition the reconcile would write.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func newExplanation(hpa *autoscalingv2.HorizontalPodAutoscaler, a *autoscaler.Autoscaler, now time.Time) *Explanation {
	ref := hpa.Spec.ScaleTargetRef
	minR := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minR = *hpa.Spec.MinReplicas
	}
	t := a.Tolerances(hpa)
	x := &Explanation{
		HPA:         hpa.Namespace + "/" + hpa.Name,
		Time:        now.UTC(),
		Target:      Target{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name},
		MinReplicas: minR,
		MaxReplicas: hpa.Spec.MaxReplicas,
		Tolerance:   Tolerance{ScaleDown: t.ScaleDown, ScaleUp: t.ScaleUp},
		Conditions:  []Condition{},
		History:     History{StatusDesiredReplicas: hpa.Status.DesiredReplicas, Notes: []string{}},
	}
	if hpa.Status.LastScaleTime != nil {
		lt := hpa.Status.LastScaleTime.UTC()
		x.History.LastScaleTime = &lt
	}
	x.Promscaler = promscalerOf(hpa)
	return x
}

// fill completes the explanation from the decision.
func (x *Explanation) fill(hpa *autoscalingv2.HorizontalPodAutoscaler, a *autoscaler.Autoscaler, d *autoscaler.Decision, pods []*v1.Pod) {
	x.Pods = autoscaler.CountPods(pods)
	x.DesiredReplicas, x.Rescale, x.Reason, x.Events = d.DesiredReplicas, d.Rescale, d.Reason, d.Events
	if d.Err != nil && x.Error == "" {
		x.Error = d.Err.Error()
	}
	for _, c := range d.Status.Conditions {
		x.Conditions = append(x.Conditions, Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	if !d.MetricsComputed {
		if x.MetricsSkipped == "" {
			x.MetricsSkipped = skipped(x, d)
		}
		return
	}
	tol := a.Tolerances(hpa)
	specs := autoscaler.MetricSpecs(hpa)
	for i, m := range d.Metrics {
		spec := specs[i]
		mx := Metric{Index: i, Type: string(spec.Type), Name: m.Name, Target: describeTarget(spec), Pods: m.Pods}
		if m.Err != nil {
			mx.Name = describeSpec(spec)
			mx.Error = m.Err.Error()
		} else {
			mx.ProposedReplicas = ptr.To(m.Replicas)
			mx.Current = autoscaler.CurrentValue(m.Status)
			mx.UsageRatio = autoscaler.RoundRatio(m.UsageRatio)
			r := m.UsageRatio
			if m.AdjustedUsageRatio != 0 {
				mx.AdjustedUsageRatio = autoscaler.RoundRatio(m.AdjustedUsageRatio)
				r = m.AdjustedUsageRatio
			}
			if !(d.CurrentReplicas == 0 && isValueTarget(spec)) {
				mx.WithinTolerance = ptr.To(tol.IsWithin(r))
			}
		}
		x.Metrics = append(x.Metrics, mx)
	}
	if d.MetricReplicas >= 0 {
		x.ProposedReplicas, x.ProposingMetric = ptr.To(d.MetricReplicas), d.Metric
	}
	if n := d.Normalization; n != nil {
		xn := &Normalization{
			Behavior:           n.Behavior,
			StabilizedReplicas: n.Stabilized,
			ScaleUpWindow:      n.ScaleUpWindow.String(),
			ScaleDownWindow:    n.ScaleDownWindow.String(),
			ScaleUpLimit:       n.ScaleUpLimit,
			LimitReason:        n.LimitReason,
		}
		if n.ScaleDownLimit >= 0 {
			xn.ScaleDownLimit = ptr.To(n.ScaleDownLimit)
		}
		if n.Behavior {
			h := hpa.DeepCopy()
			autoscaler.ApplyDefaults(h)
			xn.ScaleUp, xn.ScaleDown = h.Spec.Behavior.ScaleUp, h.Spec.Behavior.ScaleDown
		}
		x.Normalization = xn
		x.History.Notes = historyNotes(x, hpa, n)
	}
}

// skipped says why the metrics were not evaluated.
func skipped(x *Explanation, d *autoscaler.Decision) string {
	cur := d.CurrentReplicas
	switch {
	case cur == 0:
		return "the target has 0 replicas: scaling is disabled (ScalingDisabled) unless the HPA itself scaled it to zero"
	case cur > x.MaxReplicas:
		return fmt.Sprintf("the target has %d replicas, above maxReplicas %d: it is set to maxReplicas without reading metrics", cur, x.MaxReplicas)
	case cur < x.MinReplicas:
		return fmt.Sprintf("the target has %d replicas, below minReplicas %d: it is set to minReplicas without reading metrics", cur, x.MinReplicas)
	}
	return "the metrics were not evaluated"
}

// historyNotes says what the controller's recommendations and scale
// events, which it keeps in memory, could change in this decision.
func historyNotes(x *Explanation, hpa *autoscalingv2.HorizontalPodAutoscaler, n *autoscaler.Normalization) []string {
	notes := []string{}
	cur := x.Target.SpecReplicas
	proposal := *x.ProposedReplicas
	switch {
	case proposal < cur:
		notes = append(notes, fmt.Sprintf("A scale-down goes no lower than the highest recommendation kube-controller-manager made in the last %v (scale-down stabilization window); those recommendations are in its memory, not in the API, so the count may stay up to %d until %v after the metrics dropped.", n.ScaleDownWindow, cur, n.ScaleDownWindow))
		if age := x.Time.Sub(hpa.CreationTimestamp.Time); !hpa.CreationTimestamp.IsZero() && age < n.ScaleDownWindow {
			notes = append(notes, fmt.Sprintf("The HPA is %v old, younger than that window: the controller's first reconcile recorded the replica count it found as a recommendation, which holds a scale-down below it until %v after the HPA's creation.", age.Round(time.Second), n.ScaleDownWindow))
		}
	case proposal > cur && n.ScaleUpWindow > 0:
		notes = append(notes, fmt.Sprintf("A scale-up goes no higher than the lowest recommendation kube-controller-manager made in the last %v (scale-up stabilization window); those recommendations are in its memory, so the count may stay lower for up to %v.", n.ScaleUpWindow, n.ScaleUpWindow))
	}
	if !n.Behavior && proposal >= cur {
		notes = append(notes, fmt.Sprintf("A recommendation above %d made in the last %v (for example one a rate limit capped) would raise the count to it: kube-controller-manager keeps its recommendations in memory.", proposal, n.ScaleDownWindow))
	}
	if n.Behavior {
		var longest int32
		for _, rules := range []*autoscalingv2.HPAScalingRules{x.Normalization.ScaleUp, x.Normalization.ScaleDown} {
			for _, p := range rules.Policies {
				longest = max(longest, p.PeriodSeconds)
			}
		}
		period := time.Duration(longest) * time.Second
		if lt := x.History.LastScaleTime; lt != nil && x.Time.Sub(*lt) < period {
			notes = append(notes, fmt.Sprintf("The target was last rescaled %v ago (status.lastScaleTime), within the policies' %v period: the rescales kube-controller-manager remembers lower the rate limits shown here, which count none.", x.Time.Sub(*lt).Round(time.Second), period))
		} else {
			notes = append(notes, fmt.Sprintf("The rate limits shown count no earlier rescale: status.lastScaleTime is older than the policies' longest period (%v), so none should count.", period))
		}
	}
	return notes
}

// isValueTarget reports whether spec is an Object or External metric with
// a Value target, whose proposal from zero replicas ignores the tolerance.
func isValueTarget(spec autoscalingv2.MetricSpec) bool {
	switch {
	case spec.Object != nil:
		return spec.Object.Target.Type == autoscalingv2.ValueMetricType
	case spec.External != nil:
		return spec.External.Target.Type == autoscalingv2.ValueMetricType
	}
	return false
}

// describeSpec names a metric spec when the core gave no description.
func describeSpec(s autoscalingv2.MetricSpec) string {
	switch {
	case s.Resource != nil:
		return fmt.Sprintf("%s resource", s.Resource.Name)
	case s.ContainerResource != nil:
		return fmt.Sprintf("%s resource of container %s", s.ContainerResource.Name, s.ContainerResource.Container)
	case s.Pods != nil:
		return "pods metric " + s.Pods.Metric.Name
	case s.Object != nil:
		return fmt.Sprintf("%s metric %s", s.Object.DescribedObject.Kind, s.Object.Metric.Name)
	case s.External != nil:
		return "external metric " + s.External.Metric.Name
	}
	return string(s.Type) + " metric"
}

// describeTarget says what the spec's target is.
func describeTarget(s autoscalingv2.MetricSpec) string {
	var t autoscalingv2.MetricTarget
	perPodOf := "per pod"
	switch {
	case s.Resource != nil:
		t = s.Resource.Target
	case s.ContainerResource != nil:
		t = s.ContainerResource.Target
	case s.Pods != nil:
		t = s.Pods.Target
	case s.Object != nil:
		t = s.Object.Target
		perPodOf = fmt.Sprintf("per pod (the value of %s/%s divided by status.replicas)", s.Object.DescribedObject.Kind, s.Object.DescribedObject.Name)
	case s.External != nil:
		t = s.External.Target
		perPodOf = "per pod (the sum of the series divided by status.replicas)"
	default:
		return "-"
	}
	switch {
	case t.AverageUtilization != nil && t.Type == autoscalingv2.UtilizationMetricType:
		return fmt.Sprintf("%d%% of the pods' requests on average", *t.AverageUtilization)
	case t.AverageValue != nil && t.Type == autoscalingv2.AverageValueMetricType:
		return fmt.Sprintf("%s %s", t.AverageValue.String(), perPodOf)
	case t.Value != nil && t.Type == autoscalingv2.ValueMetricType:
		if s.External != nil {
			return t.Value.String() + " in total (the sum of the series)"
		}
		return t.Value.String() + " in total"
	}
	return "invalid target"
}
