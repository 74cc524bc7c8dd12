// Package autoscaler is the HorizontalPodAutoscaler decision core: the
// replica calculation for every metric source, pod grouping, tolerances,
// stabilization windows, scaling policies, conditions and status, with the
// semantics of kube-controller-manager's pkg/controller/podautoscaler as of
// Kubernetes 1.37.
//
// The package is pure: it does no I/O, reads time only from an injected
// clock and keeps no per-HPA state of its own. A caller (the controller
// shell or the simulator) drives one reconcile of one HPA like this:
//
//	a, _ := autoscaler.New(cfg, clock)
//	scale, err := get /scale        // on error: d := a.FailedGetScale(hpa, err)
//	in := autoscaler.Input{HPA: hpa, SpecReplicas: ..., StatusReplicas: ..., Selector: ..., Pods: ...}
//	if a.NeedsMetrics(hpa, in.SpecReplicas) {
//		for _, spec := range autoscaler.MetricSpecs(hpa) { fetch; in.Metrics = append(in.Metrics, autoscaler.From...(...)) }
//	}
//	d := a.Decide(state, in)        // state: this HPA's *State, kept by the caller
//	if d.Rescale { err := update /scale to d.DesiredReplicas; a.FinishRescale(state, &d, err) }
//	if autoscaler.StatusChanged(&hpa.Status, &d.Status) { write d.Status }
//	record d.Events
//
// State (recommendation and scale-event history) belongs to the caller, one
// per HPA, carried from one reconcile to the next; the controller drops it
// when the HPA is deleted.
package autoscaler

import (
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
)

// Defaults of the kube-controller-manager flags the core reproduces.
const (
	// DefaultTolerance is --horizontal-pod-autoscaler-tolerance.
	DefaultTolerance = 0.1
	// DefaultDownscaleStabilizationWindow is
	// --horizontal-pod-autoscaler-downscale-stabilization.
	DefaultDownscaleStabilizationWindow = 5 * time.Minute
	// DefaultCPUInitializationPeriod is
	// --horizontal-pod-autoscaler-cpu-initialization-period.
	DefaultCPUInitializationPeriod = 5 * time.Minute
	// DefaultInitialReadinessDelay is
	// --horizontal-pod-autoscaler-initial-readiness-delay.
	DefaultInitialReadinessDelay = 30 * time.Second
)

// Config holds the controller-wide settings of the algorithm (the
// kube-controller-manager flags and the feature gates that change it).
type Config struct {
	// Tolerance is the default metric usage ratio tolerance in both
	// directions; an HPA's behavior.scaleUp/scaleDown.tolerance overrides it.
	Tolerance float64
	// DownscaleStabilizationWindow is the scale-down stabilization window for
	// HPAs without behavior, and the default of
	// behavior.scaleDown.stabilizationWindowSeconds.
	DownscaleStabilizationWindow time.Duration
	// CPUInitializationPeriod is the period after pod start during which CPU
	// samples are only trusted once the pod is ready and a full metric
	// window has passed since its readiness changed.
	CPUInitializationPeriod time.Duration
	// InitialReadinessDelay is the period after pod start during which a
	// pod's unreadiness is taken as "not yet started" rather than "broken".
	InitialReadinessDelay time.Duration
	// Features selects behaviour behind Kubernetes feature gates.
	Features Features
}

// Features mirrors the kube-controller-manager feature gates that change
// the HPA algorithm. DefaultConfig enables those that are on by default in
// Kubernetes 1.37.
type Features struct {
	// ScaleToZero is the HPAScaleToZero gate (beta, on in 1.37): with
	// minReplicas 0 and an Object or External metric the HPA may scale the
	// target to zero and back, tracked by the ScaledToZero condition.
	ScaleToZero bool
	// PodLevelResources is the PodLevelResources gate (beta, on in 1.37):
	// pod-level requests (spec.resources) take precedence over the sum of
	// container requests for Resource metrics.
	PodLevelResources bool
	// ObservedGeneration is the HPAGeneration gate (beta, on in 1.37):
	// status.observedGeneration is set to the HPA's metadata.generation.
	ObservedGeneration bool
}

// DefaultConfig returns kube-controller-manager's defaults for Kubernetes 1.37.
func DefaultConfig() Config {
	return Config{
		Tolerance:                    DefaultTolerance,
		DownscaleStabilizationWindow: DefaultDownscaleStabilizationWindow,
		CPUInitializationPeriod:      DefaultCPUInitializationPeriod,
		InitialReadinessDelay:        DefaultInitialReadinessDelay,
		Features: Features{
			ScaleToZero:        true,
			PodLevelResources:  true,
			ObservedGeneration: true,
		},
	}
}

// Validate reports every invalid setting, each naming the field.
func (c Config) Validate() []error {
	var errs []error
	if c.Tolerance < 0 || c.Tolerance != c.Tolerance {
		errs = append(errs, fmt.Errorf("tolerance: must be a non-negative number, got %v", c.Tolerance))
	}
	if c.DownscaleStabilizationWindow < 0 {
		errs = append(errs, fmt.Errorf("downscaleStabilizationWindow: must not be negative, got %v", c.DownscaleStabilizationWindow))
	}
	if c.CPUInitializationPeriod < 0 {
		errs = append(errs, fmt.Errorf("cpuInitializationPeriod: must not be negative, got %v", c.CPUInitializationPeriod))
	}
	if c.InitialReadinessDelay < 0 {
		errs = append(errs, fmt.Errorf("initialReadinessDelay: must not be negative, got %v", c.InitialReadinessDelay))
	}
	return errs
}

// Tolerances are the usage-ratio tolerances in each direction: a ratio r
// with 1-ScaleDown <= r <= 1+ScaleUp changes nothing.
type Tolerances struct {
	// ScaleDown is how far below 1 the ratio may fall without a change.
	ScaleDown float64
	// ScaleUp is how far above 1 the ratio may rise without a change.
	ScaleUp float64
}

// IsWithin reports whether usageRatio is within the tolerances.
func (t Tolerances) IsWithin(usageRatio float64) bool {
	return (1.0-t.ScaleDown) <= usageRatio && usageRatio <= (1.0+t.ScaleUp)
}

// Input is everything one reconcile of one HPA reads, gathered by the caller.
type Input struct {
	// HPA is the object as read from the API (or the scenario). Decide never
	// modifies it; it works on a copy with the API server's defaults applied.
	HPA *autoscalingv2.HorizontalPodAutoscaler
	// SpecReplicas is the target's /scale spec.replicas ("current replicas").
	SpecReplicas int32
	// StatusReplicas is the target's /scale status.replicas, used by the
	// per-pod (AverageValue) Object and External calculations.
	StatusReplicas int32
	// Selector is the target's /scale status.selector, unparsed.
	Selector string
	// SelectingHPAs names ("namespace/name") the HPAs whose selectors match
	// the target's pods, this one included, as the controller's selector
	// tracker reports them (at most two are needed). More than one makes the
	// selector ambiguous and the HPA inactive. Nil means "not ambiguous".
	SelectingHPAs []string
	// Pods are the pods the Selector matches in the HPA's namespace, as the
	// pod lister returns them. Names must be unique.
	Pods []*v1.Pod
	// Metrics holds one entry per element of MetricSpecs(HPA), in the same
	// order. It may be nil when NeedsMetrics reports false.
	Metrics []MetricValues
}

// PodMetric is one pod's sample, in milli-units, with the time it was taken
// and the window it covers (metrics.k8s.io window, or a custom metric's
// windowSeconds, default one minute).
type PodMetric struct {
	// Timestamp is when the sample was taken.
	Timestamp time.Time
	// Window is the period the sample covers.
	Window time.Duration
	// Value is the sample in milli-units.
	Value int64
}

// MetricValues is what the metrics APIs returned for one metric spec. Which
// field is read depends on the spec's source type:
//
//	Resource, ContainerResource, Pods: PerPod
//	Object:                            Value
//	External:                          Series
//
// Build it with the From* helpers in convert.go, which reproduce the
// upstream metrics client (units, container sums, error texts).
type MetricValues struct {
	// Err is set when fetching failed; its text is the metrics client's
	// (for example "unable to fetch metrics from custom metrics API: ...").
	Err error
	// PerPod maps pod name to that pod's sample.
	PerPod map[string]PodMetric
	// Value is the described object's value in milli-units.
	Value int64
	// Series are the values of every series the external metric returned,
	// in milli-units; the calculation sums them.
	Series []int64
	// Timestamp is the sample time the API reported (the first item's).
	Timestamp time.Time
}

// State is the per-HPA history the algorithm needs between reconciles:
// unstabilized recommendations and, for HPAs with behavior, the scale
// events the rate policies count. The zero value is the state of an HPA
// never seen before. The caller owns it (one per HPA key), passes the same
// pointer to every Decide and FinishRescale of that HPA, serialises access,
// and drops it when the HPA is deleted.
type State struct {
	// Recommendations are the recent unstabilized desired replica counts.
	// Nil means the HPA was never reconciled: Decide then records the
	// current count as the first recommendation (which holds a scale-down
	// for the stabilization window), as upstream does for a new HPA.
	Recommendations []Recommendation `json:"recommendations,omitempty"`
	// ScaleUpEvents are the recent successful scale-ups.
	ScaleUpEvents []ScaleEvent `json:"scaleUpEvents,omitempty"`
	// ScaleDownEvents are the recent successful scale-downs.
	ScaleDownEvents []ScaleEvent `json:"scaleDownEvents,omitempty"`
}

// Recommendation is one unstabilized recommendation and when it was made.
type Recommendation struct {
	// Replicas is the recommended count.
	Replicas int32 `json:"replicas"`
	// Timestamp is when it was made.
	Timestamp time.Time `json:"timestamp"`
}

// ScaleEvent is one successful rescale: the absolute replica change.
// Outdated events (older than the longest policy period) are reused slots.
type ScaleEvent struct {
	// ReplicaChange is the absolute change in replicas.
	ReplicaChange int32 `json:"replicaChange"`
	// Timestamp is when the rescale happened.
	Timestamp time.Time `json:"timestamp"`
	// Outdated marks a slot free for reuse.
	Outdated bool `json:"outdated,omitempty"`
}

// Event is a Kubernetes event the controller would record on the HPA.
type Event struct {
	// Type is v1.EventTypeNormal or v1.EventTypeWarning.
	Type string `json:"type"`
	// Reason is upstream's event reason (SuccessfulRescale, FailedGetPodsMetric, ...).
	Reason string `json:"reason"`
	// Message is upstream's event message.
	Message string `json:"message"`
}

// PodGroups tells how the pods were grouped for a per-pod metric.
type PodGroups struct {
	// Ready counts pods whose samples were used as they are.
	Ready int `json:"ready"`
	// Unready are Pending pods and, for CPU, pods not ready or still
	// initializing; their samples are ignored or filled in.
	Unready []string `json:"unready,omitempty"`
	// Missing are pods without a sample; filled in on a scale decision.
	Missing []string `json:"missing,omitempty"`
	// Ignored are deleting and Failed pods.
	Ignored []string `json:"ignored,omitempty"`
}

// MetricResult is the outcome of one metric spec.
type MetricResult struct {
	// Spec is the metric spec (after defaulting).
	Spec autoscalingv2.MetricSpec
	// Name describes the metric as upstream's reasons do, e.g.
	// "cpu resource utilization (percentage of request)"; empty on error.
	Name string
	// Replicas is the replica count this metric proposes (valid if Err is nil).
	Replicas int32
	// Status is the metric's entry of status.currentMetrics (zero on error,
	// as upstream writes it).
	Status autoscalingv2.MetricStatus
	// UsageRatio is current/target before fill-ins; AdjustedUsageRatio is
	// the ratio after missing and unready pods were filled in (0 when no
	// fill-in happened).
	UsageRatio         float64
	AdjustedUsageRatio float64
	// Pods is the grouping of pods, for per-pod metrics.
	Pods *PodGroups
	// Err is the metric's failure, as upstream returns it.
	Err error
	// Condition is the ScalingActive=False condition this failure would set.
	Condition *autoscalingv2.HorizontalPodAutoscalerCondition
}

// Normalization is what the normalization of one proposal applied: the
// stabilization windows and the rate limits (policies with behavior, or
// max(2×current, 4) without), before min/max.
type Normalization struct {
	// Behavior reports whether spec.behavior's rules applied.
	Behavior bool
	// Stabilized is the proposal after the stabilization window(s).
	Stabilized int32
	// ScaleUpWindow and ScaleDownWindow are the stabilization windows
	// (without behavior: no scale-up window, the controller's
	// --horizontal-pod-autoscaler-downscale-stabilization down).
	ScaleUpWindow, ScaleDownWindow time.Duration
	// ScaleUpLimit is the highest count the scale-up rate allowed from the
	// current count (with behavior: given the scale-up and scale-down
	// events in State; never below the current count).
	ScaleUpLimit int32
	// ScaleDownLimit is the lowest count the scale-down policies allowed
	// (never above the current count); -1 without behavior, where only
	// minReplicas bounds a scale-down.
	ScaleDownLimit int32
	// LimitReason is the ScalingLimited condition's reason
	// (DesiredWithinRange, ScaleUpLimit, ScaleDownLimit, TooManyReplicas,
	// TooFewReplicas).
	LimitReason string
}

// Decision is the outcome of one reconcile.
type Decision struct {
	// CurrentReplicas is the target's spec.replicas when the decision was made.
	CurrentReplicas int32
	// MetricsComputed reports whether metrics were evaluated at all (not when
	// the current count is out of [min, max] or scaling is disabled).
	MetricsComputed bool
	// MetricReplicas is the largest valid metric proposal, or -1 when the
	// metrics gave no usable proposal.
	MetricReplicas int32
	// Metric names the metric that gave MetricReplicas.
	Metric string
	// Metrics has one result per metric spec, in spec order.
	Metrics []MetricResult
	// StabilizedReplicas is the recommendation after the stabilization
	// window(s), before rate limits and min/max; -1 when the metrics gave
	// no proposal.
	StabilizedReplicas int32
	// Normalization tells how the metrics' proposal was normalized; nil
	// when it was not (no proposal, or the current count out of range).
	Normalization *Normalization
	// DesiredReplicas is the count after normalization (stabilization,
	// policies, min/max). When Rescale is false it equals CurrentReplicas
	// (except on a metrics failure, where status keeps the previous value).
	DesiredReplicas int32
	// Rescale reports whether /scale must be set to DesiredReplicas.
	Rescale bool
	// Reason is the rescale reason ("cpu resource utilization (percentage of
	// request) above target", "All metrics below target", ...).
	Reason string
	// Status is the HPA status to write; when Rescale is true it is final
	// only after FinishRescale.
	Status autoscalingv2.HorizontalPodAutoscalerStatus
	// Events are the events to record, in order.
	Events []Event
	// Err is the error the reconcile reports (for logs and requeueing); a
	// decision may carry both an error and a valid rescale (some metrics
	// invalid but not blocking).
	Err error

	// pending is what FinishRescale needs; nil when Rescale is false.
	pending *pendingRescale
}
