package rules

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/tenancy"
)

// tenantSeries are the series a query could read: the same metrics in the
// team's namespace a and in namespace b, and series without a namespace.
var tenantSeries = func() []labels.Labels {
	var out []labels.Labels
	for _, name := range []string{"http_requests_total", "secret_total", "kube_pod_info"} {
		for _, ns := range []string{"a", "b"} {
			out = append(out, labels.FromStrings("__name__", name, "namespace", ns, "pod", "web"))
		}
		out = append(out, labels.FromStrings("__name__", name, "pod", "web"))
	}
	return out
}()

// readNamespaces returns the namespaces (and "<none>") of the series of
// tenantSeries that some selector of query selects: PromQL reads series
// through its selectors only, so no other namespace here means no other
// namespace's data in the answer.
func readNamespaces(t *testing.T, query string) map[string]bool {
	t.Helper()
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	if err != nil {
		t.Fatalf("rendered query %q does not parse: %v", query, err)
	}
	read := map[string]bool{}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, s := range tenantSeries {
			all := true
			for _, m := range vs.LabelMatchers {
				if !m.Matches(s.Get(m.Name)) {
					all = false
					break
				}
			}
			if all {
				ns := s.Get("namespace")
				if ns == "" {
					ns = "<none>"
				}
				read[ns] = true
			}
		}
		return nil
	})
	return read
}

// teamRules compiles one rule (custom or external) confined to namespace a.
func teamRules(t *testing.T, kind Kind, seriesQuery, metricsQuery string) (*RuleSet, error) {
	t.Helper()
	key := "rules"
	if kind == KindExternal {
		key = "externalRules"
	}
	yaml := fmt.Sprintf("%s:\n- seriesQuery: %q\n  resources:\n    template: <<.Resource>>\n  metricsQuery: %q\n", key, seriesQuery, metricsQuery)
	return confineYAML(yaml)
}

// TestTeamRuleCannotReadOtherNamespaces tries to read namespace b from a
// rule of namespace a: whatever the metricsQuery text and the request, a
// query is either refused (at load or at request) or reads namespace a's
// series only.
func TestTeamRuleCannotReadOtherNamespaces(t *testing.T) {
	t.Parallel()
	selector := func(s string) k8slabels.Selector {
		sel, err := k8slabels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	tests := []struct {
		name         string
		kind         Kind
		seriesQuery  string
		metricsQuery string
		namespace    string // request namespace; "" = a
		selector     string
		loadErr      bool // refused at load
		requestErr   bool // refused at request
	}{
		{name: "the usual query", metricsQuery: `sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)`},
		{name: "another metric name", metricsQuery: `sum(secret_total) by (<<.GroupBy>>)`},
		{name: "or with another metric", metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) or sum(secret_total) by (<<.GroupBy>>)`},
		{name: "on() join", metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) + on() group_left() sum(secret_total)`},
		{name: "ignoring(namespace) join", metricsQuery: `<<.Series>>{<<.LabelMatchers>>} * ignoring(namespace) group_left() kube_pod_info`},
		{name: "subquery", metricsQuery: `max_over_time(sum(secret_total) by (<<.GroupBy>>)[5m:1m])`},
		{name: "without LabelMatchers", metricsQuery: `sum(<<.Series>>) by (<<.GroupBy>>)`},
		{name: "__name__ regex", metricsQuery: `sum({__name__=~".+"}) by (<<.GroupBy>>)`},
		{name: "label_replace renaming the namespace", metricsQuery: `label_replace(secret_total, "namespace", "b", "", "")`},
		{name: "namespace b in the text", metricsQuery: `sum(secret_total{namespace="b"}) by (<<.GroupBy>>)`, loadErr: true},
		{name: "namespace regex in the text", metricsQuery: `sum(secret_total{namespace=~".+"}) by (<<.GroupBy>>)`, loadErr: true},
		{name: "namespace b in a subquery", metricsQuery: `max_over_time(secret_total{namespace="b"}[5m:])`, loadErr: true},
		{name: "seriesQuery of namespace b", seriesQuery: `{__name__="secret_total",namespace="b"}`, metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`, loadErr: true},
		{name: "seriesQuery with a namespace regex", seriesQuery: `{__name__="secret_total",namespace=~"a|b"}`, metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`, loadErr: true},
		{name: "seriesQuery not a selector", seriesQuery: `sum(secret_total)`, metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`, loadErr: true},
		{name: "request in namespace b", metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`, namespace: "b", requestErr: true},
		{name: "request in namespace b, query without matchers", metricsQuery: `sum(secret_total) by (<<.GroupBy>>)`, namespace: "b", requestErr: true},
		{name: "namespace=b in the metric selector", metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`, selector: "namespace=b", requestErr: true},
		{name: "namespace in (a,b) in the metric selector", metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`, selector: "namespace in (a,b)", requestErr: true},
		{name: "namespace!=a in the metric selector", metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`, selector: "namespace!=a", requestErr: true},
		{name: "LabelValuesByName of the namespace", metricsQuery: `sum(secret_total{namespace="<<index .LabelValuesByName "namespace">>"}) by (<<.GroupBy>>)`},
		{name: "label values of the request in LabelValuesByName", metricsQuery: `sum(secret_total{pod=~"<<index .LabelValuesByName "pod">>"}) by (<<.GroupBy>>)`, selector: "pod=web"},
		{name: "external: another metric", kind: KindExternal, metricsQuery: `sum(secret_total)`},
		{name: "external: or and on()", kind: KindExternal, metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) or on() vector(0) + sum(secret_total)`},
		{name: "external: namespace b in the text", kind: KindExternal, metricsQuery: `sum(secret_total{namespace="b"})`, loadErr: true},
		{name: "external: request in namespace b", kind: KindExternal, metricsQuery: `sum(secret_total)`, namespace: "b", requestErr: true},
		{name: "external: request for no namespace", kind: KindExternal, metricsQuery: `sum(secret_total)`, namespace: "-", requestErr: true},
		{name: "external: namespace=b in the selector", kind: KindExternal, metricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>})`, selector: "namespace=b", requestErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sq := tc.seriesQuery
			if sq == "" {
				sq = `{__name__=~"http_requests_total|secret_total"}`
			}
			rs, err := teamRules(t, tc.kind, sq, tc.metricsQuery)
			if tc.loadErr {
				if err == nil {
					t.Fatalf("loaded; want the rule refused")
				}
				if !strings.Contains(strings.ToLower(err.Error()), "rules[0]") {
					t.Errorf("load error %q does not name the rule", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			r := rs.Rules()[0]
			if got := readNamespaces(t, r.SeriesQuery()); !onlyA(got) {
				t.Errorf("seriesQuery %q reads namespaces %v", r.SeriesQuery(), got)
			}
			ns := tc.namespace
			switch ns {
			case "":
				ns = "a"
			case "-":
				ns = ""
			}
			var sel k8slabels.Selector
			if tc.selector != "" {
				sel = selector(tc.selector)
			}
			var qs []Query
			if tc.kind == KindExternal {
				q, err := r.QueryForExternalSeries(ExternalRequest{Series: "http_requests_total", Namespace: ns, MetricSelector: sel})
				qs = append(qs, q)
				if !check(t, tc.requestErr, err) {
					return
				}
			} else {
				for _, req := range []CustomRequest{
					{Names: []string{"web"}},
					{Names: []string{"web", "api"}},
					{AllObjects: true},
				} {
					req.Series, req.Resource, req.Namespace, req.MetricSelector = "http_requests_total", pods, ns, sel
					q, err := r.QueryForSeries(req)
					if !check(t, tc.requestErr, err) {
						return
					}
					qs = append(qs, q)
				}
			}
			for _, q := range qs {
				if got := readNamespaces(t, q.Expr); !onlyA(got) {
					t.Errorf("query %q reads namespaces %v", q.Expr, got)
				}
			}
		})
	}
}

// check reports whether the query may be inspected: it fails the test
// when err is not what wantErr says.
func check(t *testing.T, wantErr bool, err error) bool {
	t.Helper()
	if wantErr {
		if !errors.Is(err, tenancy.ErrNotConfinable) {
			t.Errorf("request error = %v, want ErrNotConfinable", err)
		}
		return false
	}
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	return true
}

func onlyA(read map[string]bool) bool {
	for ns := range read {
		if ns != "a" {
			return false
		}
	}
	return true
}

// Team rules refuse what is cluster-wide by nature, and a rule whose
// namespace label is not the enforced one.
func TestConfineToRefuses(t *testing.T) {
	t.Parallel()
	e, err := tenancy.New(tenancy.DefaultLabel, "a")
	if err != nil {
		t.Fatal(err)
	}
	for name, yaml := range map[string]string{
		"resourceRules":   "resourceRules:\n" + resourceRule("cpu") + resourceRule("memory") + "  window: 1m\n",
		"externalQueries": "externalQueries:\n- name: q\n  query: sum(x)\n",
		"other label":     "rules:\n- seriesQuery: x\n  resources:\n    overrides:\n      kube_ns: {resource: namespace}\n      pod: {resource: pod}\n",
		"no label":        "rules:\n- seriesQuery: x\n  resources:\n    overrides:\n      pod: {resource: pod}\n",
	} {
		cfg, err := config.Parse([]byte(yaml), "team.yaml")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rs, err := Compile(cfg, kubemapper.New())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := rs.ConfineTo(e); err == nil {
			t.Errorf("%s: ConfineTo accepted it", name)
		}
	}
}

// A cluster-wide rule is unchanged: no tenant, every namespace.
func TestClusterRuleServesEveryNamespace(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte("rules:\n- seriesQuery: x\n  resources:\n    template: <<.Resource>>\n"), "cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Compile(cfg, kubemapper.New())
	if err != nil {
		t.Fatal(err)
	}
	r := rs.CustomRules()[0]
	if r.Tenant() != "" || !r.ServesNamespace("b") || !r.ServesNamespace("") {
		t.Errorf("cluster rule: tenant %q, serves b %t", r.Tenant(), r.ServesNamespace("b"))
	}
	q, err := r.QueryForSeries(CustomRequest{Series: "secret_total", Resource: pods, Namespace: "b", Names: []string{"web"}})
	if err != nil {
		t.Fatal(err)
	}
	if !readNamespaces(t, q.Expr)["b"] {
		t.Errorf("cluster rule query %q does not read namespace b", q.Expr)
	}
}

func resourceRule(name string) string {
	return "  " + name + ":\n    containerQuery: sum(rate(c[1m])) by (<<.GroupBy>>)\n    nodeQuery: sum(rate(c[1m])) by (<<.GroupBy>>)\n    resources:\n      template: <<.Resource>>\n    containerLabel: container\n"
}

// FuzzTeamRuleQuery: whatever a team rule's metricsQuery and the request's
// namespace, object names and metric selector, a team rule of namespace a
// either refuses or renders a query every selector of which requires
// namespace="a", and never renders one for another namespace.
func FuzzTeamRuleQuery(f *testing.F) {
	for _, s := range []struct{ query, ns, name, sel string }{
		{`sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`, "a", "web", ""},
		{`sum(secret_total) by (<<.GroupBy>>) or on() vector(1)`, "a", "web", "pod=web"},
		{`max_over_time(x{pod="<<index .LabelValuesByName "pod">>"}[5m:1m])`, "a", `web"}`, "namespace=b"},
		{`<<.Series>>{<<.LabelMatchers>>} unless y{namespace!="a"}`, "b", "web", "namespace in (a,b)"},
	} {
		f.Add(s.query, s.ns, s.name, s.sel)
	}
	f.Fuzz(func(t *testing.T, metricsQuery, ns, name, selector string) {
		rs, err := teamRulesQuiet(metricsQuery)
		if err != nil {
			return
		}
		sel, err := k8slabels.Parse(selector)
		if err != nil {
			return
		}
		q, err := rs.CustomRules()[0].QueryForSeries(CustomRequest{Series: "http_requests_total", Resource: pods, Namespace: ns, Names: []string{name}, MetricSelector: sel})
		if err != nil {
			return
		}
		if ns != "a" {
			t.Fatalf("rendered %q for namespace %q", q.Expr, ns)
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(q.Expr)
		if err != nil {
			t.Fatalf("rendered query %q does not parse: %v", q.Expr, err)
		}
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			vs, ok := node.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			for _, m := range vs.LabelMatchers {
				if m.Name == "namespace" && m.Type == labels.MatchEqual && m.Value == "a" {
					return nil
				}
			}
			t.Errorf("selector %s of %q does not require namespace=\"a\"", vs, q.Expr)
			return nil
		})
	})
}

// teamRulesQuiet is a custom team rule of namespace a with metricsQuery.
func teamRulesQuiet(metricsQuery string) (*RuleSet, error) {
	return confineYAML(fmt.Sprintf("rules:\n- seriesQuery: x\n  resources:\n    template: <<.Resource>>\n  metricsQuery: %q\n", metricsQuery))
}

// confineYAML compiles a configuration confined to namespace a.
func confineYAML(yaml string) (*RuleSet, error) {
	cfg, err := config.Parse([]byte(yaml), "configmap/a/team/rules.yaml")
	if err != nil {
		return nil, err
	}
	rs, err := Compile(cfg, kubemapper.New())
	if err != nil {
		return nil, err
	}
	e, err := tenancy.New(tenancy.DefaultLabel, "a")
	if err != nil {
		return nil, err
	}
	return rs.ConfineTo(e)
}
