package discovery

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/ruletest"
)

// ser builds a series from a name and label pairs.
func ser(name string, kv ...string) rules.Series {
	ls := model.LabelSet{model.MetricNameLabel: model.LabelValue(name)}
	for i := 0; i+1 < len(kv); i += 2 {
		ls[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
	}
	return rules.Series{Name: name, Labels: ls}
}

var (
	pods       = schema.GroupResource{Resource: "pods"}
	namespaces = schema.GroupResource{Resource: "namespaces"}
	nodes      = schema.GroupResource{Resource: "nodes"}
	deploys    = schema.GroupResource{Group: "apps", Resource: "deployments"}
)

const seedConfig = `
rules:
- seriesQuery: '{__name__="pm_status",namespace!="",pod_name!="",state="active processes"}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod_name: {resource: pod}
  name:
    as: fpm_active_rate
  metricsQuery: 'sum(max_over_time(<<.Series>>{<<.LabelMatchers>>,state="active processes"}[2m])) by (<<.GroupBy>>) / sum(max_over_time(<<.Series>>{<<.LabelMatchers>>,state="total processes"}[2m])) by (<<.GroupBy>>)'
`

const twoRulesConfig = `
rules:
- seriesQuery: '{__name__=~"^http_.*",namespace!="",pod!=""}'
  seriesFilters:
  - isNot: '_bucket$'
  resources:
    template: <<.Resource>>
  name:
    matches: '^(.*)_total$'
    as: '${1}_per_second'
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"^http_.*",namespace!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      kubernetes_pod: {resource: pod}
  name:
    matches: '^http_requests_(.*)$'
    as: 'http_requests_per_second'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: 'node_load1'
  resources:
    overrides:
      instance: {resource: node}
      namespace: {resource: namespace}
  metricsQuery: '<<.Series>>{<<.LabelMatchers>>}'
externalRules:
- seriesQuery: '{__name__="queue_length",namespace!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: '{__name__=~"queue_length|queue_age"}'
  resources:
    namespaced: false
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>})'
`

// lookup is one Index lookup and its expected answer.
type lookup struct {
	external bool
	gr       schema.GroupResource
	ns       string
	metric   string
	want     string // "rules[0]/series" or "" for not found
}

func describe(e Entry, ok bool) string {
	if !ok {
		return ""
	}
	return e.Rule.Path() + "/" + e.SeriesName
}

func TestBuildIndex(t *testing.T) {
	t.Parallel()
	seed := ruletest.Compile(t, seedConfig)
	two := ruletest.Compile(t, twoRulesConfig)
	tests := []struct {
		name          string
		rules         *rules.RuleSet
		series        [][]rules.Series // per rule: custom rules, then external
		wantCustom    []provider.CustomMetricInfo
		wantExternal  []provider.ExternalMetricInfo
		wantConflicts []string
		lookups       []lookup
	}{
		{
			name:  "seed example",
			rules: seed,
			series: [][]rules.Series{{
				ser("pm_status", "namespace", "abtest", "pod_name", "a", "state", "active processes"),
				ser("pm_status", "namespace", "abtest", "pod_name", "b", "state", "active processes"),
				ser("pm_status", "namespace", "other", "pod_name", "c", "state", "active processes"),
			}},
			wantCustom: []provider.CustomMetricInfo{
				{GroupResource: namespaces, Namespaced: false, Metric: "fpm_active_rate"},
				{GroupResource: pods, Namespaced: true, Metric: "fpm_active_rate"},
			},
			lookups: []lookup{
				{gr: pods, ns: "abtest", metric: "fpm_active_rate", want: "rules[0]/pm_status"},
				{gr: pods, ns: "other", metric: "fpm_active_rate", want: "rules[0]/pm_status"},
				{gr: pods, ns: "absent", metric: "fpm_active_rate", want: "rules[0]/pm_status"}, // a new namespace: the query decides
				{gr: pods, ns: "", metric: "fpm_active_rate", want: ""},
				{gr: namespaces, ns: "", metric: "fpm_active_rate", want: "rules[0]/pm_status"},
				{gr: pods, ns: "abtest", metric: "pm_status", want: ""},
				{external: true, ns: "abtest", metric: "fpm_active_rate", want: ""},
			},
		},
		{
			name:          "no series",
			rules:         seed,
			series:        [][]rules.Series{nil},
			wantConflicts: nil,
			lookups: []lookup{
				{gr: pods, ns: "abtest", metric: "fpm_active_rate", want: ""},
			},
		},
		{
			name:  "filters, naming, conflicts, cluster-scoped and external",
			rules: two,
			series: [][]rules.Series{
				{
					ser("http_requests_total", "namespace", "a", "pod", "p1"),
					ser("http_requests_total", "namespace", "b", "pod", "p2"),
					ser("http_latency_bucket", "namespace", "a", "pod", "p1"), // dropped by isNot
					ser("http_inflight", "namespace", "a", "pod", "p1"),       // does not match name.matches
					ser("http_requests_total", "namespace", "c", "deployment", "d"),
				},
				{
					ser("http_requests_total", "namespace", "b", "kubernetes_pod", "p2"),
					ser("http_requests_count", "namespace", "c", "kubernetes_pod", "p3"),
					ser("http_requests_count", "namespace", "b", "kubernetes_pod", "p3"),
					ser("http_requests_count", "job", "x"), // no resource label
				},
				{
					ser("node_load1", "instance", "n1", "namespace", "monitoring"),
				},
				{
					ser("queue_length", "namespace", "q1"),
					ser("queue_length", "namespace", "q2"),
				},
				{
					ser("queue_length", "job", "broker"),
					ser("queue_age", "job", "broker"),
				},
			},
			wantCustom: []provider.CustomMetricInfo{
				{GroupResource: namespaces, Namespaced: false, Metric: "http_requests_per_second"},
				{GroupResource: namespaces, Namespaced: false, Metric: "node_load1"},
				{GroupResource: nodes, Namespaced: false, Metric: "node_load1"},
				{GroupResource: pods, Namespaced: true, Metric: "http_requests_per_second"},
				{GroupResource: deploys, Namespaced: true, Metric: "http_requests_per_second"},
			},
			wantExternal: []provider.ExternalMetricInfo{{Metric: "queue_age"}, {Metric: "queue_length"}},
			// The last rule wins, as in prometheus-adapter; within a rule,
			// the largest series name.
			wantConflicts: []string{
				`custom.metrics.k8s.io metric http_requests_per_second for namespaces is produced by rules[1] (series "http_requests_total") and rules[1] (series "http_requests_count") cluster-wide; rules[1] wins`,
				`custom.metrics.k8s.io metric http_requests_per_second for namespaces is produced by rules[1] (series "http_requests_total") and rules[0] (series "http_requests_total") cluster-wide; rules[1] wins`,
				`custom.metrics.k8s.io metric http_requests_per_second for pods is produced by rules[1] (series "http_requests_total") and rules[1] (series "http_requests_count") in namespaces [b]; rules[1] wins`,
				`custom.metrics.k8s.io metric http_requests_per_second for pods is produced by rules[1] (series "http_requests_total") and rules[0] (series "http_requests_total") in namespaces [b]; rules[1] wins`,
				`external.metrics.k8s.io metric queue_length is produced by externalRules[1] (series "queue_length") and externalRules[0] (series "queue_length") in namespaces [q1,q2]; externalRules[1] wins`,
			},
			lookups: []lookup{
				{gr: pods, ns: "a", metric: "http_requests_per_second", want: "rules[0]/http_requests_total"},
				{gr: pods, ns: "b", metric: "http_requests_per_second", want: "rules[1]/http_requests_total"},
				{gr: pods, ns: "c", metric: "http_requests_per_second", want: "rules[1]/http_requests_count"},
				{gr: pods, ns: "d", metric: "http_requests_per_second", want: "rules[1]/http_requests_total"}, // new namespace: the winning (last) rule
				{gr: deploys, ns: "c", metric: "http_requests_per_second", want: "rules[0]/http_requests_total"},
				{gr: deploys, ns: "a", metric: "http_requests_per_second", want: "rules[0]/http_requests_total"},
				{gr: pods, ns: "a", metric: "http_latency", want: ""},
				{gr: pods, ns: "a", metric: "http_inflight", want: ""},
				{gr: nodes, ns: "", metric: "node_load1", want: "rules[2]/node_load1"},
				{gr: nodes, ns: "monitoring", metric: "node_load1", want: ""},
				{external: true, ns: "q1", metric: "queue_length", want: "externalRules[1]/queue_length"},
				{external: true, ns: "zz", metric: "queue_length", want: "externalRules[1]/queue_length"},
				{external: true, ns: "q1", metric: "queue_age", want: "externalRules[1]/queue_age"},
				{external: true, ns: "q1", metric: "queue_size", want: ""},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ruleList := tc.rules.Rules()
			if len(ruleList) != len(tc.series) {
				t.Fatalf("test has %d series lists for %d rules", len(tc.series), len(ruleList))
			}
			var in []RuleSeries
			for i, r := range ruleList {
				in = append(in, RuleSeries{Rule: r, Series: tc.series[i]})
			}
			x := BuildIndex(in, IndexOptions{Scoper: MapperScoper{Mapper: kubemapper.New()}})
			if diff := cmp.Diff(tc.wantCustom, x.CustomMetrics()); diff != "" {
				t.Errorf("CustomMetrics() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantExternal, x.ExternalMetrics()); diff != "" {
				t.Errorf("ExternalMetrics() (-want +got):\n%s", diff)
			}
			var conflicts []string
			for _, c := range x.Conflicts() {
				conflicts = append(conflicts, c.String())
			}
			if diff := cmp.Diff(tc.wantConflicts, conflicts); diff != "" {
				t.Errorf("Conflicts() (-want +got):\n%s", diff)
			}
			for _, l := range tc.lookups {
				var got string
				if l.external {
					got = describe(x.External(l.ns, l.metric))
				} else {
					got = describe(x.Custom(l.gr, l.ns, l.metric))
				}
				if got != l.want {
					t.Errorf("lookup %+v = %q, want %q", l, got, l.want)
				}
			}

			// The index does not depend on the order of its input.
			rev := make([]RuleSeries, len(in))
			for i := range in {
				s := append([]rules.Series(nil), in[i].Series...)
				for a, b := 0, len(s)-1; a < b; a, b = a+1, b-1 {
					s[a], s[b] = s[b], s[a]
				}
				rev[len(in)-1-i] = RuleSeries{Rule: in[i].Rule, Series: s}
			}
			y := BuildIndex(rev, IndexOptions{Scoper: MapperScoper{Mapper: kubemapper.New()}})
			if diff := cmp.Diff(x, y, cmp.AllowUnexported(Index{}), cmp.Comparer(func(a, b *rules.Rule) bool { return a == b })); diff != "" {
				t.Errorf("index depends on input order (-in order +reversed):\n%s", diff)
			}
		})
	}
}

func TestConflictCountAndRuleMetrics(t *testing.T) {
	t.Parallel()
	rs := ruletest.Compile(t, twoRulesConfig)
	r := rs.CustomRules()
	x := BuildIndex([]RuleSeries{
		{Rule: r[0], Series: []rules.Series{ser("http_requests_total", "namespace", "a", "pod", "p")}},
		{Rule: r[1], Series: []rules.Series{ser("http_requests_total", "namespace", "a", "kubernetes_pod", "p")}},
	}, IndexOptions{})
	if got := x.ConflictCount(rules.CustomMetricsAPI); got != 2 { // pods and namespaces
		t.Errorf("ConflictCount(custom) = %d, want 2", got)
	}
	if got := x.ConflictCount(rules.ExternalMetricsAPI); got != 0 {
		t.Errorf("ConflictCount(external) = %d, want 0", got)
	}
	for path, want := range map[string]int{"rules[0]": 2, "rules[1]": 2, "rules[2]": 0} {
		if got := x.RuleMetrics(path); got != want {
			t.Errorf("RuleMetrics(%s) = %d, want %d", path, got, want)
		}
	}
	cs := x.CustomCandidates(pods, true, "http_requests_per_second")
	var got []string
	for _, c := range cs {
		got = append(got, fmt.Sprintf("%s %v", c.Entry, c.Namespaces))
	}
	want := []string{`rules[1] (series "http_requests_total") [a]`, `rules[0] (series "http_requests_total") [a]`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CustomCandidates (-want +got):\n%s", diff)
	}
}

func TestEmptyIndex(t *testing.T) {
	t.Parallel()
	x := EmptyIndex()
	if _, ok := x.Custom(pods, "a", "m"); ok {
		t.Error("EmptyIndex().Custom found an entry")
	}
	if _, ok := x.External("a", "m"); ok {
		t.Error("EmptyIndex().External found an entry")
	}
	if len(x.CustomMetrics())+len(x.ExternalMetrics())+len(x.Conflicts()) != 0 {
		t.Error("EmptyIndex() lists metrics or conflicts")
	}
}

func TestScopers(t *testing.T) {
	t.Parallel()
	m := MapperScoper{Mapper: kubemapper.New()}
	for _, tc := range []struct {
		gr   schema.GroupResource
		want bool
	}{
		{pods, false}, {nodes, true}, {namespaces, true}, {deploys, false},
		{schema.GroupResource{Resource: "persistentvolumes"}, true},
		{schema.GroupResource{Group: "example.com", Resource: "widgets"}, false},
	} {
		if got := m.ClusterScoped(tc.gr); got != tc.want {
			t.Errorf("MapperScoper.ClusterScoped(%v) = %v, want %v", tc.gr, got, tc.want)
		}
		if got := (DefaultScoper{}).ClusterScoped(tc.gr); got != tc.want {
			t.Errorf("DefaultScoper.ClusterScoped(%v) = %v, want %v", tc.gr, got, tc.want)
		}
	}
}

// TestExternalUnscoped: a namespaced external rule whose series carry no
// namespace serves nothing; the index keeps it apart so a 404 can say why.
func TestExternalUnscoped(t *testing.T) {
	rs := ruletest.Compile(t, `
externalRules:
- seriesQuery: '{__name__="broker_backlog"}'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
- seriesQuery: '{__name__="queue_length"}'
  resources:
    overrides:
      namespace: {resource: namespace}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
`)
	ext := rs.ExternalRules()
	x := BuildIndex([]RuleSeries{
		{Rule: ext[0], Series: []rules.Series{ser("broker_backlog", "broker", "b1")}},
		{Rule: ext[1], Series: []rules.Series{ser("queue_length", "namespace", "shop"), ser("queue_length")}},
	}, IndexOptions{})
	var got []string
	for _, m := range []string{"broker_backlog", "queue_length"} {
		for _, e := range x.ExternalUnscoped(m) {
			got = append(got, m+": "+e.String())
		}
	}
	want := []string{`broker_backlog: externalRules[0] (series "broker_backlog")`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ExternalUnscoped (-want +got):\n%s", diff)
	}
	if _, ok := x.External("shop", "broker_backlog"); ok {
		t.Error("broker_backlog is served in namespace shop")
	}
	if diff := cmp.Diff([]provider.ExternalMetricInfo{{Metric: "queue_length"}}, x.ExternalMetrics()); diff != "" {
		t.Errorf("ExternalMetrics (-want +got):\n%s", diff)
	}
}
