package autoscaler

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
)

// API server defaults for autoscaling/v2 (pkg/apis/autoscaling/v2/defaults.go).
const (
	// DefaultCPUUtilization is the target of the metric an HPA without
	// metrics gets.
	DefaultCPUUtilization int32 = 80
	defaultScaleUpPercent int32 = 100
	defaultScaleUpPods    int32 = 4
	defaultScaleUpPeriod  int32 = 15
	defaultScaleDownPct   int32 = 100
	defaultScaleDownPer   int32 = 15
)

// ApplyDefaults sets, in place, the defaults the API server applies to an
// autoscaling/v2 HPA: minReplicas 1, a CPU 80% utilization metric when none
// is given, and for a non-nil behavior the default scaleUp and scaleDown
// rules and every unset field of them (selectPolicy Max, scale-up window 0,
// scale-up policies 4 pods or 100% per 15s, scale-down 100% per 15s). The
// scale-down window stays unset: the controller fills it from its
// --horizontal-pod-autoscaler-downscale-stabilization flag. An HPA read from
// the API server is already defaulted; applying it again changes nothing.
func ApplyDefaults(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	if hpa.Spec.MinReplicas == nil {
		one := int32(1)
		hpa.Spec.MinReplicas = &one
	}
	if len(hpa.Spec.Metrics) == 0 {
		hpa.Spec.Metrics = []autoscalingv2.MetricSpec{defaultMetric()}
	}
	if b := hpa.Spec.Behavior; b != nil {
		b.ScaleUp = mergeRules(b.ScaleUp, defaultScaleUpRules())
		b.ScaleDown = mergeRules(b.ScaleDown, defaultScaleDownRules())
	}
}

// MetricSpecs returns the metric specs the controller evaluates for hpa, in
// order: hpa.Spec.Metrics, or the default CPU metric when it is empty.
// Input.Metrics must hold one MetricValues per element.
func MetricSpecs(hpa *autoscalingv2.HorizontalPodAutoscaler) []autoscalingv2.MetricSpec {
	if len(hpa.Spec.Metrics) == 0 {
		return []autoscalingv2.MetricSpec{defaultMetric()}
	}
	return hpa.Spec.Metrics
}

func defaultMetric() autoscalingv2.MetricSpec {
	target := DefaultCPUUtilization
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name: v1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{
				Type:               autoscalingv2.UtilizationMetricType,
				AverageUtilization: &target,
			},
		},
	}
}

func defaultScaleUpRules() *autoscalingv2.HPAScalingRules {
	window := int32(0)
	policy := autoscalingv2.MaxChangePolicySelect
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: &window,
		SelectPolicy:               &policy,
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: defaultScaleUpPods, PeriodSeconds: defaultScaleUpPeriod},
			{Type: autoscalingv2.PercentScalingPolicy, Value: defaultScaleUpPercent, PeriodSeconds: defaultScaleUpPeriod},
		},
	}
}

func defaultScaleDownRules() *autoscalingv2.HPAScalingRules {
	policy := autoscalingv2.MaxChangePolicySelect
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: &policy,
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: defaultScaleDownPct, PeriodSeconds: defaultScaleDownPer},
		},
	}
}

// mergeRules copies every set field of from over the defaults in to.
func mergeRules(from, to *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if from == nil {
		return to
	}
	if from.SelectPolicy != nil {
		to.SelectPolicy = from.SelectPolicy
	}
	if from.StabilizationWindowSeconds != nil {
		to.StabilizationWindowSeconds = from.StabilizationWindowSeconds
	}
	if from.Policies != nil {
		to.Policies = from.Policies
	}
	if from.Tolerance != nil {
		to.Tolerance = from.Tolerance
	}
	return to
}
