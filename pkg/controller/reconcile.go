package controller

import (
	"context"
	"errors"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

// maxEventNote is the longest note the events API accepts.
const maxEventNote = 1024

// reconcile is one reconcile of one HPA: read /scale, gather pods and
// metrics, let the core decide, apply (or, in dry-run, only record) the
// decision.
func (c *Controller) reconcile(ctx context.Context, e *hpaEntry, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	logger := klog.FromContext(ctx).WithValues("hpa", klog.KObj(hpa))
	state := &e.state
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)

	sc, gr, scaleErr, err := c.getScale(ctx, hpa)
	if err != nil {
		d := c.core.FailedGetScale(hpa, scaleErr)
		c.tel.Decisions.WithLabelValues(DecisionError, "FailedGetScale").Inc()
		c.record(hpa, d.Events)
		if werr := c.writeDecision(ctx, e, hpa, &d); werr != nil {
			return errors.Join(err, werr)
		}
		return err
	}

	in := autoscaler.Input{
		HPA:            hpa,
		SpecReplicas:   sc.Spec.Replicas,
		StatusReplicas: sc.Status.Replicas,
		Selector:       sc.Status.Selector,
	}
	if c.core.NeedsMetrics(hpa, in.SpecReplicas) {
		if err := c.gather(ctx, hpa, &in); err != nil {
			return err
		}
	}
	d := c.core.Decide(state, in)
	decision, reason := decisionLabels(&d)
	if d.Rescale {
		direction := "up"
		if d.DesiredReplicas < d.CurrentReplicas {
			direction = "down"
		}
		switch {
		case c.cfg.DryRun:
			// No scale event is stored: the target did not change, and the
			// rate policies must count only rescales that happened.
			c.tel.ScaleOperations.WithLabelValues(direction, ResultDryRun).Inc()
			d.Events = append(d.Events, autoscaler.Event{Type: v1.EventTypeNormal, Reason: "DryRunRescale",
				Message: fmt.Sprintf("New size: %d; reason: %s; dry run: /scale not updated", d.DesiredReplicas, d.Reason)})
			logger.Info("Would rescale (dry run)", "currentReplicas", d.CurrentReplicas, "desiredReplicas", d.DesiredReplicas, "reason", d.Reason)
		default:
			uerr := c.updateScale(ctx, hpa.Namespace, ref.Name, gr, sc, d.DesiredReplicas, reference)
			c.core.FinishRescale(state, &d, uerr)
			if uerr != nil {
				decision, reason = DecisionError, "FailedUpdateScale"
				c.tel.ScaleOperations.WithLabelValues(direction, ResultError).Inc()
			} else {
				c.tel.ScaleOperations.WithLabelValues(direction, ResultSuccess).Inc()
				logger.Info("Successfully rescaled", "currentReplicas", d.CurrentReplicas, "desiredReplicas", d.DesiredReplicas, "reason", d.Reason)
			}
		}
	} else {
		logger.V(4).Info("Decided not to scale", "scaleTarget", reference, "desiredReplicas", d.DesiredReplicas, "reason", reason)
	}
	c.tel.Decisions.WithLabelValues(decision, reason).Inc()
	c.tel.DesiredReplicas.WithLabelValues(hpa.Namespace, hpa.Name).Set(float64(d.DesiredReplicas))
	c.record(hpa, d.Events)
	werr := c.writeDecision(ctx, e, hpa, &d)
	switch {
	case werr != nil:
		return werr
	case d.Err != nil:
		return d.Err
	}
	return nil
}

// getScale resolves the scale target and reads its /scale (see GetScale).
func (c *Controller) getScale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.Scale, schema.GroupResource, error, error) {
	return GetScale(ctx, c.cfg.Scales, c.cfg.Mapper, c.cfg.RequestTimeout, hpa)
}

// updateScale sets the target's spec.replicas, re-reading /scale and
// retrying on conflicts as upstream does.
func (c *Controller) updateScale(ctx context.Context, namespace, name string, gr schema.GroupResource, sc *autoscalingv1.Scale, replicas int32, reference string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc.Spec.Replicas = replicas
		rctx, cancel, err := c.writeContext(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		_, err = c.cfg.Scales.Scales(namespace).Update(rctx, gr, sc, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if apierrors.IsConflict(err) {
			latest, gerr := c.cfg.Scales.Scales(namespace).Get(rctx, gr, name, metav1.GetOptions{})
			if gerr != nil {
				klog.FromContext(ctx).Error(gerr, "Re-reading scale after a conflict", "scaleTarget", reference)
			} else {
				*sc = *latest
			}
		}
		return err
	})
}

// gather lists the target's pods and reads every metric of the HPA into in.
// It returns an error only when the HPA was deleted meanwhile.
func (c *Controller) gather(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, in *autoscaler.Input) error {
	if in.Selector == "" {
		return nil // the core reports the missing selector
	}
	selector, err := labels.Parse(in.Selector)
	if err != nil {
		return nil // the core reports the invalid selector
	}
	if !c.selectors.putIfPresent(hpa.Namespace, hpa.Name, selector) {
		return fmt.Errorf("HPA %s/%s was deleted during reconciliation", hpa.Namespace, hpa.Name)
	}
	pods, err := c.listPods(hpa.Namespace, selector)
	if err != nil {
		return fmt.Errorf("listing pods of HPA %s/%s: %w", hpa.Namespace, hpa.Name, err)
	}
	in.Pods = pods
	if matching := c.selectors.matching(hpa.Namespace, pods, 2); len(matching) > 1 {
		in.SelectingHPAs = matching
		return nil // ambiguous: the core evaluates no metric
	}
	in.Metrics = c.metrics.Read(ctx, hpa.Namespace, selector, autoscaler.MetricSpecs(hpa))
	return nil
}

// record emits the decision's events on the HPA.
func (c *Controller) record(hpa *autoscalingv2.HorizontalPodAutoscaler, evs []autoscaler.Event) {
	if len(evs) == 0 || !c.mayWrite() {
		return
	}
	for _, e := range evs {
		note := e.Message
		if len(note) > maxEventNote {
			note = note[:maxEventNote-3] + "..."
		}
		c.cfg.Recorder.Eventf(hpa, nil, e.Type, e.Reason, eventAction(e.Reason), "%s", note)
	}
}

// eventAction is the events API "action" of an upstream event reason.
func eventAction(reason string) string {
	switch reason {
	case "SuccessfulRescale", "FailedRescale", "DryRunRescale":
		return "Rescale"
	case "FailedGetScale":
		return "GetScale"
	case "FailedGetResourceMetric", "FailedGetContainerResourceMetric", "FailedGetPodsMetric",
		"FailedGetObjectMetric", "FailedGetExternalMetric", "InvalidMetricSourceType":
		return "GetMetrics"
	case "FailedComputeMetricsReplicas":
		return "ComputeReplicas"
	case "SelectorRequired", "InvalidSelector", "AmbiguousSelector":
		return "ValidateSelector"
	case "FailedUpdateStatus":
		return "UpdateStatus"
	case string(scaletozero.ActionScaleToZero), string(scaletozero.ActionActivate), string(scaletozero.ActionFallback):
		return "Rescale"
	case string(scaletozero.ActionRecover), string(scaletozero.ActionUnpause):
		return "Recover"
	case string(scaletozero.ActionPause):
		return "Pause"
	case reasonInvalidAnnotation, reasonUnknownAnnotation:
		return "ValidateAnnotations"
	}
	return "Reconcile"
}

// writeDecision persists the decision: the HPA status when it changed, or
// in dry-run the annotation (when enabled and changed).
func (c *Controller) writeDecision(ctx context.Context, e *hpaEntry, hpa *autoscalingv2.HorizontalPodAutoscaler, d *autoscaler.Decision) error {
	if c.cfg.DryRun {
		if !c.cfg.DryRunAnnotate {
			return nil
		}
		updated, err := c.annotate(ctx, hpa, d)
		c.wrote(e, updated)
		return err
	}
	if !autoscaler.StatusChanged(&hpa.Status, &d.Status) {
		return nil
	}
	// A shallow copy: only the status differs and nothing is mutated.
	updated := *hpa
	updated.Status = d.Status
	rctx, cancel, err := c.writeContext(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	written, err := c.cfg.HPAs.HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(rctx, &updated, metav1.UpdateOptions{})
	if err != nil {
		c.tel.StatusUpdates.WithLabelValues(ResultError).Inc()
		c.record(hpa, []autoscaler.Event{{Type: v1.EventTypeWarning, Reason: "FailedUpdateStatus", Message: err.Error()}})
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	c.wrote(e, written)
	c.tel.StatusUpdates.WithLabelValues(ResultSuccess).Inc()
	klog.FromContext(ctx).V(2).Info("Successfully updated status", "hpa", klog.KObj(hpa))
	return nil
}

// decisionLabels classifies a decision for the decisions_total metric: the
// outcome and the condition reason that explains it. Both come from fixed
// sets (the core's condition reasons), never from free text.
func decisionLabels(d *autoscaler.Decision) (decision, reason string) {
	cond := func(t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
		return autoscaler.Condition(&d.Status, t)
	}
	switch {
	case d.Rescale && d.DesiredReplicas > d.CurrentReplicas:
		decision = DecisionScaleUp
	case d.Rescale:
		decision = DecisionScaleDown
	default:
		decision = DecisionNone
	}
	if !d.MetricsComputed {
		switch {
		case d.Rescale && d.DesiredReplicas < d.CurrentReplicas:
			return decision, "AboveMaxReplicas"
		case d.Rescale:
			return decision, "BelowMinReplicas"
		}
		if c := cond(autoscalingv2.ScalingActive); c != nil && c.Status == v1.ConditionFalse {
			return decision, c.Reason // ScalingDisabled
		}
		return decision, "Unknown"
	}
	if d.MetricReplicas < 0 {
		reason = "FailedComputeMetricsReplicas"
		if c := cond(autoscalingv2.ScalingActive); c != nil && c.Status == v1.ConditionFalse {
			reason = c.Reason
		}
		return DecisionError, reason
	}
	if c := cond(autoscalingv2.ScalingLimited); c != nil && c.Status == v1.ConditionTrue {
		return decision, c.Reason
	}
	if c := cond(autoscalingv2.AbleToScale); c != nil {
		return decision, c.Reason
	}
	return decision, "Unknown"
}
