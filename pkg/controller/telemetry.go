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
	var all []prometheus.Collector
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help}
	}
	counters := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts(opts(name, help)), labels)
		all = append(all, c)
		return c
	}
	histograms := func(name, help string, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help,
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}}, labels)
		all = append(all, h)
		return h
	}
	m := &Metrics{
		ReconcileDuration: histograms("reconcile_duration_seconds",
			"Duration of one reconcile of one HPA (scale read, metric reads, decision, writes).", "result"),
		Decisions: counters("decisions_total",
			"Reconcile decisions by outcome and the condition reason that explains them.", "decision", "reason"),
		MetricFetchErrors: counters("metric_fetch_errors_total",
			"Failed reads of the metrics APIs, by HPA metric source type.", "source"),
		MetricFetchDuration: histograms("metric_fetch_duration_seconds",
			"Duration of reads of the metrics APIs, by HPA metric source type.", "source"),
		ScaleOperations: counters("scale_operations_total",
			"Rescales of scale targets by direction and result (dry_run: decided, not applied).", "direction", "result"),
		StatusUpdates: counters("status_updates_total", "HPA status writes by result.", "result"),
		DesiredReplicas: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("desired_replicas",
			"The desired replica count of the last reconcile of each HPA.")), []string{"namespace", "hpa"}),
		HPAs: prometheus.NewGauge(prometheus.GaugeOpts(opts("hpas",
			"HPAs whose state (recommendations, scale events) the controller keeps."))),
		CoexistActions: counters("coexist_actions_total",
			"Actions beside kube-controller-manager: ScaledToZero, Activated, FallbackApplied, FallbackEnded, InvalidAnnotation.", "action"),
		FenceRefusals: prometheus.NewCounter(prometheus.CounterOpts(opts("fence_refusals_total",
			"Times the leader lease fence refused a write (lease lost or not renewed in time) and stopped the workers."))),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts(opts("leader",
			"1 while this process is the active controller (holds the lease or runs without leader election)."))),
	}
	for _, c := range append(all, m.DesiredReplicas, m.HPAs, m.FenceRefusals, m.Leader) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering controller metrics: %w", err)
		}
	}
	return m, nil
}
