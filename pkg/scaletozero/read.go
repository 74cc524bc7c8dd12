package scaletozero

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/promscaler/promscaler/pkg/autoscaler"
)

// ReadFunc reads one metric spec's values (the controller through the
// metrics APIs, the simulator from its scenario). index is the spec's
// position in the HPA's spec.metrics, or -1 for an explicit activation
// metric.
type ReadFunc func(index int, spec *autoscalingv2.MetricSpec) autoscaler.MetricValues

// ReadMetrics reads the metrics one period needs and fills in the
// activation value (ActivationMilli, ActivationErr) and MetricsFailed: the
// HPA's own metrics when a fallback is configured, except per-pod ones
// (Pods, Resource, ContainerResource) when the target has no replicas or
// no selector, since they cannot exist then; and the activation metric,
// unless it is one of those already read. MetricsFailed is set when every
// read failed, SomeFailed when one of the HPA's own metrics failed. in.Replicas must be set.
func ReadMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler, spec Spec, hasSelector bool, in *Input, read ReadFunc) {
	reads, failures := 0, 0
	own := map[int]autoscaler.MetricValues{}
	if spec.Fallback != nil {
		for i := range hpa.Spec.Metrics {
			m := &hpa.Spec.Metrics[i]
			if perPod(m.Type) && (in.Replicas == 0 || !hasSelector) {
				continue
			}
			v := read(i, m)
			own[i] = v
			reads++
			if v.Err != nil {
				failures++
				in.SomeFailed = true
			}
		}
	}
	if a := spec.Activation; a != nil {
		v, ok := own[a.Metric.HPAIndex]
		if !ok {
			v = read(a.Metric.HPAIndex, &a.Metric.Spec)
			reads++
			if v.Err != nil {
				failures++
			}
		}
		in.ActivationErr = v.Err
		if v.Err == nil {
			in.ActivationMilli = v.Value
			for _, s := range v.Series {
				in.ActivationMilli += s
			}
		}
	}
	in.MetricsFailed = reads > 0 && failures == reads
}

func perPod(t autoscalingv2.MetricSourceType) bool {
	switch t {
	case autoscalingv2.PodsMetricSourceType, autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType:
		return true
	}
	return false
}
