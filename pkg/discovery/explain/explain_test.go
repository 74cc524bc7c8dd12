package explain

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/test/ruletest"
)

const testConfig = `
rules:
- seriesQuery: '{__name__=~"^jobs_.*",namespace!=""}'
  seriesFilters:
  - is: '_total$'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name:
    matches: '^jobs_(.*)_total$'
    as: 'jobs_${1}'
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
- seriesQuery: '{__name__="jobs_done_total",namespace!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name:
    as: jobs_done
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__="backlog"}'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
externalQueries:
- name: fixed
  query: 'vector(1)'
- name: fresh
  query: 'queue_depth{<<.LabelMatchers>>}'
  maxSampleAge: 45s
`

func input(t *testing.T, series ...model.LabelSet) Input {
	t.Helper()
	rs := ruletest.Compile(t, testConfig)
	in, err := discovery.MatchSeries(rs, series)
	if err != nil {
		t.Fatal(err)
	}
	return Input{Rules: rs, Series: in, All: series}
}

var pods = schema.GroupResource{Resource: "pods"}

func TestExplain(t *testing.T) {
	t.Parallel()
	series := []model.LabelSet{
		{"__name__": "jobs_done_total", "namespace": "a", "pod": "p1"},
		{"__name__": "jobs_queued", "namespace": "a", "pod": "p1"},
		{"__name__": "backlog", "queue": "q"},
	}
	sel, err := labels.Parse("queue=q")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		req       Request
		wantQuery string
		wantNotes []string
		wantErr   []string // substrings, in order
	}{
		{
			name:      "served, with a shadowed rule",
			req:       Request{Metric: "jobs_done", Resource: pods, Namespace: "a", Names: []string{"p1"}},
			wantQuery: `sum(jobs_done_total{namespace="a",pod="p1"}) by (pod)`,
			wantNotes: []string{
				`custom metric "jobs_done" for pods in namespace "a": served by rules[1] (series "jobs_done_total")`,
				`shared evaluation: yes, once several namespaces ask within a sync period the adapter answers from sum(jobs_done_total{pod!=""}) by (namespace,pod) (sliced by namespace, pod), objects it lacks per request`,
				`also produced by rules[0] (series "jobs_done_total"), shadowed by rules[1] (the last rule in the configuration wins, as in prometheus-adapter)`,
			},
		},
		{
			name:    "dropped by a filter",
			req:     Request{Metric: "jobs_queued", Resource: pods, Namespace: "a", Names: []string{"p1"}},
			wantErr: []string{`rules[0]: series "jobs_queued" dropped: seriesFilters[0].is "_total$" does not match it`, `rules[1]: name.matches/as turn its series names into jobs_done`},
		},
		{
			name:      "namespace without discovered series: the winning rule, the query decides",
			req:       Request{Metric: "jobs_done", Resource: pods, Namespace: "b", Names: []string{"p1"}},
			wantQuery: `sum(jobs_done_total{namespace="b",pod="p1"}) by (pod)`,
			wantNotes: []string{
				`custom metric "jobs_done" for pods in namespace "b": served by rules[1] (series "jobs_done_total")`,
				`no series of it were discovered in namespace "b": it is served by the last rule producing it, and the query decides whether values exist (a namespace created since the last relist)`,
				`shared evaluation: yes, once several namespaces ask within a sync period the adapter answers from sum(jobs_done_total{pod!=""}) by (namespace,pod) (sliced by namespace, pod), objects it lacks per request`,
			},
		},
		{
			name:    "external rule namespaced without namespace label",
			req:     Request{External: true, Metric: "backlog", Namespace: "a"},
			wantErr: []string{`externalRules[0]: namespaced (the default) but no label maps to namespaces`},
		},
		{
			name:      "externalQueries entry",
			req:       Request{External: true, Metric: "fixed", Namespace: "a", MetricSelector: sel},
			wantQuery: `vector(1)`,
			wantNotes: []string{`external metric "fixed" in namespace "a": served by externalQueries[0] (a fixed query, no discovery)`},
		},
		{
			name:      "externalQueries entry with a maximum sample age",
			req:       Request{External: true, Metric: "fresh", Namespace: "a"},
			wantQuery: `queue_depth{}`,
			wantNotes: []string{
				`external metric "fresh" in namespace "a": served by externalQueries[1] (a fixed query, no discovery)`,
				`maxSampleAge 45s (externalQueries[1]): a sample older is no value (sent as lookback_delta=45s and checked on the answer's timestamps)`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := Explain(input(t, series...), tc.req)
			if tc.wantErr != nil {
				if !errors.Is(err, ErrNotServed) {
					t.Fatalf("error = %v, want ErrNotServed", err)
				}
				msg := err.Error()
				for _, w := range tc.wantErr {
					i := strings.Index(msg, w)
					if i < 0 {
						t.Fatalf("error does not contain %q (in order):\n%s", w, err)
					}
					msg = msg[i+len(w):]
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Query.Expr != tc.wantQuery {
				t.Errorf("query %q, want %q", res.Query.Expr, tc.wantQuery)
			}
			if diff := cmp.Diff(tc.wantNotes, res.Notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExplainNoRuleSet(t *testing.T) {
	t.Parallel()
	if _, err := Explain(Input{}, Request{Metric: "x"}); err == nil {
		t.Error("no error without a rule set")
	}
}
