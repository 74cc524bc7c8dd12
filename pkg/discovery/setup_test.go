package discovery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/promtest"
	"github.com/promscaler/promscaler/test/ruletest"
)

// This file is the home of the fixtures the Discoverer's tests share: the
// rules and series, a Discoverer over the test kit's Prometheus, and what
// the tests ask of it.

const testConfig = `
rules:
- seriesQuery: '{__name__="pm_status",namespace!="",pod_name!="",state="active processes"}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod_name: {resource: pod}
  name:
    as: fpm_active_rate
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"^http_.*_total$",namespace!=""}'
  resources:
    template: <<.Resource>>
  name:
    matches: '^(.*)_total$'
    as: '${1}_per_second'
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"^http_.*_total$",namespace!=""}'
  resources:
    template: <<.Resource>>
  name:
    matches: '^http_(.*)_total$'
    as: 'http_${1}'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__="node_load1"}'
  resources:
    overrides:
      instance: {resource: node}
  metricsQuery: '<<.Series>>{<<.LabelMatchers>>}'
externalRules:
- seriesQuery: '{__name__="queue_length",namespace!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: '{__name__="queue_age"}'
  resources:
    namespaced: false
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>})'
`

// ls builds a label set from label pairs.
func ls(kv ...string) model.LabelSet {
	out := model.LabelSet{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
	}
	return out
}

// testSeries has several series per (metric, resource, namespace), labels
// that map to no resource, and a series of each rule's metric.
func testSeries() []model.LabelSet {
	var out []model.LabelSet
	for i := range 6 {
		ns := fmt.Sprintf("ns%d", i%2)
		pod := fmt.Sprintf("pod%d", i)
		for _, state := range []string{"active processes", "total processes"} {
			out = append(out, ls("__name__", "pm_status", "namespace", ns, "pod_name", pod, "state", state, "instance", "10.0.0."+pod))
		}
		for _, code := range []string{"200", "500"} {
			out = append(out, ls("__name__", "http_requests_total", "namespace", ns, "pod", pod, "code", code, "service", "web"))
		}
	}
	out = append(out,
		ls("__name__", "http_errors_total", "namespace", "ns1", "deployment", "web", "job", "x"),
		ls("__name__", "node_load1", "instance", "n1", "job", "node"),
		ls("__name__", "node_load1", "instance", "n2", "job", "node"),
		ls("__name__", "queue_length", "namespace", "q", "queue", "a"),
		ls("__name__", "queue_length", "namespace", "q", "queue", "b"),
		ls("__name__", "queue_age", "queue", "a"),
	)
	return out
}

type setup struct {
	fake    *promtest.Server
	disc    *discovery.Discoverer
	metrics *metrics.Metrics
	clock   *testingclock.FakeClock
}

// newSetup discovers the rules of yml from a fake Prometheus holding
// series, with strategy, on a fake clock.
func newSetup(t *testing.T, yml string, series []model.LabelSet, strategy discovery.Strategy) *setup {
	t.Helper()
	fake := newProm(t, series...)
	m := metrics.New()
	client := newClient(t, "", fake, m)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := options(promclient.Single[discovery.Prometheus](client), ruletest.Compile(t, yml), strategy, m)
	o.MaxAge, o.Clock = 5*time.Minute, clk
	return &setup{fake: fake, disc: newDiscoverer(t, o), metrics: m, clock: clk}
}

// options discover rs from backends with strategy every minute, scoped by
// the built-in resources, reporting to m.
func options(backends discovery.Backends, rs *rules.RuleSet, strategy discovery.Strategy, m *metrics.Metrics) discovery.Options {
	return discovery.Options{
		Backends: backends,
		Rules:    rs,
		Interval: time.Minute,
		Strategy: strategy,
		Scoper:   discovery.MapperScoper{Mapper: kubemapper.New()},
		Metrics:  m,
	}
}

// newDiscoverer is the Discoverer of o; it fails the test when New does.
func newDiscoverer(t *testing.T, o discovery.Options) *discovery.Discoverer {
	t.Helper()
	d, err := discovery.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// started is a setup of the labels strategy over testConfig and
// testSeries, running until the test ends, after its first discovery.
func started(t *testing.T) (*setup, context.Context) {
	t.Helper()
	s := newSetup(t, testConfig, testSeries(), discovery.StrategyLabels)
	ctx := s.run(t)
	waitFor(t, "first discovery", s.disc.Ready)
	return s, ctx
}

// runOnce runs one discovery pass and fails the test on an error.
func (s *setup) runOnce(t *testing.T) {
	t.Helper()
	if err := s.disc.RunOnce(context.Background()); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
}

// reference is what the series strategy discovers from testConfig over
// testSeries: what every strategy must find.
func reference(t *testing.T) []string {
	t.Helper()
	ref := newSetup(t, testConfig, testSeries(), discovery.StrategySeries)
	ref.runOnce(t)
	return dump(ref.disc.Index())
}

// passes returns the number of successful passes so far.
func (s *setup) passes() float64 {
	return testutil.ToFloat64(s.metrics.DiscoveryRuns.WithLabelValues(metrics.OutcomeSuccess))
}

// failures returns the number of failed passes so far.
func (s *setup) failures() float64 {
	return testutil.ToFloat64(s.metrics.DiscoveryRuns.WithLabelValues(metrics.OutcomeFailure))
}

// wantPasses fails the test unless want successful passes have run.
func (s *setup) wantPasses(t *testing.T, want float64, when string) {
	t.Helper()
	if got := s.passes(); got != want {
		t.Fatalf("%s: %v passes, want %v", when, got, want)
	}
}

// wantRefreshes fails the test unless want passes were asked on demand.
func (s *setup) wantRefreshes(t *testing.T, want float64) {
	t.Helper()
	if got := testutil.ToFloat64(s.metrics.DiscoveryRefreshes); got != want {
		t.Errorf("promscaler_discovery_refreshes_total = %v, want %v", got, want)
	}
}

// runOnceFails runs one discovery pass, fails the test with msg unless it
// fails, and returns its error.
func (s *setup) runOnceFails(t *testing.T, msg string) error {
	t.Helper()
	err := s.disc.RunOnce(context.Background())
	if err == nil {
		t.Fatal(msg)
	}
	return err
}

// serves reports whether the current index serves metric for gr in
// namespace ns ("" for cluster-scoped objects).
func (s *setup) serves(gr schema.GroupResource, ns, metric string) bool {
	_, ok := s.disc.Index().Custom(gr, ns, metric)
	return ok
}

// Resources the tests look metrics up for.
var (
	podsGR  = schema.GroupResource{Resource: "pods"}
	nodesGR = schema.GroupResource{Resource: "nodes"}
)

// addLogins adds a series of a name the index does not know yet, whose
// metric is http_logins_per_second.
func (s *setup) addLogins() {
	s.fake.SetSeries(append(testSeries(), ls("__name__", "http_logins_total", "namespace", "ns0", "pod", "pod0")))
}

// run runs the Discoverer's loop until the test ends, with the context it
// gets.
func (s *setup) run(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.disc.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ctx
}

// dump renders everything an index answers, for comparisons.
func dump(x *discovery.Index) []string {
	var out []string
	for _, info := range x.CustomMetrics() {
		for _, c := range x.CustomCandidates(info.GroupResource, info.Namespaced, info.Metric) {
			out = append(out, fmt.Sprintf("custom %s %s <- %s %v", info.String(), info.Metric, c.Entry, c.Namespaces))
		}
	}
	for _, info := range x.ExternalMetrics() {
		for _, c := range x.ExternalCandidates(info.Metric) {
			out = append(out, fmt.Sprintf("external %s <- %s %v", info.Metric, c.Entry, c.Namespaces))
		}
	}
	for _, c := range x.Conflicts() {
		out = append(out, "conflict "+c.String())
	}
	return out
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newProm starts the test kit's Prometheus holding series, closed when the
// test ends.
func newProm(t *testing.T, series ...model.LabelSet) *promtest.Server {
	t.Helper()
	s := promtest.New(series)
	t.Cleanup(s.Close)
	return s
}

// newClient is the project's client of s, named backend in its metrics.
func newClient(t *testing.T, backend string, s *promtest.Server, m *metrics.Metrics) *promclient.Client {
	t.Helper()
	c, err := promclient.New(promclient.Config{Backend: backend, Address: s.URL, HTTPClient: s.Client(), Metrics: m, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
