package rules

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	promlabels "github.com/prometheus/prometheus/model/labels"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/test/golden"
)

const seedQuery = `sum(max_over_time(<<.Series>>{<<.LabelMatchers>>,state="active processes"}[2m])) by (<<.GroupBy>>) / sum(max_over_time(<<.Series>>{<<.LabelMatchers>>,state="total processes"}[2m])) by (<<.GroupBy>>)`

// seedRule is the fpm example of issue 2.
func seedRule() config.DiscoveryRule {
	return config.DiscoveryRule{
		SeriesQuery: `{__name__="pm_status",namespace!="",pod_name!="",state="active processes"}`,
		Resources: config.ResourceMapping{Overrides: map[string]config.GroupResource{
			"namespace": {Resource: "namespace"},
			"pod_name":  {Resource: "pod"},
		}},
		Name:         config.NameMapping{As: "fpm_active_rate"},
		MetricsQuery: seedQuery,
	}
}

func templateRule(metricsQuery string) config.DiscoveryRule {
	return config.DiscoveryRule{
		SeriesQuery:  `{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}`,
		Resources:    config.ResourceMapping{Template: "<<.Resource>>"},
		Name:         config.NameMapping{Matches: "^container_(.*)_seconds_total$"},
		MetricsQuery: metricsQuery,
	}
}

func externalRule(namespaced *bool) config.DiscoveryRule {
	return config.DiscoveryRule{
		SeriesQuery: `{__name__=~"^.*_queue_(length|size)$",namespace!=""}`,
		Resources: config.ResourceMapping{
			Overrides:  map[string]config.GroupResource{"namespace": {Resource: "namespace"}},
			Namespaced: namespaced,
		},
		Name:         config.NameMapping{Matches: "^.*_queue_(length|size)$", As: "${1}"},
		MetricsQuery: `max(<<.Series>>{<<.LabelMatchers>>})`,
	}
}

// resourceRules is prometheus-adapter's documented resource rules example.
func resourceRules() *config.ResourceRules {
	res := config.ResourceMapping{Overrides: map[string]config.GroupResource{
		"instance":  {Resource: "node"},
		"namespace": {Resource: "namespace"},
		"pod":       {Resource: "pod"},
	}}
	return &config.ResourceRules{
		CPU: config.ResourceRule{
			ContainerQuery: `sum(rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!="",pod!=""}[<<.Window>>])) by (<<.GroupBy>>)`,
			NodeQuery:      `sum(rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,id='/'}[<<.Window>>])) by (<<.GroupBy>>)`,
			Resources:      res,
			ContainerLabel: "container",
		},
		Memory: config.ResourceRule{
			ContainerQuery: `sum(container_memory_working_set_bytes{<<.LabelMatchers>>,container!="",pod!=""}) by (<<.GroupBy>>)`,
			NodeQuery:      `sum(container_memory_working_set_bytes{<<.LabelMatchers>>,id='/'}) by (<<.GroupBy>>)`,
			Resources:      res,
			ContainerLabel: "container",
		},
		Window: "5m",
	}
}

func boolPtr(b bool) *bool { return &b }

func mustSelector(t testing.TB, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatalf("labels.Parse(%q): %v", s, err)
	}
	return sel
}

func mustCompile(t testing.TB, cfg *config.Config) *RuleSet {
	t.Helper()
	rs, err := Compile(cfg, testMapper())
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return rs
}

func formatQuery(path string, q Query) string {
	return fmt.Sprintf("# rule: %s\n# resourceLabel: %s\n# namespaceLabel: %s\n%s\n", path, q.ResourceLabel, q.NamespaceLabel, q.Expr)
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "render", name+".golden"), []byte(got))
}

func TestRenderGolden(t *testing.T) {
	labelValuesQuery := `sum(rate(<<.Series>>{pod=~"<<index .LabelValuesByName "pod">>",namespace="<<index .LabelValuesByName "namespace">>"}[1m])) by (<<index .GroupBySlice 0>>)`
	tests := []struct {
		name string
		rule config.DiscoveryRule
		req  CustomRequest
	}{
		{"seed-two-pods", seedRule(), CustomRequest{Series: "pm_status", Resource: pods, Namespace: "abtest", Names: []string{"a", "b"}}},
		{"seed-one-pod", seedRule(), CustomRequest{Series: "pm_status", Resource: pods, Namespace: "abtest", Names: []string{"a"}}},
		{"seed-all-pods", seedRule(), CustomRequest{Series: "pm_status", Resource: pods, Namespace: "abtest", AllObjects: true}},
		{"seed-namespace-object", seedRule(), CustomRequest{Series: "pm_status", Resource: namespaces, Names: []string{"abtest"}}},
		{"seed-metric-selector", seedRule(), CustomRequest{Series: "pm_status", Resource: pods, Namespace: "abtest", Names: []string{"a", "b"}, MetricSelector: mustSelector(t, "zone in (eu-2,eu-1),app=web,!canary")}},
		{"template-pods", templateRule(`sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[1m])) by (<<.GroupBy>>)`),
			CustomRequest{Series: "container_cpu_usage_seconds_total", Resource: pods, Namespace: "default", Names: []string{"web-1", "web-2", "web-3"}}},
		{"template-deployment", templateRule(`sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)`),
			CustomRequest{Series: "container_cpu_usage_seconds_total", Resource: deployments, Namespace: "default", Names: []string{"web"}}},
		{"template-nodes-escaped", templateRule(`sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)`),
			CustomRequest{Series: "container_cpu_usage_seconds_total", Resource: nodes, Names: []string{"ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal"}}},
		{"group-template-ingress", config.DiscoveryRule{
			SeriesQuery:  `{__name__="nginx_requests_total"}`,
			Resources:    config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"},
			MetricsQuery: `sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)`,
		}, CustomRequest{Series: "nginx_requests_total", Resource: ingresses, Names: []string{"shop"}}},
		{"label-values-by-name", templateRule(labelValuesQuery),
			CustomRequest{Series: "http_requests_total", Resource: pods, Namespace: "default", Names: []string{"web.1", "web.2"}}},
		// prometheus-adapter's form: raw values joined with "|", so that an
		// equality matcher finds a name with a dot.
		{"label-values-by-name-equality", templateRule(`sum(rate(<<.Series>>{deployment="<<index .LabelValuesByName "deployment">>",namespace="<<index .LabelValuesByName "namespace">>",zone=~"<<index .LabelValuesByName "zone">>"}[1m])) by (<<.GroupBy>>)`),
			CustomRequest{Series: "http_requests_total", Resource: deployments, Namespace: "default", Names: []string{"api.v2"}, MetricSelector: mustSelector(t, "zone in (eu.2,eu.1)")}},
		{"label-values-by-name-all-objects", templateRule(labelValuesQuery),
			CustomRequest{Series: "http_requests_total", Resource: pods, Namespace: "default", AllObjects: true}},
		{"template-all-pods-matchers-first", templateRule(`sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[1m])) by (<<.GroupBy>>)`),
			CustomRequest{Series: "container_cpu_usage_seconds_total", Resource: pods, Namespace: "default", AllObjects: true}},
		{"template-all-nodes", templateRule(`sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[1m])) by (<<.GroupBy>>)`),
			CustomRequest{Series: "container_cpu_usage_seconds_total", Resource: nodes, AllObjects: true}},
		{"group-by-slice-range", templateRule(`sum(<<.Series>>{<<.LabelMatchers>>}) by (<<range $i, $l := .GroupBySlice>><<if $i>>,<<end>><<$l>><<end>>)`),
			CustomRequest{Series: "up", Resource: pods, Namespace: "default", Names: []string{"a"}}},
		{"hostile-names", seedRule(), CustomRequest{Series: "pm_status", Resource: pods, Namespace: `ns"}`, Names: []string{`a"} or vector(1) #`, `b|c`, `.*`, "d\ne", `f\`}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{tc.rule}})
			r := rs.CustomRules()[0]
			q, err := r.QueryForSeries(tc.req)
			if err != nil {
				t.Fatalf("QueryForSeries: %v", err)
			}
			checkGolden(t, tc.name, formatQuery(r.Path(), q))
		})
	}
}

func TestSeedExample(t *testing.T) {
	rs := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{seedRule()}})
	r := rs.CustomRules()[0]
	q, err := r.QueryForSeries(CustomRequest{Series: "pm_status", Resource: pods, Namespace: "abtest", Names: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `sum(max_over_time(pm_status{namespace="abtest",pod_name=~"a|b",state="active processes"}[2m])) by (pod_name) / sum(max_over_time(pm_status{namespace="abtest",pod_name=~"a|b",state="total processes"}[2m])) by (pod_name)`
	if q.Expr != want {
		t.Errorf("seed query:\n got %s\nwant %s", q.Expr, want)
	}
	if q.ResourceLabel != "pod_name" || q.NamespaceLabel != "namespace" {
		t.Errorf("labels = %q, %q; want pod_name, namespace", q.ResourceLabel, q.NamespaceLabel)
	}
	name, err := r.MetricNameForSeries("pm_status")
	if err != nil || name != "fpm_active_rate" {
		t.Errorf("MetricNameForSeries = %q, %v; want fpm_active_rate", name, err)
	}
}

// TestAllObjectsResourceMatcher checks that an AllObjects query has no
// matcher on the resource label (label!="" makes Prometheus merge the
// postings of every value of the label), except when no other matcher
// requires a value: .LabelMatchers is then label!="", never empty.
func TestAllObjectsResourceMatcher(t *testing.T) {
	rule := seedRule()
	rule.MetricsQuery = `<<.Series>>{<<.LabelMatchers>>}`
	r := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{rule}}).CustomRules()[0]
	tests := []struct {
		name      string
		namespace string
		selector  string
		want      string
	}{
		{name: "namespace", namespace: "abtest", want: `pm_status{namespace="abtest"}`},
		{name: "namespace and selector", namespace: "abtest", selector: "app=web", want: `pm_status{app="web",namespace="abtest"}`},
		{name: "namespace and empty-matching selector", namespace: "abtest", selector: "!canary", want: `pm_status{canary="",namespace="abtest"}`},
		{name: "all namespaces", want: `pm_status{pod_name!=""}`},
		{name: "all namespaces, equal", selector: "app=web", want: `pm_status{app="web"}`},
		{name: "all namespaces, in", selector: "zone in (a,b)", want: `pm_status{zone=~"a|b"}`},
		{name: "all namespaces, exists", selector: "zone", want: `pm_status{zone!=""}`},
		{name: "all namespaces, does not exist", selector: "!canary", want: `pm_status{canary="",pod_name!=""}`},
		{name: "all namespaces, not equal", selector: "zone!=a", want: `pm_status{zone!="a",pod_name!=""}`},
		{name: "all namespaces, notin", selector: "zone notin (a,b)", want: `pm_status{zone!~"a|b",pod_name!=""}`},
		{name: "all namespaces, equal empty", selector: "zone=", want: `pm_status{zone="",pod_name!=""}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := CustomRequest{Series: "pm_status", Resource: pods, Namespace: tc.namespace, AllObjects: true}
			if tc.selector != "" {
				req.MetricSelector = mustSelector(t, tc.selector)
			}
			q, err := r.QueryForSeries(req)
			if err != nil {
				t.Fatalf("QueryForSeries: %v", err)
			}
			if diff := cmp.Diff(tc.want, q.Expr); diff != "" {
				t.Errorf("Expr mismatch (-want +got):\n%s", diff)
			}
			if q.ResourceLabel != "pod_name" {
				t.Errorf("ResourceLabel = %q, want pod_name", q.ResourceLabel)
			}
		})
	}
}

// TestAnyRequiresValue: a matcher requires a value when it does not
// match the empty string.
func TestAnyRequiresValue(t *testing.T) {
	tests := []struct {
		m    *promlabels.Matcher
		want bool
	}{
		{mm(promlabels.MatchEqual, "a", ""), false},
		{mm(promlabels.MatchEqual, "a", "x"), true},
		{mm(promlabels.MatchNotEqual, "a", ""), true},
		{mm(promlabels.MatchNotEqual, "a", "x"), false},
		{mm(promlabels.MatchRegexp, "a", ".+"), true},
		{mm(promlabels.MatchRegexp, "a", ".*"), false},
		{mm(promlabels.MatchRegexp, "a", "x|"), false},
		{mm(promlabels.MatchRegexp, "a", "x|y"), true},
		{mm(promlabels.MatchNotRegexp, "a", "x|y"), false},
		{mm(promlabels.MatchNotRegexp, "a", "|x"), true},
	}
	for _, tc := range tests {
		t.Run(tc.m.String(), func(t *testing.T) {
			if got := anyRequiresValue([]*promlabels.Matcher{tc.m}); got != tc.want {
				t.Errorf("anyRequiresValue = %v, want %v", got, tc.want)
			}
		})
	}
	if anyRequiresValue(nil) {
		t.Error("anyRequiresValue(nil) = true")
	}
}

func TestRenderExternalGolden(t *testing.T) {
	tests := []struct {
		name string
		rule config.DiscoveryRule
		req  ExternalRequest
	}{
		{"external-namespaced", externalRule(nil), ExternalRequest{Series: "rabbitmq_queue_length", Namespace: "default", MetricSelector: mustSelector(t, "queue=work")}},
		{"external-namespaced-no-namespace", externalRule(nil), ExternalRequest{Series: "rabbitmq_queue_length", MetricSelector: mustSelector(t, "queue=work")}},
		{"external-not-namespaced", externalRule(boolPtr(false)), ExternalRequest{Series: "rabbitmq_queue_length", Namespace: "default", MetricSelector: mustSelector(t, "queue in (a.b,c)")}},
		{"external-group-by-empty", config.DiscoveryRule{
			SeriesQuery:  `{__name__="queue_depth"}`,
			Resources:    config.ResourceMapping{Namespaced: boolPtr(false)},
			MetricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) + <<len .GroupBySlice>>`,
		}, ExternalRequest{Series: "queue_depth", Namespace: "default"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := mustCompile(t, &config.Config{ExternalRules: []config.DiscoveryRule{tc.rule}})
			r := rs.ExternalRules()[0]
			q, err := r.QueryForExternalSeries(tc.req)
			if err != nil {
				t.Fatalf("QueryForExternalSeries: %v", err)
			}
			checkGolden(t, tc.name, formatQuery(r.Path(), q))
		})
	}
}

func TestRenderExternalQueriesGolden(t *testing.T) {
	cfg := &config.Config{ExternalQueries: []config.ExternalQuery{
		{Name: "queue_backlog", Query: `sum(rabbitmq_queue_messages{<<.LabelMatchers>>})`},
		{Name: "ns_backlog", Query: `sum(<<.Series>>{<<.LabelMatchers>>}) or vector(0)`, Namespaced: boolPtr(true)},
		{Name: "ns_custom_label", Query: `sum(jobs_pending{<<.LabelMatchers>>})`, Namespaced: boolPtr(true), NamespaceLabel: "exported_namespace"},
	}}
	rs := mustCompile(t, cfg)
	tests := []struct {
		name   string
		metric string
		req    ExternalRequest
	}{
		{"external-query", "queue_backlog", ExternalRequest{Namespace: "default", MetricSelector: mustSelector(t, "queue=work")}},
		{"external-query-namespaced", "ns_backlog", ExternalRequest{Namespace: "default"}},
		{"external-query-namespace-label", "ns_custom_label", ExternalRequest{Namespace: "jobs", MetricSelector: mustSelector(t, "kind notin (batch)")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := rs.ExternalQuery(tc.metric)
			if !ok {
				t.Fatalf("ExternalQuery(%q) not found", tc.metric)
			}
			got, err := q.Query(tc.req)
			if err != nil {
				t.Fatalf("Query: %v", err)
			}
			checkGolden(t, tc.name, formatQuery(q.Path(), got))
		})
	}
}

func TestRenderResourceRulesGolden(t *testing.T) {
	rs := mustCompile(t, &config.Config{ResourceRules: resourceRules()})
	rr := rs.ResourceRules()
	if rr == nil {
		t.Fatal("ResourceRules() = nil")
	}
	tests := []struct {
		name   string
		render func() (Query, error)
		path   string
	}{
		{"resource-cpu-containers", func() (Query, error) {
			return rr.CPU.ContainerQuery(ResourceRequest{Namespace: "default", Names: []string{"web-1", "web-2"}})
		}, rr.CPU.Path()},
		{"resource-cpu-all-pods", func() (Query, error) {
			return rr.CPU.ContainerQuery(ResourceRequest{Namespace: "default", AllObjects: true})
		}, rr.CPU.Path()},
		{"resource-memory-nodes", func() (Query, error) {
			return rr.Memory.NodeQuery(ResourceRequest{Names: []string{"node-1"}})
		}, rr.Memory.Path()},
		{"resource-memory-all-nodes", func() (Query, error) {
			return rr.Memory.NodeQuery(ResourceRequest{AllObjects: true})
		}, rr.Memory.Path()},
		{"resource-cpu-all-namespaces", func() (Query, error) {
			return rr.CPU.ContainerQuery(ResourceRequest{AllObjects: true})
		}, rr.CPU.Path()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := tc.render()
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.name, formatQuery(tc.path, q))
		})
	}
}

func TestQueryErrors(t *testing.T) {
	cfg := &config.Config{
		Rules: []config.DiscoveryRule{
			seedRule(),
			templateRule(`<<.Series>>{<<.LabelMatchers>>}[<<index .GroupBySlice 3>>]`),
			templateRule(`<<if false>>x<<end>>  `),
			{SeriesQuery: `{__name__="x"}`, Resources: config.ResourceMapping{Template: "<<.Resource>>"}},
		},
		ExternalRules: []config.DiscoveryRule{
			{SeriesQuery: `{__name__="q"}`, MetricsQuery: `<<.Series>>{<<.LabelMatchers>>}`},
		},
	}
	rs := mustCompile(t, cfg)
	custom := rs.CustomRules()
	ext := rs.ExternalRules()[0]
	tests := []struct {
		name    string
		query   func() (Query, error)
		wantErr error
		want    string
	}{
		{"no names", func() (Query, error) {
			return custom[0].QueryForSeries(CustomRequest{Series: "pm_status", Resource: pods, Namespace: "abtest"})
		}, ErrNoObjects, "rules[0]: no object names given for pods"},
		{"resource without label", func() (Query, error) {
			return custom[0].QueryForSeries(CustomRequest{Series: "pm_status", Resource: nodes, Names: []string{"n"}})
		}, ErrNoLabelForResource, "rules[0]: no label for resource nodes"},
		{"unsupported selector operator", func() (Query, error) {
			return custom[0].QueryForSeries(CustomRequest{Series: "pm_status", Resource: pods, Namespace: "abtest", Names: []string{"a"}, MetricSelector: mustSelector(t, "size>3")})
		}, ErrUnsupportedOperator, `rules[0]: label selector "size>3": unsupported label selector operator: label "size": operator "gt" cannot be expressed`},
		{"invalid name", func() (Query, error) {
			return custom[0].QueryForSeries(CustomRequest{Series: "pm_status", Resource: pods, Namespace: "abtest", Names: []string{"\xff"}})
		}, ErrInvalidLabelValue, "rules[0]: invalid Prometheus label value"},
		{"invalid namespace", func() (Query, error) {
			return custom[0].QueryForSeries(CustomRequest{Series: "pm_status", Resource: pods, Namespace: "\xfe", Names: []string{"a"}})
		}, ErrInvalidLabelValue, "rules[0]: namespace matcher"},
		{"template execution error", func() (Query, error) {
			return custom[1].QueryForSeries(CustomRequest{Series: "up", Resource: pods, Namespace: "default", Names: []string{"a"}})
		}, nil, "rules[1].metricsQuery: rendering query template"},
		{"empty output", func() (Query, error) {
			return custom[2].QueryForSeries(CustomRequest{Series: "up", Resource: pods, Namespace: "default", Names: []string{"a"}})
		}, config.ErrEmptyQuery, "rules[2].metricsQuery"},
		{"series name that would change the query", func() (Query, error) {
			return custom[0].QueryForSeries(CustomRequest{Series: `x{a="b"} or vector(1) #`, Resource: pods, Namespace: "abtest", Names: []string{"a"}})
		}, ErrInvalidMetricName, `rules[0]: invalid Prometheus metric name: series "x{a=\"b\"} or vector(1) #"`},
		{"utf-8 series name in an external rule", func() (Query, error) {
			return ext.QueryForExternalSeries(ExternalRequest{Series: "my.metric"})
		}, ErrInvalidMetricName, `externalRules[0]: invalid Prometheus metric name`},
		{"custom query on external rule", func() (Query, error) {
			return ext.QueryForSeries(CustomRequest{Series: "q", Resource: pods, Names: []string{"a"}})
		}, nil, "externalRules[0]: QueryForSeries called on an external rule"},
		{"external query on custom rule", func() (Query, error) {
			return custom[0].QueryForExternalSeries(ExternalRequest{Series: "q"})
		}, nil, "rules[0]: QueryForExternalSeries called on a custom rule"},
		{"namespaced external rule without namespace label", func() (Query, error) {
			return ext.QueryForExternalSeries(ExternalRequest{Series: "q", Namespace: "default"})
		}, ErrNoLabelForResource, "externalRules[0]: namespace matcher (set resources.namespaced: false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.query()
			if err == nil {
				t.Fatal("succeeded, want an error")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	// A rule without metricsQuery uses config.DefaultMetricsQuery.
	if q, err := custom[3].QueryForSeries(CustomRequest{Series: "x", Resource: pods, Namespace: "default", Names: []string{"a"}}); err != nil || q.Expr != `sum(x{namespace="default",pod="a"}) by (pod)` {
		t.Errorf("default metricsQuery rendered %q, %v", q.Expr, err)
	}
	// Without a namespace the namespaced external rule needs no namespace label.
	if q, err := ext.QueryForExternalSeries(ExternalRequest{Series: "q"}); err != nil || q.Expr != "q{}" {
		t.Errorf("external query without namespace = %q, %v; want q{}", q.Expr, err)
	}
}

// TestQueryMaxBytes checks that a query naming objects longer than
// MaxBytes is rendered for all objects instead, and says so.
func TestQueryMaxBytes(t *testing.T) {
	rule := seedRule()
	rule.MetricsQuery = `<<.Series>>{<<.LabelMatchers>>}`
	r := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{rule}}).CustomRules()[0]
	names := []string{strings.Repeat("a", 40), strings.Repeat("b", 40)}
	for _, tc := range []struct {
		name     string
		maxBytes int
		want     string
		all      bool
	}{
		{"no bound", 0, `pm_status{namespace="ns",pod_name=~"` + names[0] + "|" + names[1] + `"}`, false},
		{"within the bound", 200, `pm_status{namespace="ns",pod_name=~"` + names[0] + "|" + names[1] + `"}`, false},
		{"over the bound", 60, `pm_status{namespace="ns"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := r.QueryForSeries(CustomRequest{Series: "pm_status", Resource: pods, Namespace: "ns", Names: names, MaxBytes: tc.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			if q.Expr != tc.want || q.AllObjects != tc.all {
				t.Errorf("QueryForSeries = %q (all objects %v), want %q (%v)", q.Expr, q.AllObjects, tc.want, tc.all)
			}
		})
	}
}

// TestJoinedValues checks that joinedValues inverts OneOf for any values.
func TestJoinedValues(t *testing.T) {
	for _, vs := range [][]string{{"a"}, {"api.v2", "web"}, {`a|b`, `c\d`, `.*`, `(`}, {""}, {"", "x"}} {
		if got, want := joinedValues(OneOf(vs)), strings.Join(vs, "|"); got != want {
			t.Errorf("joinedValues(OneOf(%q)) = %q, want %q", vs, got, want)
		}
	}
}

// Whatever the namespace and object names, the rendered selector parses
// back to exactly the intended matchers, and the resource regexp matches
// exactly the requested names.
func TestHostileValuesKeepQueryMeaning(t *testing.T) {
	rule := seedRule()
	rule.MetricsQuery = `<<.Series>>{<<.LabelMatchers>>}`
	rs := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{rule}})
	r := rs.CustomRules()[0]
	hostile := []string{`"`, `\`, `\"`, "\n", `"} or vector(1) #`, `a|b`, `.*`, `.+`, `(`, `)|(.*`, `$`, `^`, `[a-z]`, `{}`, `\x41`, "\u2028", "'", "`", `a,b`, ``}
	for i, v := range hostile {
		names := []string{v, fmt.Sprintf("safe%d", i)}
		q, err := r.QueryForSeries(CustomRequest{Series: "pm_status", Resource: pods, Namespace: v, Names: names})
		if err != nil {
			t.Fatalf("value %q: %v", v, err)
		}
		series, ms, err := parseVectorSelector(q.Expr)
		if err != nil {
			t.Fatalf("value %q: rendered %s does not parse: %v", v, q.Expr, err)
		}
		want := []*promlabels.Matcher{mm(promlabels.MatchEqual, "namespace", v), mm(promlabels.MatchRegexp, "pod_name", OneOf(names))}
		if v == "" { // no namespace: a cluster-wide request
			want = want[1:]
		}
		if series != "pm_status" {
			t.Errorf("value %q: series %q", v, series)
		}
		if diff := cmp.Diff(want, ms, sameMatchers); diff != "" {
			t.Errorf("value %q: matchers mismatch (-want +got):\n%s", v, diff)
		}
		if len(ms) != len(want) {
			continue
		}
		resValue := ms[len(ms)-1].Value
		re := regexp.MustCompile("^(?s:" + resValue + ")$")
		for _, n := range names {
			if !re.MatchString(n) {
				t.Errorf("value %q: regexp %q does not match name %q", v, resValue, n)
			}
		}
		for _, other := range []string{"other", v + v + "x", "safe", "safe" + v} {
			if re.MatchString(other) && other != v {
				t.Errorf("value %q: regexp %q matches unrequested name %q", v, resValue, other)
			}
		}
	}
}

func TestRenderRobustOnSampleConfigs(t *testing.T) {
	// Every variable of config.QueryTemplateData renders.
	rs := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{templateRule(
		`<<.Series>>|<<.LabelMatchers>>|<<.GroupBy>>|<<.GroupBySlice>>|<<.LabelValuesByName>>|<<.Window>>|<<len .LabelValuesByName>>`)}})
	q, err := rs.CustomRules()[0].QueryForSeries(CustomRequest{Series: "s", Resource: pods, Namespace: "ns", Names: []string{"a", "b.c"}, MetricSelector: mustSelector(t, "x=y")})
	if err != nil {
		t.Fatal(err)
	}
	want := `s|x="y",namespace="ns",pod=~"a|b\\.c"|pod|[pod]|map[namespace:ns pod:a|b.c x:y]||3`
	if q.Expr != want {
		t.Errorf("got  %s\nwant %s", q.Expr, want)
	}
}
