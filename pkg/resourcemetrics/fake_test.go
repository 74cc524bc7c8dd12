package resourcemetrics_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/resourcemetrics"
	"github.com/promscaler/promscaler/pkg/resourcemetrics/resourcetest"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/promtest"
	"github.com/promscaler/promscaler/test/ruletest"
)

// testConfig is prometheus-adapter's documented resourceRules for cAdvisor
// series, with a 5m window.
var testConfig = resourcetest.CAdvisorRules("5m")

var compileRules = ruletest.Compile

// staticConfig is a SourceConfig serving rs from q.
func staticConfig(rs *rules.RuleSet, q promclient.SampleQuerier) resourcemetrics.SourceConfig {
	return resourcemetrics.SourceConfig{Rules: func() *rules.RuleSet { return rs }, Backends: promclient.Single[promclient.SampleQuerier](q)}
}

// sourceConfig is a SourceConfig serving testConfig from q.
func sourceConfig(t testing.TB, q promclient.SampleQuerier) resourcemetrics.SourceConfig {
	t.Helper()
	return staticConfig(compileRules(t, testConfig), q)
}

// mustSource is the Source of cfg; it fails the test when NewSource does.
func mustSource(t testing.TB, cfg resourcemetrics.SourceConfig) *resourcemetrics.Source {
	t.Helper()
	s, err := resourcemetrics.NewSource(cfg)
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	return s
}

// series is one sample the fake Prometheus holds.
type series struct {
	metric string // "cpu" or "memory"
	labels map[string]string
	value  float64
}

func podSeries(metric, ns, pod, container string, v float64) series {
	return series{metric: metric, labels: map[string]string{"namespace": ns, "pod": pod, "container": container}, value: v}
}

func nodeSeries(metric, node string, v float64) series {
	return series{metric: metric, labels: map[string]string{"node": node, "id": "/"}, value: v}
}

// fakeProm describes what the project's fake Prometheus (test/promtest)
// holds for a test: samples of testConfig's metrics at ts. client starts
// it and returns the real client talking to it.
type fakeProm struct {
	ts     time.Time
	series []series
	// unselected are labels whose matchers the fake does not apply, as a
	// query that does not select on them.
	unselected []string
	// err, when set, makes every query fail with a 503 saying it.
	err error

	srv *promtest.Server
}

// seriesNames are the series names of testConfig's cpu and memory.
var seriesNames = map[string]string{"cpu": "container_cpu_usage_seconds_total", "memory": "container_memory_working_set_bytes"}

// samples returns the series as samples at f.ts.
func (f *fakeProm) samples() model.Vector {
	out := make(model.Vector, 0, len(f.series))
	for _, s := range f.series {
		m := model.Metric{model.MetricNameLabel: model.LabelValue(seriesNames[s.metric])}
		for k, v := range s.labels {
			m[model.LabelName(k)] = model.LabelValue(v)
		}
		out = append(out, &model.Sample{Metric: m, Value: model.SampleValue(s.value), Timestamp: model.TimeFromUnixNano(f.ts.UnixNano())})
	}
	return out
}

// start starts the fake Prometheus holding f's samples (closed when the
// test ends) and returns it.
func (f *fakeProm) start(t testing.TB) *promtest.Server {
	t.Helper()
	f.srv = promtest.New(nil)
	t.Cleanup(f.srv.Close)
	f.srv.SetSamples(f.samples(), f.unselected...)
	if f.err != nil {
		body, err := json.Marshal(map[string]string{"status": "error", "errorType": "unavailable", "error": f.err.Error()})
		if err != nil {
			t.Fatal(err)
		}
		f.srv.Fail(promtest.Query, promtest.Failure{Status: http.StatusServiceUnavailable, Body: string(body)})
	}
	return f.srv
}

// client starts the fake Prometheus and returns the project's client of it.
func (f *fakeProm) client(t testing.TB) *promclient.Client {
	t.Helper()
	srv := f.start(t)
	c, err := promclient.New(promclient.Config{Address: srv.URL, HTTPClient: srv.Client(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("promclient.New: %v", err)
	}
	return c
}

// Queries returns the queries the fake received.
func (f *fakeProm) Queries() []string { return f.srv.Queries() }
