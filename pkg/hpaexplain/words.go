package hpaexplain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// WriteJSON writes the explanation as indented JSON.
func (x *Explanation) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return fmt.Errorf("writing explanation: %w", err)
	}
	return nil
}

// WriteText writes the explanation in words, one numbered step per stage
// of the controller's reconcile.
func (x *Explanation) WriteText(w io.Writer) error {
	p := &printer{w: w}
	t := x.Target
	p.f("HPA %s, target %s %s (%s), at %s\n", x.HPA, t.Kind, t.Name, t.APIVersion, x.Time.Format("2006-01-02T15:04:05Z07:00"))
	p.f("\n")
	if x.MetricsSkipped == errScaleRead {
		p.f("1. Target: its /scale could not be read.\n")
	} else {
		p.f("1. Target: spec.replicas %d, status.replicas %d, selector %q; %d pods matched, %d running and ready.\n",
			t.SpecReplicas, t.StatusReplicas, t.Selector, x.Pods.Total, x.Pods.Ready)
	}
	p.f("   Range: minReplicas %d, maxReplicas %d. Tolerance: usage ratios within [%s, %s] change nothing.\n",
		x.MinReplicas, x.MaxReplicas, num(1-x.Tolerance.ScaleDown), num(1+x.Tolerance.ScaleUp))
	x.writePromscaler(p)
	if x.MetricsSkipped != "" {
		p.f("2. Metrics: not read: %s.\n", x.MetricsSkipped)
		x.writeDecision(p, 3)
		return p.err
	}
	p.f("2. Metrics (%d):\n", len(x.Metrics))
	for _, m := range x.Metrics {
		x.writeMetric(p, m)
	}
	step := 3
	if x.ProposedReplicas == nil {
		p.f("%d. Proposal: none; the metrics that failed block the decision (a scale-down needs every metric; nothing is changed).\n", step)
		x.writeDecision(p, step+1)
		return p.err
	}
	p.f("%d. Proposal: %d replicas, the largest of the metrics' proposals (%s).\n", step, *x.ProposedReplicas, x.ProposingMetric)
	step++
	if n := x.Normalization; n != nil {
		x.writeNormalization(p, n, step)
		step += 2
	}
	x.writeDecision(p, step)
	return p.err
}

func (x *Explanation) writeMetric(p *printer, m Metric) {
	p.f("   [%d] %s (%s), target %s\n", m.Index, m.Name, m.Type, m.Target)
	if g := m.Pods; g != nil {
		p.f("       pods: %d ready; unready: %s; missing: %s; ignored: %s\n", g.Ready, names(g.Unready), names(g.Missing), names(g.Ignored))
	}
	if m.Error != "" {
		p.f("       error: %s\n", m.Error)
		p.f("       no proposal\n")
		return
	}
	if c := m.Current; c != nil {
		var parts []string
		if c.AverageUtilization != nil {
			parts = append(parts, fmt.Sprintf("%d%% of requests", *c.AverageUtilization))
		}
		if c.AverageValue != nil {
			parts = append(parts, c.AverageValue.String()+" per pod")
		}
		if c.Value != nil {
			parts = append(parts, c.Value.String())
		}
		p.f("       current: %s\n", strings.Join(parts, ", "))
	}
	if m.UsageRatio != nil {
		line := fmt.Sprintf("       usage ratio (current/target): %s", num(*m.UsageRatio))
		if m.AdjustedUsageRatio != nil {
			line += fmt.Sprintf("; %s once unready and missing pods are filled in (missing pods count as using the target on a scale-down and nothing on a scale-up, unready ones as nothing on a scale-up)", num(*m.AdjustedUsageRatio))
		}
		p.f("%s\n", line)
	}
	switch {
	case m.WithinTolerance == nil:
		p.f("       from zero replicas the ratio applies without tolerance\n")
	case *m.WithinTolerance:
		p.f("       within the tolerance band: this metric keeps %d replicas\n", *m.ProposedReplicas)
	default:
		p.f("       outside the tolerance band\n")
	}
	p.f("       proposes %d replicas\n", *m.ProposedReplicas)
}

func (x *Explanation) writeNormalization(p *printer, n *Normalization, step int) {
	cur := x.Target.SpecReplicas
	if n.Behavior {
		p.f("%d. Stabilization (behavior): scale-up window %s, scale-down window %s; recommendation %d.\n", step, n.ScaleUpWindow, n.ScaleDownWindow, n.StabilizedReplicas)
		p.f("%d. Rate limits (behavior, from %d replicas): scale-up to at most %d (%s); scale-down to no fewer than %d (%s).\n",
			step+1, cur, n.ScaleUpLimit, policies(n.ScaleUp.SelectPolicy, n.ScaleUp.Policies), deref(n.ScaleDownLimit), policies(n.ScaleDown.SelectPolicy, n.ScaleDown.Policies))
	} else {
		p.f("%d. Stabilization: scale-downs take the highest recommendation of the last %s, scale-ups none; recommendation %d.\n", step, n.ScaleDownWindow, n.StabilizedReplicas)
		p.f("%d. Rate limit: a scale-up goes to at most max(2×%d, 4) = %d replicas; a scale-down only down to minReplicas.\n", step+1, cur, n.ScaleUpLimit)
	}
	p.f("   Then [minReplicas, maxReplicas] = [%d, %d]. ScalingLimited: %s.\n", x.MinReplicas, x.MaxReplicas, n.LimitReason)
}

func (x *Explanation) writeDecision(p *printer, step int) {
	cur := x.Target.SpecReplicas
	switch {
	case x.Rescale:
		p.f("%d. Decision: scale %s %s from %d to %d replicas (reason: %s).\n", step, x.Target.Kind, x.Target.Name, cur, x.DesiredReplicas, x.Reason)
	case x.Error != "" && x.ProposedReplicas == nil:
		p.f("%d. Decision: none (error: %s).\n", step, x.Error)
	default:
		p.f("%d. Decision: keep %d replicas.\n", step, cur)
	}
	if len(x.Conditions) > 0 {
		p.f("   Conditions:\n")
		for _, c := range x.Conditions {
			p.f("     %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	for _, e := range x.Events {
		p.f("   Event: %s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	p.f("\nkube-controller-manager's history (in its memory, not in the API):\n")
	if x.History.LastScaleTime != nil {
		p.f("  status.lastScaleTime %s; status.desiredReplicas %d.\n", x.History.LastScaleTime.Format("2006-01-02T15:04:05Z07:00"), x.History.StatusDesiredReplicas)
	} else {
		p.f("  status.lastScaleTime unset; status.desiredReplicas %d.\n", x.History.StatusDesiredReplicas)
	}
	if len(x.History.Notes) == 0 {
		p.f("  Nothing in it changes this decision.\n")
	}
	for _, n := range x.History.Notes {
		p.f("  - %s\n", n)
	}
}

// printer writes formatted text and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err != nil {
		return
	}
	if _, err := fmt.Fprintf(p.w, format, args...); err != nil {
		p.err = fmt.Errorf("writing explanation: %w", err)
	}
}

func names(ns []string) string {
	if len(ns) == 0 {
		return "none"
	}
	return strings.Join(ns, ", ")
}

func num(f float64) string { return fmt.Sprintf("%.3f", f) }

func deref(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

// policies describes scaling policies: "Pods 4 per 15s or Percent 100% per
// 15s, the larger change".
func policies(sel *autoscalingv2.ScalingPolicySelect, ps []autoscalingv2.HPAScalingPolicy) string {
	if sel != nil && *sel == autoscalingv2.DisabledPolicySelect {
		return "selectPolicy Disabled"
	}
	var parts []string
	for _, p := range ps {
		unit := " pods"
		if p.Value == 1 {
			unit = " pod"
		}
		if p.Type == autoscalingv2.PercentScalingPolicy {
			unit = "%"
		}
		parts = append(parts, fmt.Sprintf("%d%s per %ds", p.Value, unit, p.PeriodSeconds))
	}
	pick := "the larger change"
	if sel != nil && *sel == autoscalingv2.MinChangePolicySelect {
		pick = "the smaller change"
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts, " or ") + ", " + pick
}

// writePromscaler prints the promscaler.io annotations, when there are any.
func (x *Explanation) writePromscaler(p *printer) {
	ps := x.Promscaler
	if ps == nil {
		return
	}
	p.f("   promscaler.io annotations (the coexistence autoscaler acts beside this decision):\n")
	for _, s := range ps.Settings {
		p.f("     %s\n", s)
	}
	for _, s := range ps.Problems {
		p.f("     invalid, nothing applies: %s\n", s)
	}
	for _, s := range ps.Unknown {
		p.f("     warning: %s\n", s)
	}
	if ps.Status != "" {
		p.f("     last status: %s\n", ps.Status)
	}
}
