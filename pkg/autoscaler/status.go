package autoscaler

import autoscalingv2 "k8s.io/api/autoscaling/v2"

// CurrentValue returns the current value of a status.currentMetrics entry,
// whichever source type it holds; nil when it holds none (a failed metric).
func CurrentValue(s autoscalingv2.MetricStatus) *autoscalingv2.MetricValueStatus {
	switch {
	case s.Resource != nil:
		return &s.Resource.Current
	case s.ContainerResource != nil:
		return &s.ContainerResource.Current
	case s.Pods != nil:
		return &s.Pods.Current
	case s.Object != nil:
		return &s.Object.Current
	case s.External != nil:
		return &s.External.Current
	}
	return nil
}
