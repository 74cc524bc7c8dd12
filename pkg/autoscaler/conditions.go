package autoscaler

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition sets a condition of hpa's status, appending it when absent;
// lastTransitionTime changes only when the status does. message is a format.
func (a *Autoscaler) setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType, status v1.ConditionStatus, reason, message string, args ...any) {
	list := hpa.Status.Conditions
	var c *autoscalingv2.HorizontalPodAutoscalerCondition
	for i := range list {
		if list[i].Type == t {
			c = &list[i]
			break
		}
	}
	if c == nil {
		list = append(list, autoscalingv2.HorizontalPodAutoscalerCondition{Type: t})
		c = &list[len(list)-1]
	}
	if c.Status != status {
		c.LastTransitionTime = metav1.NewTime(a.clock.Now())
	}
	c.Status = status
	c.Reason = reason
	if len(args) == 0 {
		c.Message = message
	} else {
		c.Message = fmt.Sprintf(message, args...)
	}
	hpa.Status.Conditions = list
}

// removeCondition drops every condition of type t.
func removeCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) {
	filtered := hpa.Status.Conditions[:0]
	for _, c := range hpa.Status.Conditions {
		if c.Type != t {
			filtered = append(filtered, c)
		}
	}
	hpa.Status.Conditions = filtered
}

// Condition returns the condition of type t in status, or nil.
func Condition(status *autoscalingv2.HorizontalPodAutoscalerStatus, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}
