package controller

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

// DryRunAnnotation is the HPA annotation that --dry-run-annotate writes:
// a JSON DryRunRecord of the latest decision.
const DryRunAnnotation = scaletozero.AnnotationDryRunDecision

// DryRunRecord is the decision a dry run records on the HPA. It holds no
// timestamps or metric values, so it changes (and is written) only when the
// decision does.
type DryRunRecord struct {
	// CurrentReplicas is the target's spec.replicas.
	CurrentReplicas int32 `json:"currentReplicas"`
	// DesiredReplicas is what the controller would set.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// Rescale reports whether it would update /scale.
	Rescale bool `json:"rescale"`
	// Reason is the rescale reason, as in a SuccessfulRescale event.
	Reason string `json:"reason,omitempty"`
	// Conditions are the conditions the controller would write.
	Conditions []DryRunCondition `json:"conditions,omitempty"`
}

// DryRunCondition is one HPA condition without its message and time.
type DryRunCondition struct {
	Type   autoscalingv2.HorizontalPodAutoscalerConditionType `json:"type"`
	Status v1.ConditionStatus                                 `json:"status"`
	Reason string                                             `json:"reason,omitempty"`
}

// dryRunRecord builds the record of d.
func dryRunRecord(d *autoscaler.Decision) DryRunRecord {
	r := DryRunRecord{
		CurrentReplicas: d.CurrentReplicas,
		DesiredReplicas: d.DesiredReplicas,
		Rescale:         d.Rescale,
		Reason:          d.Reason,
	}
	for _, c := range d.Status.Conditions {
		r.Conditions = append(r.Conditions, DryRunCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
	}
	return r
}

// annotate writes the decision to the HPA's DryRunAnnotation, only when
// the recorded decision changed.
func (c *Controller) annotate(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, d *autoscaler.Decision) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	updated, err := c.patchAnnotation(ctx, hpa, DryRunAnnotation, "dry-run decision annotation", dryRunRecord(d), nil)
	if updated != nil {
		klog.FromContext(ctx).V(2).Info("Recorded dry-run decision", "hpa", klog.KObj(hpa), "decision", updated.Annotations[DryRunAnnotation])
	}
	return updated, err
}

// patchAnnotation writes value, as JSON, to the HPA's annotation key with a
// JSON merge patch (no resourceVersion: it cannot conflict with the built-in
// controller's status writes on our side), unless the annotation already
// holds it; it returns the updated HPA, nil when nothing was written. The
// write's result is counted in counter, if set.
func (c *Controller) patchAnnotation(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, key, what string, value any, counter *prometheus.CounterVec) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	encoded, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("encoding %s of %s/%s: %w", what, hpa.Namespace, hpa.Name, err)
	}
	if hpa.Annotations[key] == string(encoded) {
		return nil, nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{key: string(encoded)}},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding %s patch of %s/%s: %w", what, hpa.Namespace, hpa.Name, err)
	}
	wctx, cancel, err := c.writeContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	updated, err := c.cfg.HPAs.HorizontalPodAutoscalers(hpa.Namespace).Patch(wctx, hpa.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	result := ResultSuccess
	if err != nil {
		result, updated, err = ResultError, nil, fmt.Errorf("writing %s of %s/%s: %w", what, hpa.Namespace, hpa.Name, err)
	}
	if counter != nil {
		counter.WithLabelValues(result).Inc()
	}
	return updated, err
}
