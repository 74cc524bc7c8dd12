// Package kedaconvert converts KEDA ScaledObjects into what promscaler
// serves and reads instead: the adapter's externalQueries entries, plain
// autoscaling/v2 HorizontalPodAutoscalers, and the promscaler.io/
// annotations of coexist mode. Every field it cannot carry over is listed,
// with its place in the input and the reason.
//
// ScaledObjects are decoded into the small typed structs of this file,
// which follow the fields KEDA documents for keda.sh/v1alpha1 (KEDA's own
// Go module is not imported).
package kedaconvert

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KEDA's annotations on a ScaledObject.
const (
	kedaPaused             = "autoscaling.keda.sh/paused"
	kedaPausedReplicas     = "autoscaling.keda.sh/paused-replicas"
	kedaPausedScaleIn      = "autoscaling.keda.sh/paused-scale-in"
	kedaPausedScaleOut     = "autoscaling.keda.sh/paused-scale-out"
	kedaTransferOwnership  = "scaledobject.keda.sh/transfer-hpa-ownership"
	kedaValidatesOwnership = "validations.keda.sh/hpa-ownership"
)

// KEDA's defaults.
const (
	defaultMaxReplicas    = 100
	defaultCooldownPeriod = 300
	defaultMetricType     = autoscalingv2.AverageValueMetricType
)

// ScaledObject is keda.sh/v1alpha1 ScaledObject, as far as the converter
// reads it.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScaledObjectSpec `json:"spec"`
	// Status is ignored (a ScaledObject read from a cluster has one).
	Status map[string]any `json:"status,omitempty"`
}

// ScaledObjectSpec is the spec KEDA documents.
type ScaledObjectSpec struct {
	ScaleTargetRef        *ScaleTarget `json:"scaleTargetRef"`
	PollingInterval       *int32       `json:"pollingInterval,omitempty"`
	CooldownPeriod        *int32       `json:"cooldownPeriod,omitempty"`
	InitialCooldownPeriod *int32       `json:"initialCooldownPeriod,omitempty"`
	IdleReplicaCount      *int32       `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32       `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32       `json:"maxReplicaCount,omitempty"`
	Advanced              *Advanced    `json:"advanced,omitempty"`
	Triggers              []Trigger    `json:"triggers"`
	Fallback              *Fallback    `json:"fallback,omitempty"`
}

// ScaleTarget is spec.scaleTargetRef.
type ScaleTarget struct {
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	Name                   string `json:"name"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// Advanced is spec.advanced.
type Advanced struct {
	HorizontalPodAutoscalerConfig *HPAConfig       `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount *bool            `json:"restoreToOriginalReplicaCount,omitempty"`
	ScalingModifiers              *ScalingModifier `json:"scalingModifiers,omitempty"`
}

// HPAConfig is spec.advanced.horizontalPodAutoscalerConfig.
type HPAConfig struct {
	Name     string                                         `json:"name,omitempty"`
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// ScalingModifier is spec.advanced.scalingModifiers.
type ScalingModifier struct {
	Formula          string `json:"formula,omitempty"`
	Target           string `json:"target,omitempty"`
	ActivationTarget string `json:"activationTarget,omitempty"`
	MetricType       string `json:"metricType,omitempty"`
}

// Fallback is spec.fallback.
type Fallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// Trigger is one of spec.triggers.
type Trigger struct {
	Type              string             `json:"type"`
	Name              string             `json:"name,omitempty"`
	UseCachedMetrics  bool               `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string  `json:"metadata"`
	AuthenticationRef *AuthenticationRef `json:"authenticationRef,omitempty"`
	MetricType        string             `json:"metricType,omitempty"`
}

// AuthenticationRef is a trigger's authenticationRef.
type AuthenticationRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}
