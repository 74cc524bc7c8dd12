package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/promscaler/promscaler/pkg/autoscaler"
)

// Result is a whole replay. Its JSON form is the stable output of
// `autoscaler simulate -o json`, documented in docs/simulate.md.
type Result struct {
	// HPA is "namespace/name".
	HPA string `json:"hpa"`
	// Start is the wall-clock time of offset 0.
	Start time.Time `json:"start"`
	// Steps has one entry per scenario step, in order.
	Steps []StepResult `json:"steps"`
}

// StepResult is one reconcile.
type StepResult struct {
	// Step is the step's index; At its offset; Time the wall-clock time.
	Step int       `json:"step"`
	At   string    `json:"at"`
	Time time.Time `json:"time"`
	// CurrentReplicas is the target's spec.replicas the reconcile saw;
	// StatusReplicas its status.replicas.
	CurrentReplicas int32 `json:"currentReplicas"`
	StatusReplicas  int32 `json:"statusReplicas"`
	// Pods counts the pods the selector matched, and how many were ready.
	Pods autoscaler.PodCount `json:"pods"`
	// Metrics has one entry per metric spec (absent when the metrics were
	// not evaluated: current count out of range, or scaling disabled).
	Metrics []MetricResult `json:"metrics,omitempty"`
	// ProposedReplicas is the count the metrics asked for, before
	// normalization (the largest valid proposal); absent when none.
	ProposedReplicas *int32 `json:"proposedReplicas,omitempty"`
	// StabilizedReplicas is the proposal after the stabilization window(s),
	// before rate limits and min/max; absent when there was no proposal.
	StabilizedReplicas *int32 `json:"stabilizedReplicas,omitempty"`
	// DesiredReplicas is status.desiredReplicas after the reconcile: the
	// normalized count (stabilization, rate policies, min/max).
	DesiredReplicas int32 `json:"desiredReplicas"`
	// Rescaled reports whether /scale was updated; Replicas is the
	// target's spec.replicas after the step.
	Rescaled bool  `json:"rescaled"`
	Replicas int32 `json:"replicas"`
	// Reason is the rescale reason, as in the SuccessfulRescale event.
	Reason string `json:"reason,omitempty"`
	// Conditions are the HPA's status conditions after the step.
	Conditions []Condition `json:"conditions"`
	// Events are the events the controller would record.
	Events []autoscaler.Event `json:"events,omitempty"`
	// Error is the reconcile error, if any.
	Error string `json:"error,omitempty"`
	// Scaler is promscaler's coexistence decision after
	// kube-controller-manager's reconcile (HPAs with promscaler.io
	// annotations only); Replicas then counts its /scale write too.
	Scaler *ScalerResult `json:"scaler,omitempty"`
	// History is the controllers' memory after the step (with --history).
	History *HistoryResult `json:"history,omitempty"`
}

// ScalerResult is one decision of pkg/scaletozero.
type ScalerResult struct {
	// Phase is the state after the step: Active, Idle, ScaledToZero or
	// Fallback; Failures the consecutive failed periods.
	Phase    string `json:"phase"`
	Failures int32  `json:"failures,omitempty"`
	// Action is what it did (Activated, ScaledToZero, FallbackApplied,
	// FallbackEnded), Scale the replica count it wrote.
	Action string `json:"action,omitempty"`
	Scale  *int32 `json:"scale,omitempty"`
	// Reason explains the action or the phase.
	Reason string `json:"reason"`
	// Error is the step's scaleError when the write failed.
	Error string `json:"error,omitempty"`
}

// HistoryResult is what the controllers keep in memory; times are offsets
// from start.
type HistoryResult struct {
	// Recommendations are kube-controller-manager's unstabilized
	// recommendations, oldest slot first (expired slots are reused).
	Recommendations []HistoryRecommendation `json:"recommendations"`
	// ScaleUpEvents and ScaleDownEvents are its recorded rescales.
	ScaleUpEvents   []HistoryEvent `json:"scaleUpEvents,omitempty"`
	ScaleDownEvents []HistoryEvent `json:"scaleDownEvents,omitempty"`
	// Scaler is promscaler's coexistence state (annotated HPAs).
	Scaler *HistoryScaler `json:"scaler,omitempty"`
}

// HistoryRecommendation is one recommendation.
type HistoryRecommendation struct {
	At       string `json:"at"`
	Replicas int32  `json:"replicas"`
}

// HistoryEvent is one rescale; Outdated marks a slot free for reuse.
type HistoryEvent struct {
	At       string `json:"at"`
	Change   int32  `json:"change"`
	Outdated bool   `json:"outdated,omitempty"`
}

// HistoryScaler is promscaler's state for an annotated HPA.
type HistoryScaler struct {
	Phase     string `json:"phase"`
	IdleSince string `json:"idleSince,omitempty"`
	Failures  int32  `json:"failures,omitempty"`
}

// MetricResult is one metric's evaluation.
type MetricResult struct {
	// Index is the position in spec.metrics; Key the scenario's name for
	// it; Type the source type.
	Index int    `json:"index"`
	Key   string `json:"key"`
	Type  string `json:"type"`
	// Name is upstream's description, used in reasons.
	Name string `json:"name,omitempty"`
	// ProposedReplicas is this metric's replica count; absent on error.
	ProposedReplicas *int32 `json:"proposedReplicas,omitempty"`
	// Current is the metric's current value as status.currentMetrics shows
	// it (averageUtilization, averageValue or value).
	Current *autoscalingv2.MetricValueStatus `json:"current,omitempty"`
	// UsageRatio is current/target; AdjustedUsageRatio the ratio after
	// missing and unready pods were filled in, when they were. Absent when
	// not a finite number (a per-pod target at zero replicas).
	UsageRatio         *float64 `json:"usageRatio,omitempty"`
	AdjustedUsageRatio *float64 `json:"adjustedUsageRatio,omitempty"`
	// Pods is how pods were grouped (per-pod metrics).
	Pods *autoscaler.PodGroups `json:"pods,omitempty"`
	// Error is why the metric gave no proposal.
	Error string `json:"error,omitempty"`
}

// Condition is an HPA condition.
type Condition struct {
	// Type, Status, Reason, Message and LastTransitionTime are the
	// condition's fields as the HPA status holds them.
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

func stepResult(i int, at Duration, now time.Time, current, statusReplicas int32, pods []*v1.Pod, specs []autoscalingv2.MetricSpec, d autoscaler.Decision, replicasAfter int32) StepResult {
	r := StepResult{
		Step: i, At: at.String(), Time: now,
		CurrentReplicas: current, StatusReplicas: statusReplicas,
		Pods:            autoscaler.CountPods(pods),
		DesiredReplicas: d.Status.DesiredReplicas,
		Rescaled:        d.Rescale && replicasAfter == d.DesiredReplicas && replicasAfter != current,
		Replicas:        replicasAfter,
		Reason:          d.Reason,
		Conditions:      []Condition{},
		Events:          d.Events,
	}
	if d.MetricsComputed && d.MetricReplicas >= 0 {
		r.ProposedReplicas = ptr.To(d.MetricReplicas)
	}
	if d.StabilizedReplicas >= 0 {
		r.StabilizedReplicas = ptr.To(d.StabilizedReplicas)
	}
	for j, m := range d.Metrics {
		mr := MetricResult{Index: j, Key: metricKey(specs[j]), Type: string(specs[j].Type), Name: m.Name, Pods: m.Pods}
		if m.Err != nil {
			mr.Error = m.Err.Error()
		} else {
			mr.ProposedReplicas = ptr.To(m.Replicas)
			mr.Current = autoscaler.CurrentValue(m.Status)
			mr.UsageRatio = autoscaler.RoundRatio(m.UsageRatio)
			if m.AdjustedUsageRatio != 0 {
				mr.AdjustedUsageRatio = autoscaler.RoundRatio(m.AdjustedUsageRatio)
			}
		}
		r.Metrics = append(r.Metrics, mr)
	}
	for _, c := range d.Status.Conditions {
		r.Conditions = append(r.Conditions, Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message, LastTransitionTime: c.LastTransitionTime.UTC()})
	}
	if d.Err != nil {
		r.Error = d.Err.Error()
	}
	return r
}

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("writing result: %w", err)
	}
	return nil
}

// WriteTable writes one line per step: replicas, each metric's current
// value and proposal, the count proposed, after stabilization and after
// normalization, the reason and the conditions.
func (r *Result) WriteTable(w io.Writer) error {
	scaler := false
	for _, s := range r.Steps {
		scaler = scaler || s.Scaler != nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "STEP\tAT\tREPLICAS\tPODS(READY)\tMETRICS\tPROPOSED\tSTABILIZED\tDESIRED\tREASON\tCONDITIONS"
	if scaler {
		header += "\tPROMSCALER"
	}
	fmt.Fprintln(tw, header)
	for _, s := range r.Steps {
		var metrics []string
		for _, m := range s.Metrics {
			metrics = append(metrics, metricCell(m))
		}
		if len(metrics) == 0 {
			metrics = []string{"-"}
		}
		proposed, stabilized := "-", "-"
		if s.ProposedReplicas != nil {
			proposed = fmt.Sprint(*s.ProposedReplicas)
		}
		if s.StabilizedReplicas != nil {
			stabilized = fmt.Sprint(*s.StabilizedReplicas)
		}
		desired := fmt.Sprint(s.DesiredReplicas)
		if s.Rescaled {
			desired += " (scaled)"
		}
		var conds []string
		for _, c := range s.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
		reason := s.Reason
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d(%d)\t%s\t%s\t%s\t%s\t%s\t%s", s.Step, s.At, s.CurrentReplicas, s.Pods.Total, s.Pods.Ready,
			strings.Join(metrics, "; "), proposed, stabilized, desired, reason, strings.Join(conds, " "))
		if scaler {
			fmt.Fprintf(tw, "\t%s", scalerCell(s.Scaler))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing result: %w", err)
	}
	return r.writeHistory(w)
}

// scalerCell is "Phase", "Phase Action->N" or with the failures count.
func scalerCell(s *ScalerResult) string {
	if s == nil {
		return "-"
	}
	cell := s.Phase
	if s.Failures > 0 {
		cell += fmt.Sprintf("(failures:%d)", s.Failures)
	}
	if s.Action != "" {
		cell += " " + s.Action
	}
	if s.Scale != nil {
		cell += fmt.Sprintf("->%d", *s.Scale)
		if s.Error != "" {
			cell += " (failed)"
		}
	}
	return cell
}

// writeHistory lists the controllers' memory after each step, when the
// result carries it (--history).
func (r *Result) writeHistory(w io.Writer) error {
	var b strings.Builder
	for _, s := range r.Steps {
		h := s.History
		if h == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nHISTORY after each step (offsets from start)\n")
		}
		var recs []string
		for _, rec := range h.Recommendations {
			recs = append(recs, fmt.Sprintf("%d@%s", rec.Replicas, rec.At))
		}
		fmt.Fprintf(&b, "%d  recommendations: [%s]", s.Step, strings.Join(recs, " "))
		for _, ev := range []struct {
			name   string
			events []HistoryEvent
		}{{"scale-up events", h.ScaleUpEvents}, {"scale-down events", h.ScaleDownEvents}} {
			if len(ev.events) == 0 {
				continue
			}
			var es []string
			for _, e := range ev.events {
				x := fmt.Sprintf("%d@%s", e.Change, e.At)
				if e.Outdated {
					x += "(outdated)"
				}
				es = append(es, x)
			}
			fmt.Fprintf(&b, "; %s: [%s]", ev.name, strings.Join(es, " "))
		}
		if sc := h.Scaler; sc != nil {
			fmt.Fprintf(&b, "; promscaler: %s", sc.Phase)
			if sc.IdleSince != "" {
				fmt.Fprintf(&b, " since %s", sc.IdleSince)
			}
			if sc.Failures > 0 {
				fmt.Fprintf(&b, " failures %d", sc.Failures)
			}
		}
		b.WriteString("\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing result: %w", err)
	}
	return nil
}

func metricCell(m MetricResult) string {
	if m.Error != "" {
		return m.Key + ": error"
	}
	cur := "?"
	if c := m.Current; c != nil {
		switch {
		case c.AverageUtilization != nil:
			cur = fmt.Sprintf("%d%%", *c.AverageUtilization)
		case c.AverageValue != nil:
			cur = c.AverageValue.String() + "/pod"
		case c.Value != nil:
			cur = c.Value.String()
		}
	}
	cell := fmt.Sprintf("%s=%s->%d", m.Key, cur, *m.ProposedReplicas)
	if p := m.Pods; p != nil && (len(p.Unready)+len(p.Missing)+len(p.Ignored)) > 0 {
		cell += fmt.Sprintf(" [unready:%d missing:%d ignored:%d]", len(p.Unready), len(p.Missing), len(p.Ignored))
	}
	return cell
}
