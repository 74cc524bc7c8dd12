package kedaconvert

import (
	"fmt"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

// activation sets promscaler's scale-to-zero annotations: the activation
// metric (the one prometheus trigger, the composite metric, or, with
// several triggers, a query counting the active ones), its threshold and
// the idle period (cooldownPeriod).
func (c *converter) activation(ann map[string]string) {
	s := &c.so.Spec
	switch m := s.Advanced.modifiers(); {
	case m != nil && len(c.external) > 0:
		ann[scaletozero.AnnotationActivationMetric] = c.metricName("composite")
		if m.ActivationTarget != "" {
			ann[scaletozero.AnnotationActivationThreshold] = m.ActivationTarget
		}
	case len(c.external) == 1:
		ann[scaletozero.AnnotationActivationMetric] = c.external[0].metric
		if a := c.external[0].activation; a != "" {
			ann[scaletozero.AnnotationActivationThreshold] = a
		}
	case len(c.external) > 1 && !c.sameBackend():
		c.note("spec.minReplicaCount", "scale to zero not converted: the triggers query different backends, and one activation query cannot read both; minReplicas is 1")
		return
	case len(c.external) > 1:
		// KEDA activates when any trigger is above its activation
		// threshold: the query counts those that are.
		name := c.metricName("active")
		terms := make([]string, len(c.external))
		for i, t := range c.external {
			a := t.activation
			if a == "" {
				a = "0"
			}
			terms[i] = fmt.Sprintf("(sum((%s) > bool %s) or vector(0))", t.query, a)
		}
		c.queries = append(c.queries, config.ExternalQuery{Name: name, Query: strings.Join(terms, " + "), Backend: c.external[0].backend})
		ann[scaletozero.AnnotationActivationMetric] = "external:" + name
		ann[scaletozero.AnnotationActivationThreshold] = "0"
	default:
		c.note("spec.minReplicaCount", "scale to zero not converted: it needs a prometheus trigger (cpu and memory cannot wake a target at 0); minReplicas is 1")
		return
	}
	cooldown := int32(defaultCooldownPeriod)
	if s.CooldownPeriod != nil {
		cooldown = *s.CooldownPeriod
	}
	ann[scaletozero.AnnotationIdlePeriod] = seconds(cooldown)
}

// noActivation notes the scale-to-zero fields that have no effect when the
// ScaledObject does not scale to zero (as in KEDA).
func (c *converter) noActivation() {
	for i, t := range c.so.Spec.Triggers {
		if _, ok := t.Metadata["activationThreshold"]; ok {
			c.note(fmt.Sprintf("spec.triggers[%d].metadata.activationThreshold", i), "not converted: no effect with minReplicaCount ≥ 1 (in KEDA too)")
		}
	}
	if c.so.Spec.CooldownPeriod != nil {
		c.note("spec.cooldownPeriod", "not converted: no effect with minReplicaCount ≥ 1 (in KEDA too); the HPA's behavior.scaleDown.stabilizationWindowSeconds delays its scale-in")
	}
}

// fallback sets the fallback annotations.
func (c *converter) fallback(ann map[string]string, minR, maxR int32) {
	f := c.so.Spec.Fallback
	if f == nil {
		return
	}
	if f.Replicas < minR || f.Replicas > maxR {
		c.note("spec.fallback.replicas", "not converted: %d is outside minReplicas %d..maxReplicas %d, where kube-controller-manager would move it back at once", f.Replicas, minR, maxR)
		return
	}
	ann[scaletozero.AnnotationFallbackReplicas] = strconv.Itoa(int(f.Replicas))
	if f.FailureThreshold > 0 {
		ann[scaletozero.AnnotationFallbackAfter] = strconv.Itoa(int(f.FailureThreshold))
	} else {
		c.note("spec.fallback.failureThreshold", "required by KEDA: promscaler's default %d is used", scaletozero.DefaultFallbackAfter)
	}
	if f.Behavior != "" && f.Behavior != string(scaletozero.FallbackStatic) {
		ann[scaletozero.AnnotationFallbackBehavior] = f.Behavior
	}
	if len(c.external) > 1 && c.so.Spec.Advanced.modifiers() == nil {
		// KEDA's fallback is per trigger: one failing trigger stands for
		// the fallback count.
		ann[scaletozero.AnnotationFallbackOn] = string(scaletozero.FallbackOnAny)
	}
}

// advanced converts spec.advanced but scalingModifiers.
func (c *converter) advanced(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	a := c.so.Spec.Advanced
	if a == nil {
		return
	}
	if h := a.HorizontalPodAutoscalerConfig; h != nil {
		if h.Name != "" {
			hpa.Name = h.Name
		}
		hpa.Spec.Behavior = h.Behavior
	}
	if a.RestoreToOriginalReplicaCount != nil && *a.RestoreToOriginalReplicaCount {
		c.note("spec.advanced.restoreToOriginalReplicaCount", "not converted: deleting an HPA leaves the replicas where they are")
	}
}

// ignored notes the top-level fields with no equivalent.
func (c *converter) ignored() {
	s := &c.so.Spec
	if s.PollingInterval != nil {
		c.note("spec.pollingInterval", "not converted: the HPA reads every --horizontal-pod-autoscaler-sync-period (15s by default), promscaler's autoscaler every --horizontal-pod-autoscaler-sync-period of its own; --prometheus-cache-ttl spares Prometheus")
	}
	if s.InitialCooldownPeriod != nil && *s.InitialCooldownPeriod > 0 {
		c.note("spec.initialCooldownPeriod", "not converted: the idle period counts from when the autoscaler first sees the target idle")
	}
}

// check runs promscaler's own annotation parser over the result: a
// problem there (a paused-replicas above maxReplicas, say) is a Note on
// the annotation, which is dropped.
func (c *converter) check(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	_, problems := scaletozero.Parse(hpa)
	for _, p := range problems {
		c.note("metadata.annotations", "%s: dropped", p.Error())
		delete(hpa.Annotations, p.Annotation)
	}
	for _, p := range scaletozero.Unknown(hpa.Annotations) {
		c.note("metadata.annotations", "%s", p.Error())
	}
}

// modifiers is spec.advanced.scalingModifiers, nil when unset.
func (a *Advanced) modifiers() *ScalingModifier {
	if a == nil || a.ScalingModifiers == nil || a.ScalingModifiers.Formula == "" {
		return nil
	}
	return a.ScalingModifiers
}

func (c *converter) sameBackend() bool {
	_, ok := c.oneBackend()
	return ok
}
