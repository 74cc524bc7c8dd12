package discovery_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/test/promtest"
	"github.com/promscaler/promscaler/test/ruletest"
)

// diffConfig exercises what the labels strategy must reproduce: overrides,
// a template, two labels mapping to namespaces, rules of one seriesQuery
// with different namespace labels, cluster-scoped resources, a seriesQuery
// requiring the namespace and resource labels, seriesFilters
// and name.matches, a bare-name and a name{...} seriesQuery, and external
// rules namespaced or not.
const diffConfig = `
rules:
- seriesQuery: '{__name__=~"m.*"}'
  seriesFilters:
  - isNot: '^m3$'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
      node: {resource: node}
  name: {as: 'a_${0}'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"m.*"}'
  resources:
    overrides:
      exported_namespace: {resource: namespace}
      pod: {resource: pod}
      service: {resource: service}
  name: {matches: '^m([0-3])$', as: 'b_${1}'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"m.*",pod!=""}'
  resources:
    template: <<.Resource>>
  name: {matches: '^m([0-2])$', as: 'tmpl_${1}'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: 'm1'
  resources:
    template: <<.Resource>>
    overrides:
      exported_namespace: {resource: namespace}
  name: {as: 'c_m1'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: 'm2{job="a"}'
  resources:
    overrides:
      namespace: {resource: namespace}
      deployment: {group: apps, resource: deployment}
      node: {resource: node}
  name: {as: 'd_m2'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"m[0-9]",node!=""}'
  resources:
    overrides:
      node: {resource: node}
  name: {matches: '^m(.)$', as: 'n_${1}'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"m[0-4]",namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
      node: {resource: node}
      service: {resource: service}
  name: {as: 'e_${0}'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__=~"m.*"}'
  seriesFilters:
  - is: '^m[0-2]$'
  resources:
    overrides:
      namespace: {resource: namespace}
  name: {as: 'x_${0}'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: '{__name__=~"m[34]"}'
  resources:
    namespaced: false
  name: {as: 'y_${0}'}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: '{__name__=~"m.*",exported_namespace!=""}'
  resources:
    overrides:
      exported_namespace: {resource: namespace}
  name: {as: 'z_${0}'}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>})'
`

// randomSeries returns up to 40 distinct series of names m0..m4 with each
// optional label present or not.
func randomSeries(r *rand.Rand) []model.LabelSet {
	opt := []struct {
		label  string
		values []string
	}{
		{"namespace", []string{"ns0", "ns1", "ns2"}},
		{"exported_namespace", []string{"e0", "e1"}},
		{"pod", []string{"p0", "p1"}},
		{"node", []string{"n0", "n1"}},
		{"service", []string{"s0"}},
		{"deployment", []string{"d0"}},
		{"job", []string{"a", "b"}},
	}
	n := r.IntN(41)
	out := make([]model.LabelSet, 0, n)
	for i := range n {
		ls := model.LabelSet{"__name__": model.LabelValue(fmt.Sprintf("m%d", r.IntN(5))), "id": model.LabelValue(fmt.Sprint(i))}
		for _, o := range opt {
			if r.IntN(2) == 0 {
				ls[model.LabelName(o.label)] = model.LabelValue(o.values[r.IntN(len(o.values))])
			}
		}
		out = append(out, ls)
	}
	return out
}

// TestLabelsStrategyMatchesSeries is the differential test of the labels
// strategy: for random series, the index it builds is the series strategy's.
func TestLabelsStrategyMatchesSeries(t *testing.T) {
	t.Parallel()
	fake := newProm(t)
	t.Cleanup(fake.Client().CloseIdleConnections)
	client := newClient(t, "", fake, metrics.New())
	rules := ruletest.Compile(t, diffConfig)
	run := func(st discovery.Strategy) []string {
		t.Helper()
		d := newDiscoverer(t, options(promclient.Single[discovery.Prometheus](client), rules, st, metrics.New()))
		if err := d.RunOnce(context.Background()); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		return dump(d.Index())
	}
	nonEmpty := 0
	for seed := range uint64(100) {
		series := randomSeries(rand.New(rand.NewPCG(seed, 42)))
		fake.SetSeries(series)
		want := run(discovery.StrategySeries)
		if len(want) > 0 {
			nonEmpty++
		}
		for _, st := range []discovery.Strategy{discovery.StrategyLabels, discovery.StrategyGrouped} {
			if diff := cmp.Diff(want, run(st)); diff != "" {
				var b strings.Builder
				for _, s := range series {
					fmt.Fprintln(&b, s)
				}
				t.Fatalf("seed %d: index (-series +%s):\n%s\nseries:\n%s", seed, st, diff, b.String())
			}
		}
	}
	if nonEmpty < 60 {
		t.Errorf("only %d of 100 random cases discovered anything", nonEmpty)
	}
	if fake.Calls(promtest.Query) == 0 || fake.Calls(promtest.LabelValues) == 0 {
		t.Error("the strategies did not ask what they should")
	}
}

// TestLabelsStrategyRequests: the labels strategy asks only the label
// endpoints, and nothing per name for names no rule keeps.
func TestLabelsStrategyRequests(t *testing.T) {
	t.Parallel()
	s := newSetup(t, testConfig, append(testSeries(),
		// http_* names no rule of that seriesQuery keeps.
		ls("__name__", "http_requests_count", "namespace", "ns0", "pod", "x"),
		ls("__name__", "http_x_total_bucket", "namespace", "ns0", "pod", "x"),
	), discovery.StrategyLabels)
	s.runOnce(t)
	if got := s.fake.Calls(promtest.Query) + s.fake.Calls(promtest.Series); got != 0 {
		t.Errorf("labels strategy sent %d queries or series lists, want 0", got)
	}
	// One names call per distinct seriesQuery (5), then per kept name the
	// namespaces of each namespaced resource label: pm_status (pod_name),
	// http_requests_total (pod, service), http_errors_total (deployment,
	// job), queue_length; label names for the template rules' names and
	// node_load1 (not for pm_status and queue_length, whose seriesQueries
	// require every label their rules map), and no cluster-wide check (every
	// seriesQuery with a namespaced resource requires namespace).
	if got, want := s.fake.Calls(promtest.LabelValues), 5+1+2+2+1; got != want {
		t.Errorf("%d label-values calls, want %d:\n%s", got, want, strings.Join(s.fake.Matches(), "\n"))
	}
	if got, want := s.fake.Calls(promtest.Labels), 3; got != want {
		t.Errorf("%d label-names calls, want %d:\n%s", got, want, strings.Join(s.fake.Matches(), "\n"))
	}
	for _, sel := range s.fake.Matches() {
		if strings.Contains(sel, "http_requests_count") || strings.Contains(sel, "http_x_total_bucket") {
			t.Errorf("asked about a name no rule keeps: %s", sel)
		}
	}
	if diff := cmp.Diff(reference(t), dump(s.disc.Index())); diff != "" {
		t.Errorf("index (-series +labels):\n%s", diff)
	}
	// The per-rule gauge counts rows (name, namespace, resource label).
	if got := testutil.ToFloat64(s.metrics.DiscoveredSeries.WithLabelValues(metrics.APICustom, "rules[0]")); got != 3 {
		t.Errorf("rules[0] discovered rows = %v, want 3 (pm_status: pod_name in ns0 and ns1, namespace)", got)
	}
}

func TestLabelsStrategyFallbackAndFailures(t *testing.T) {
	t.Parallel()
	want := reference(t)
	tests := []struct {
		name     string
		endpoint string
		failure  promtest.Failure
		// Over two passes of 5 distinct seriesQueries.
		wantSeries int
		wantErr    bool
	}{
		{"match[] rejected", promtest.LabelValues, promtest.Failure{Status: http.StatusBadRequest}, 10, false},
		{"endpoint not found", promtest.LabelValues, promtest.Failure{Status: http.StatusNotFound}, 10, false},
		// Only the template rules' seriesQuery asks label names per name.
		{"per-name call rejected", promtest.Labels, promtest.Failure{Status: http.StatusUnprocessableEntity, Match: "http_requests_total"}, 2, false},
		{"transient", promtest.LabelValues, promtest.Failure{Status: http.StatusServiceUnavailable, Match: "pm_status"}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, testConfig, testSeries(), discovery.StrategyLabels)
			if tc.wantErr {
				// A good pass first: the failing seriesQuery keeps it.
				s.runOnce(t)
			}
			s.fake.Fail(tc.endpoint, tc.failure)
			for range 2 {
				err := s.disc.RunOnce(context.Background())
				if tc.wantErr != (err != nil) {
					t.Fatalf("RunOnce error = %v, want error %t", err, tc.wantErr)
				}
				if err != nil && !strings.Contains(err.Error(), tc.failure.Match) {
					t.Errorf("error %q does not name the seriesQuery", err)
				}
			}
			if diff := cmp.Diff(want, dump(s.disc.Index())); diff != "" {
				t.Errorf("index (-series +labels):\n%s", diff)
			}
			if got := s.fake.Calls(promtest.Series); got != tc.wantSeries {
				t.Errorf("%d series lists over two passes, want %d", got, tc.wantSeries)
			}
			if !s.serves(podsGR, "ns0", "fpm_active_rate") {
				t.Error("fpm_active_rate lost")
			}
		})
	}
}

// TestLabelsStrategyReloadKeepsLastGood: the labels strategy's rows are per
// rule; after a reload (new rule objects, same paths) a failing seriesQuery
// still serves its rules' last good rows.
func TestLabelsStrategyReloadKeepsLastGood(t *testing.T) {
	t.Parallel()
	s := newSetup(t, testConfig, testSeries(), discovery.StrategyLabels)
	s.runOnce(t)
	want := dump(s.disc.Index())
	s.disc.SetRules(ruletest.Compile(t, testConfig))
	s.fake.Fail(promtest.LabelValues, promtest.Failure{Status: http.StatusServiceUnavailable})
	s.runOnceFails(t, "RunOnce succeeded against a failing Prometheus")
	if diff := cmp.Diff(want, dump(s.disc.Index())); diff != "" {
		t.Errorf("index after a reload and a failed relist (-before +after):\n%s", diff)
	}
}
