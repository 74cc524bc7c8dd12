package controller

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metricsNamespace and metricsSubsystem prefix every metric the controller
// exports: promscaler_autoscaler_*.
const (
	metricsNamespace = "promscaler"
	metricsSubsystem = "autoscaler"
)

// Decision label values of promscaler_autoscaler_decisions_total.
const (
	DecisionScaleUp   = "scale_up"
	DecisionScaleDown = "scale_down"
	DecisionNone      = "none"
	DecisionError     = "error"
)

// Result label values.
const (
	ResultSuccess = "success"
	ResultError   = "error"
	// ResultDryRun labels a rescale decided in --dry-run mode (not applied).
	ResultDryRun = "dry_run"
)

// Metrics holds the controller's Prometheus collectors. Build it with
// NewMetrics; the caller owns the registry it is registered in.
type Metrics struct {
	// ReconcileDuration observes one reconcile of one HPA, in seconds.
	// Labels: result (ResultSuccess, ResultError).
	ReconcileDuration *prometheus.HistogramVec
	// Decisions counts reconciles by decision (Decision*) and reason: the
	// condition reason that explains it (ReadyForNewScale,
	// ScaleDownStabilized, ScaleUpLimit, TooManyReplicas, FailedGetScale,
	// FailedGetPodsMetric, ScalingDisabled, AboveMaxReplicas, ...).
	Decisions *prometheus.CounterVec
	// MetricFetchErrors counts failed reads of a metrics API. Labels:
	// source (Resource, ContainerResource, Pods, Object, External).
	MetricFetchErrors *prometheus.CounterVec
	// MetricFetchDuration observes reads of a metrics API, in seconds.
	// Labels: source.
	MetricFetchDuration *prometheus.HistogramVec
	// ScaleOperations counts /scale updates by direction (up, down) and
	// result (ResultSuccess, ResultError, ResultDryRun).
	ScaleOperations *prometheus.CounterVec
	// StatusUpdates counts HPA status writes by result.
	StatusUpdates *prometheus.CounterVec
	// DesiredReplicas is the last desired replica count of each HPA.
	// Labels: namespace, hpa. Deleted with the HPA.
	DesiredReplicas *prometheus.GaugeVec
	// HPAs is the number of HPAs whose state the controller keeps.
	HPAs prometheus.Gauge
	// CoexistActions counts the coexistence mode's actions by action
	// (ScaledToZero, Activated, FallbackApplied, FallbackEnded,
	// InvalidAnnotation).
	CoexistActions *prometheus.CounterVec
	// FenceRefusals counts the times the fence refused a write and stopped
	// the workers (at most once per process).
	FenceRefusals prometheus.Counter
	// Leader is 1 while this process holds the leader lease (or runs
	// without leader election), else 0.
	Leader prometheus.Gauge
}

// NewMetrics creates the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	buckets := []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	m := &Metrics{
		ReconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "reconcile_duration_seconds",
			Help:    "Duration of one reconcile of one HPA (scale read, metric reads, decision, writes).",
			Buckets: buckets,
		}, []string{"result"}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "decisions_total",
			Help: "Reconcile decisions by outcome and the condition reason that explains them.",
		}, []string{"decision", "reason"}),
		MetricFetchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "metric_fetch_errors_total",
			Help: "Failed reads of the metrics APIs, by HPA metric source type.",
		}, []string{"source"}),
		MetricFetchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "metric_fetch_duration_seconds",
			Help:    "Duration of reads of the metrics APIs, by HPA metric source type.",
			Buckets: buckets,
		}, []string{"source"}),
		ScaleOperations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "scale_operations_total",
			Help: "Rescales of scale targets by direction and result (dry_run: decided, not applied).",
		}, []string{"direction", "result"}),
		StatusUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "status_updates_total",
			Help: "HPA status writes by result.",
		}, []string{"result"}),
		DesiredReplicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "desired_replicas",
			Help: "The desired replica count of the last reconcile of each HPA.",
		}, []string{"namespace", "hpa"}),
		HPAs: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "hpas",
			Help: "HPAs whose state (recommendations, scale events) the controller keeps.",
		}),
		CoexistActions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "coexist_actions_total",
			Help: "Actions beside kube-controller-manager: ScaledToZero, Activated, FallbackApplied, FallbackEnded, InvalidAnnotation.",
		}, []string{"action"}),
		FenceRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "fence_refusals_total",
			Help: "Times the leader lease fence refused a write (lease lost or not renewed in time) and stopped the workers.",
		}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "leader",
			Help: "1 while this process is the active controller (holds the lease or runs without leader election).",
		}),
	}
	for _, c := range []prometheus.Collector{m.ReconcileDuration, m.Decisions, m.MetricFetchErrors, m.MetricFetchDuration,
		m.ScaleOperations, m.StatusUpdates, m.DesiredReplicas, m.HPAs, m.CoexistActions, m.FenceRefusals, m.Leader} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering controller metrics: %w", err)
		}
	}
	return m, nil
}
