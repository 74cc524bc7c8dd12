// Package metrics owns the adapter's own Prometheus metrics: one registry
// (never the process-wide default) and every metric the adapter exports on
// /metrics, created once and handed to the packages that record them.
//
// Label values are part of the contract with dashboards, so they are fixed
// here as constants; recorders pass them rather than free-form strings.
package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/promscaler/promscaler/internal/version"
)

// Namespace prefixes every metric name.
const Namespace = "promscaler"

// API label values: which metrics API a rule, index entry or request belongs to.
const (
	APICustom   = "custom"
	APIExternal = "external"
	APIResource = "resource"
	// APIOther labels requests that are not for a metrics API
	// (discovery documents, health, openapi, /metrics).
	APIOther = "other"
)

// Outcome label values.
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
)

// Prometheus request outcomes, recorded by pkg/promclient.
const (
	// PromOutcomeSuccess: a 2xx answer decoded without error.
	PromOutcomeSuccess = "success"
	// PromOutcomeBadQuery: Prometheus rejected the request (HTTP 400/422),
	// usually a PromQL error in the configuration.
	PromOutcomeBadQuery = "bad_query"
	// PromOutcomeServerError: any other non-2xx answer (5xx, 4xx from a proxy).
	PromOutcomeServerError = "server_error"
	// PromOutcomeBadResponse: a 2xx answer that could not be decoded
	// (truncated JSON, unexpected result type).
	PromOutcomeBadResponse = "bad_response"
	// PromOutcomeTimeout: the per-query timeout expired.
	PromOutcomeTimeout = "timeout"
	// PromOutcomeCanceled: every caller went away before an answer.
	PromOutcomeCanceled = "canceled"
	// PromOutcomeNetwork: the connection failed (refused, reset, TLS).
	PromOutcomeNetwork = "network_error"
	// PromOutcomeBackendDown: not sent, the backend is known down
	// (promclient.Guard's breaker).
	PromOutcomeBackendDown = "backend_down"
	// PromOutcomeBusy: not sent, the backend has its maximum of requests
	// in flight (promclient.Guard).
	PromOutcomeBusy = "busy"
	// PromOutcomeAnswerTooLarge: the answer was refused for its size
	// (promclient.AnswerTooLargeError), not read to its end.
	PromOutcomeAnswerTooLarge = "answer_too_large"
)

// DefaultBackend is the "backend" label value of the backend the
// --prometheus-* flags define (promclient.DefaultBackendName).
const DefaultBackend = "default"

// Prometheus endpoint label values, recorded by pkg/promclient.
const (
	EndpointQuery       = "query"
	EndpointSeries      = "series"
	EndpointLabelValues = "label_values"
	EndpointLabelNames  = "labels"
)

// Metrics holds the registry and every collector the adapter exports. Build
// it with New; a nil *Metrics is not valid, tests use New too.
//
// Label names, in order, are documented on each field and are what
// WithLabelValues expects.
type Metrics struct {
	// Registry is the adapter's own registry; the server serves it on /metrics.
	Registry *prometheus.Registry

	// DiscoveryDuration observes one complete discovery pass (every rule),
	// in seconds. promscaler_discovery_duration_seconds.
	DiscoveryDuration prometheus.Histogram
	// DiscoveryRuns counts discovery passes by outcome (OutcomeSuccess when
	// every rule succeeded, OutcomeFailure otherwise). Labels: outcome.
	DiscoveryRuns *prometheus.CounterVec
	// DiscoveryRefreshes counts the passes asked for by requests naming a
	// metric the index lacks (discovery.Discoverer.Refresh), before
	// coalescing, and by listings of every metric
	// (discovery.Discoverer.RefreshList), once per pass they ask for.
	// promscaler_discovery_refreshes_total.
	DiscoveryRefreshes prometheus.Counter
	// DiscoveryLastSuccess is the Unix time of the last pass in which every
	// rule succeeded.
	DiscoveryLastSuccess prometheus.Gauge
	// DiscoveredSeries is the number of series (or grouped rows) the last
	// successful discovery of a rule returned. Labels: api, rule.
	DiscoveredSeries *prometheus.GaugeVec
	// DiscoveredMetrics is the number of distinct metrics (per resource) a
	// rule currently contributes to the index. Labels: api, rule.
	DiscoveredMetrics *prometheus.GaugeVec
	// DiscoveryFailures counts failed discoveries of a rule (the rule keeps
	// its last good result). Labels: api, rule.
	DiscoveryFailures *prometheus.CounterVec
	// DiscoveryBackendUp is 1 when the last discovery pass got an answer
	// from the backend for every seriesQuery of its rules, 0 when one
	// failed. Labels: backend.
	DiscoveryBackendUp *prometheus.GaugeVec
	// MetricConflicts is the number of (resource, metric) pairs produced by
	// more than one rule in the current index. Labels: api.
	MetricConflicts *prometheus.GaugeVec

	// PrometheusRequestDuration observes each request sent to Prometheus, in
	// seconds. Labels: backend (the backend's name, DefaultBackend for the
	// --prometheus-* flags'), endpoint (Endpoint*), outcome (PromOutcome*).
	// A client records through ForBackend's curried copy.
	PrometheusRequestDuration *prometheus.HistogramVec
	// CoalescedQueries counts calls answered by joining an identical request
	// already in flight, or by the result of one that completed after the
	// call's API request arrived, instead of sending a new one. Labels:
	// backend, endpoint.
	CoalescedQueries *prometheus.CounterVec
	// CacheHits counts calls answered from the short-TTL result cache.
	// Labels: backend, endpoint.
	CacheHits *prometheus.CounterVec
	// PrometheusUp, PrometheusInFlight and PrometheusRejected are the
	// backend guards' state (promclient.Guard). Labels: backend; reason
	// for PrometheusRejected.
	PrometheusUp       *prometheus.GaugeVec
	PrometheusInFlight *prometheus.GaugeVec
	PrometheusRejected *prometheus.CounterVec
	// PrometheusMaxSampleAge is the backend's maximum sample age in seconds
	// (0: off), and StaleSamplesDropped counts the samples of its answers
	// the client dropped as older than the maximum age in force (the
	// backend's or the rule's). Labels: backend.
	PrometheusMaxSampleAge *prometheus.GaugeVec
	StaleSamplesDropped    *prometheus.CounterVec

	// APIRequests counts requests served by the API server. Labels: api
	// (APICustom, APIExternal, APIResource, APIOther), code (HTTP status).
	APIRequests *prometheus.CounterVec
	// APIRequestDuration observes requests served by the API server, in
	// seconds. Labels: api.
	APIRequestDuration *prometheus.HistogramVec
	// AnswerTurnWait observes how long a request whose data was in hand
	// waited for its turn to build its answer (--max-concurrent-answers).
	AnswerTurnWait prometheus.Histogram

	// ClientCertAuthentications counts requests presenting a client
	// certificate by how they were authenticated (certauth.Result: cached,
	// verified, library). Labels: result.
	ClientCertAuthentications *prometheus.CounterVec

	// ConfigReloads counts configuration reload attempts. Labels: outcome.
	ConfigReloads *prometheus.CounterVec
	// ConfigLastReloadSuccessful is 1 when the last reload attempt succeeded
	// (or none happened yet) and 0 when the serving config is stale.
	ConfigLastReloadSuccessful prometheus.Gauge
	// ConfigLastReloadSuccess is the Unix time of the last successful load.
	ConfigLastReloadSuccess prometheus.Gauge
}

// New creates a fresh registry and registers every adapter metric in it. It
// does not register the Go runtime and process collectors: the server merges
// this registry with the Kubernetes component registry, which has them.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	f := factory{promauto.With(reg)}
	m := &Metrics{
		Registry: reg,
		DiscoveryDuration: f.histogram("discovery", "duration_seconds",
			"Duration of a complete discovery pass over every rule.",
			[]float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}),
		DiscoveryRuns: f.counterVec("discovery", "runs_total",
			"Discovery passes by outcome (failure: at least one rule failed).", "outcome"),
		DiscoveryRefreshes: f.counter("discovery", "refreshes_total",
			"Discovery passes asked for by requests naming a metric the index lacks (calls sharing one pass count once each) and by listings of every metric (once per pass)."),
		DiscoveryLastSuccess: f.gauge("discovery", "last_success_timestamp_seconds",
			"Unix time of the last discovery pass in which every rule succeeded."),
		DiscoveredSeries: f.gaugeVec("discovery", "series",
			"What the last successful discovery of a rule returned: series (series and grouped strategies), or (name, namespace, resource label) rows (labels strategy, the default, which does not count series).", "api", "rule"),
		DiscoveredMetrics: f.gaugeVec("discovery", "metrics",
			"Distinct metrics per resource a rule contributes to the current index.", "api", "rule"),
		DiscoveryFailures: f.counterVec("discovery", "rule_failures_total",
			"Failed discoveries of a rule; the rule keeps its last good result.", "api", "rule"),
		DiscoveryBackendUp: f.gaugeVec("discovery", "backend_up",
			"1 when the last discovery pass got an answer from the backend for every seriesQuery of its rules, 0 when one failed (its rules keep their last good result).", "backend"),
		MetricConflicts: f.gaugeVec("discovery", "metric_conflicts",
			"Resource/metric pairs produced by more than one rule in the current index.", "api"),
		PrometheusRequestDuration: f.histogramVec("prometheus", "request_duration_seconds",
			"Duration of requests to Prometheus by backend, endpoint and outcome.", requestBuckets, "backend", "endpoint", "outcome"),
		CoalescedQueries: f.counterVec("prometheus", "coalesced_requests_total",
			"Calls answered by an identical Prometheus request already in flight, or by one that completed after the call's API request arrived, by backend and endpoint.", "backend", "endpoint"),
		CacheHits: f.counterVec("prometheus", "cache_hits_total",
			"Calls answered from the short-TTL result cache, by backend and endpoint.", "backend", "endpoint"),
		PrometheusUp: f.gaugeVec("prometheus", "up",
			"1 while the backend answers, 0 while it is known down (consecutive timeouts or connection errors: its requests fail at once with 503 until a probe gets an answer). Labels: backend.", "backend"),
		PrometheusInFlight: f.gaugeVec("prometheus", "requests_in_flight",
			"Requests to the backend awaiting their answer. Labels: backend.", "backend"),
		PrometheusRejected: f.counterVec("prometheus", "rejected_requests_total",
			"Requests not sent to the backend: backend_down (known down, waiting for the next probe), busy (its maximum of requests in flight reached), too_many_waiting (its maximum of requests waiting on its answers reached while it answers none). Labels: backend, reason.", "backend", "reason"),
		PrometheusMaxSampleAge: f.gaugeVec("prometheus", "max_sample_age_seconds",
			"The backend's maximum sample age (--prometheus-max-sample-age, max_sample_age): a sample older is no value. 0: off. A rule's maxSampleAge overrides it for its queries. Labels: backend.", "backend"),
		StaleSamplesDropped: f.counterVec("prometheus", "stale_samples_dropped_total",
			"Samples of instant query answers dropped by the adapter as older than the maximum sample age in force (the rule's or the backend's), in addition to what the backend's lookback_delta already left out. Labels: backend.", "backend"),
		APIRequests: f.counterVec("api", "requests_total",
			"Requests served by the API server by metrics API and HTTP code.", "api", "code"),
		APIRequestDuration: f.histogramVec("api", "request_duration_seconds",
			"Duration of requests served by the API server by metrics API.", requestBuckets, "api"),
		AnswerTurnWait: f.histogram("api", "answer_turn_wait_seconds",
			"How long a request whose data was in hand waited for its turn to build and encode its answer (--max-concurrent-answers answers at once).", requestBuckets),
		ClientCertAuthentications: f.counterVec("api", "client_cert_authentications_total",
			"Requests presenting a client certificate by how they were authenticated: cached (a chain verified earlier, --client-cert-verify-cache-ttl), verified (its signatures verified now), library (left to the API server library's authenticator).", "result"),
		ConfigReloads: f.counterVec("config", "reloads_total",
			"Configuration reload attempts by outcome.", "outcome"),
		ConfigLastReloadSuccessful: f.gauge("config", "last_reload_successful",
			"1 if the last configuration reload attempt succeeded, 0 if the serving configuration is stale."),
		ConfigLastReloadSuccess: f.gauge("config", "last_reload_success_timestamp_seconds",
			"Unix time of the last successful configuration load."),
	}
	m.ConfigLastReloadSuccessful.Set(1)
	for _, o := range []string{OutcomeSuccess, OutcomeFailure} {
		m.DiscoveryRuns.WithLabelValues(o)
		m.ConfigReloads.WithLabelValues(o)
	}
	reg.MustRegister(version.NewCollector())
	return m
}

// requestBuckets are the buckets of request durations, in seconds.
var requestBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// factory creates collectors named promscaler_<subsystem>_<name> and
// registers them.
type factory struct{ promauto.Factory }

func (f factory) counter(subsystem, name, help string) prometheus.Counter {
	return f.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help})
}

func (f factory) gauge(subsystem, name, help string) prometheus.Gauge {
	return f.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help})
}

func (f factory) histogram(subsystem, name, help string, buckets []float64) prometheus.Histogram {
	return f.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets})
}

func (f factory) counterVec(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return f.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
}

func (f factory) gaugeVec(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	return f.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
}

func (f factory) histogramVec(subsystem, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return f.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets}, labels)
}

// ForBackend returns a copy of m whose Prometheus client metrics
// (PrometheusRequestDuration, CoalescedQueries, CacheHits) are curried with
// backend="name", so a client records through them with its other labels
// only. The registry and every other collector are shared with m.
func (m *Metrics) ForBackend(name string) (*Metrics, error) {
	cp := *m
	l := prometheus.Labels{"backend": name}
	dur, err := m.PrometheusRequestDuration.CurryWith(l)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", name, err)
	}
	cp.PrometheusRequestDuration = dur.(*prometheus.HistogramVec)
	if cp.CoalescedQueries, err = m.CoalescedQueries.CurryWith(l); err != nil {
		return nil, fmt.Errorf("backend %q: %w", name, err)
	}
	if cp.CacheHits, err = m.CacheHits.CurryWith(l); err != nil {
		return nil, fmt.Errorf("backend %q: %w", name, err)
	}
	return &cp, nil
}
