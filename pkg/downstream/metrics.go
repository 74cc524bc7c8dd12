package downstream

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// setMetrics are the downstream series of /metrics: request counts, and a
// collector reading each downstream's state at scrape time.
type setMetrics struct {
	set            *Set
	requests       *prometheus.CounterVec
	reloadFailures prometheus.Counter

	up, listed, overlap *prometheus.Desc
}

func newSetMetrics(s *Set) *setMetrics {
	return &setMetrics{
		set: s,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "promscaler_downstream_requests_total",
			Help: "Metric requests forwarded to a downstream metrics server, by downstream, api (custom, external) and the HTTP code of the answer (503: not answered in time, known down, or busy).",
		}, []string{"downstream", "api", "code"}),
		reloadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "promscaler_downstream_config_reload_failures_total",
			Help: "Re-reads of the downstream configuration file that failed (the previous configuration stays in service).",
		}),
		up: prometheus.NewDesc("promscaler_downstream_up",
			"1 while the downstream answers, 0 while it is known down (its metrics answer 503 at once until a probe gets an answer) or not resolved.",
			[]string{"downstream"}, nil),
		listed: prometheus.NewDesc("promscaler_downstream_metrics",
			"Metrics the downstream lists in its last good discovery document, by api.",
			[]string{"downstream", "api"}, nil),
		overlap: prometheus.NewDesc("promscaler_downstream_overlap",
			"1 for each metric both promscaler and a downstream serve; served_by says who answers it (promscaler unless the configuration routes it to the downstream).",
			[]string{"api", "metric", "downstream", "served_by"}, nil),
	}
}

func (m *setMetrics) register(r prometheus.Registerer) error {
	return errors.Join(r.Register(m.requests), r.Register(m.reloadFailures), r.Register(m))
}

// observe counts one forwarded request.
func (m *setMetrics) observe(downstream string, api API, err error) {
	m.requests.WithLabelValues(downstream, string(api), codeOf(err)).Inc()
}

// Describe implements prometheus.Collector.
func (m *setMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.up
	ch <- m.listed
	ch <- m.overlap
}

// Collect implements prometheus.Collector.
func (m *setMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, st := range m.set.Status() {
		up := 0.0
		if st.Guard.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, up, st.Name)
		ch <- prometheus.MustNewConstMetric(m.listed, prometheus.GaugeValue, float64(st.Custom), st.Name, string(Custom))
		ch <- prometheus.MustNewConstMetric(m.listed, prometheus.GaugeValue, float64(st.External), st.Name, string(External))
	}
	for _, o := range m.set.Overlaps() {
		ch <- prometheus.MustNewConstMetric(m.overlap, prometheus.GaugeValue, 1, string(o.API), o.Name, o.Downstream, o.ServedBy)
	}
}
