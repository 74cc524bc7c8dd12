package rules

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/tenancy"
)

// sharingOf compiles a pods rule with metricsQuery and returns its
// decision for pods ("" when shareable, else the reason).
func sharingOf(t testing.TB, metricsQuery, selector string) string {
	t.Helper()
	rs := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{templateRule(metricsQuery)}})
	req := SharedRequest{Series: "container_cpu_usage_seconds_total", Resource: pods}
	if selector != "" {
		req.MetricSelector = mustSelector(t, selector)
	}
	err := rs.CustomRules()[0].Sharing(req)
	if err == nil {
		return ""
	}
	if !errors.Is(err, ErrNotShareable) {
		t.Fatalf("Sharing(%s): %v does not wrap ErrNotShareable", metricsQuery, err)
	}
	return err.Error()
}

func TestSharing(t *testing.T) {
	tests := []struct {
		name, query, selector string
		wantReason            string // a substring; "" means shareable
	}{
		{name: "prometheus-adapter default", query: config.DefaultMetricsQuery},
		{name: "rate by GroupBy", query: `sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[2m])) by (<<.GroupBy>>)`},
		{name: "with a metric selector", query: `sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)`, selector: "verb=GET,code!=500"},
		{name: "by GroupBy and another label then again by GroupBy", query: `max by (<<.GroupBy>>) (sum by (<<.GroupBy>>, container) (<<.Series>>{<<.LabelMatchers>>}))`},
		{name: "without a label", query: `sum without (container, id) (<<.Series>>{<<.LabelMatchers>>})`},
		{name: "element-wise functions", query: `clamp_min(abs(round(irate(<<.Series>>{<<.LabelMatchers>>}[1m]), 0.1)), 0) * 100`},
		{name: "histogram_quantile", query: `histogram_quantile(0.9, sum by (<<.GroupBy>>, le) (rate(<<.Series>>{<<.LabelMatchers>>}[5m])))`},
		{name: "ratio matching on GroupBy", query: `sum by (<<.GroupBy>>) (rate(<<.Series>>{<<.LabelMatchers>>}[1m])) / on(<<.GroupBy>>) sum by (<<.GroupBy>>) (rate(<<.Series>>{<<.LabelMatchers>>}[5m]))`},
		{name: "ratio default matching", query: `sum by (<<.GroupBy>>) (a{<<.LabelMatchers>>}) / sum by (<<.GroupBy>>) (b{<<.LabelMatchers>>})`},
		{name: "or with the same grouping", query: `sum by (<<.GroupBy>>) (a{<<.LabelMatchers>>}) or sum by (<<.GroupBy>>) (b{<<.LabelMatchers>>}) * 0`},
		{name: "subquery", query: `max_over_time(sum by (<<.GroupBy>>) (rate(<<.Series>>{<<.LabelMatchers>>}[1m]))[5m:30s])`},
		{name: "label_replace of another label", query: `label_replace(<<.Series>>{<<.LabelMatchers>>}, "x", "$1", "pod", "(.*)")`},
		{name: "topk per object", query: `topk by (<<.GroupBy>>) (1, <<.Series>>{<<.LabelMatchers>>})`},
		{name: "comparison with scalar and time()", query: `(time() - <<.Series>>{<<.LabelMatchers>>}) > bool 60`},
		{name: "LabelValuesByName", query: `sum(<<.Series>>{pod=~"<<index .LabelValuesByName "pod">>",<<.LabelMatchers>>}) by (<<.GroupBy>>)`},

		{name: "hard-coded by pod", query: `sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (pod)`, wantReason: "does not keep both namespace and pod"},
		{name: "aggregation without grouping", query: `sum(<<.Series>>{<<.LabelMatchers>>})`, wantReason: "does not keep both"},
		{name: "without the namespace", query: `sum without (namespace) (<<.Series>>{<<.LabelMatchers>>})`, wantReason: "drops a label"},
		{name: "selector without the matchers", query: `sum by (<<.GroupBy>>) (<<.Series>>{<<.LabelMatchers>>}) / on() group_left sum(kube_pod_info)`, wantReason: "not restricted to the request's namespace"},
		{name: "on pod only", query: `a{<<.LabelMatchers>>} / on(pod) b{<<.LabelMatchers>>}`, wantReason: "on"},
		{name: "ignoring namespace", query: `a{<<.LabelMatchers>>} / ignoring(namespace) b{<<.LabelMatchers>>}`, wantReason: "drops a label"},
		{name: "absent", query: `absent(<<.Series>>{<<.LabelMatchers>>})`, wantReason: "absent()"},
		{name: "scalar", query: `<<.Series>>{<<.LabelMatchers>>} / scalar(sum(<<.Series>>{<<.LabelMatchers>>}))`, wantReason: "does not keep both"},
		{name: "sort", query: `sort_desc(<<.Series>>{<<.LabelMatchers>>})`, wantReason: "sort_desc()"},
		{name: "label_replace writing the pod label", query: `label_replace(<<.Series>>{<<.LabelMatchers>>}, "pod", "x", "", "")`, wantReason: "writes label"},
		{name: "count_values into namespace", query: `count_values by (<<.GroupBy>>) ("namespace", <<.Series>>{<<.LabelMatchers>>})`, wantReason: "writes label"},
		{name: "topk parameter reads series", query: `topk by (<<.GroupBy>>) (scalar(count(up)), <<.Series>>{<<.LabelMatchers>>})`, wantReason: "not restricted"},
		{name: "vector without labels", query: `<<.Series>>{<<.LabelMatchers>>} + vector(1)`, wantReason: "without the labels"},
		{name: "no series", query: `vector(1)`, wantReason: "reads no series"},
		{name: "namespace from LabelValuesByName", query: `sum(<<.Series>>{namespace="<<index .LabelValuesByName "namespace">>",<<.LabelMatchers>>}) by (<<.GroupBy>>)`, wantReason: "does not correspond"},
		{name: "GroupBy used as a label value", query: `label_replace(<<.Series>>{<<.LabelMatchers>>}, "g", "<<.GroupBy>>", "", "")`, wantReason: "does not correspond"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sharingOf(t, tt.query, tt.selector)
			if tt.wantReason == "" && got != "" || !strings.Contains(got, tt.wantReason) {
				t.Errorf("Sharing(%s) = %q, want reason containing %q", tt.query, got, tt.wantReason)
			}
		})
	}
}

func TestSharedQueryGolden(t *testing.T) {
	rs := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{seedRule(), templateRule(config.DefaultMetricsQuery)}})
	var b strings.Builder
	for _, r := range rs.CustomRules() {
		for _, sel := range []string{"", "verb=GET"} {
			req := SharedRequest{Series: "pm_status", Resource: pods}
			if sel != "" {
				req.MetricSelector = mustSelector(t, sel)
			}
			q, err := r.SharedQuery(req)
			if err != nil {
				t.Fatalf("%s: SharedQuery: %v", r.Path(), err)
			}
			b.WriteString(formatQuery(r.Path()+" selector "+sel, q))
		}
	}
	checkGolden(t, "shared", b.String())
}

func TestSharedQueryRefusals(t *testing.T) {
	cluster := templateRule(config.DefaultMetricsQuery)
	cluster.Resources = config.ResourceMapping{Overrides: map[string]config.GroupResource{"node": {Resource: "node"}}}
	rs := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{cluster}})
	_, err := rs.CustomRules()[0].SharedQuery(SharedRequest{Series: "x", Resource: nodes})
	if !errors.Is(err, ErrNotShareable) || !strings.Contains(err.Error(), "no label maps to namespaces") {
		t.Errorf("SharedQuery for a rule without a namespace label: %v, want ErrNotShareable naming the namespace label", err)
	}
	nsRules := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{templateRule(config.DefaultMetricsQuery)}})
	e, err := tenancy.New("namespace", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	team, err := nsRules.ConfineTo(e)
	if err != nil {
		t.Fatalf("ConfineTo: %v", err)
	}
	_, err = team.CustomRules()[0].SharedQuery(SharedRequest{Series: "x", Resource: pods})
	if !errors.Is(err, ErrNotShareable) || !strings.Contains(err.Error(), "team rule") {
		t.Errorf("SharedQuery of a team rule: %v, want ErrNotShareable naming the team rule", err)
	}
}

// Property: every composition of the constructs the argument of
// SharedEquivalent covers is shared, and putting one construct it does
// not cover anywhere in such a composition makes it refused; the decision
// never panics and is the same when asked twice.
func TestSharingProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 1))
	refused := 0
	defer func() {
		if refused < 500 {
			t.Errorf("only %d unsafe compositions generated", refused)
		}
	}()
	for i := range 2000 {
		safe := genExpr(rng, 4, -1)
		if got := sharingOf(t, safe, ""); got != "" {
			t.Fatalf("case %d: safe %s refused: %s", i, safe, got)
		}
		unsafe := genExpr(rng, 4, rng.IntN(4))
		if !strings.Contains(unsafe, "BAD") {
			continue
		}
		unsafe = strings.ReplaceAll(unsafe, "BAD", "")
		got := sharingOf(t, unsafe, "")
		if got == "" {
			t.Fatalf("case %d: unsafe %s accepted", i, unsafe)
		}
		refused++
		if again := sharingOf(t, unsafe, ""); again != got {
			t.Fatalf("case %d: decision changed: %q then %q", i, got, again)
		}
	}
}

// genExpr generates a metricsQuery of depth at most depth from the
// partition-preserving constructs; at the level bad (counting down from
// depth down to 0, -1 for none) it uses a construct that is not, marked "BAD".
func genExpr(rng *rand.Rand, depth, bad int) string {
	sel := func() string {
		return fmt.Sprintf(`%s{<<.LabelMatchers>>%s}`, []string{"<<.Series>>", "a", "b_total"}[rng.IntN(3)],
			[]string{"", `,container!="POD"`, `,le!=""`}[rng.IntN(3)])
	}
	if depth == 0 {
		if bad == 0 {
			return "BAD" + []string{`sum(kube_pod_info)`, `vector(1)`}[rng.IntN(2)]
		}
		return sel()
	}
	sub := func() string { return genExpr(rng, depth-1, bad) }
	if bad == depth {
		return "BAD" + []string{
			`sum(` + sub() + `)`,
			`sum by (pod) (` + sub() + `)`,
			`sum without (namespace) (` + sub() + `)`,
			`sort(` + sub() + `)`,
			`absent(` + sub() + `)`,
			`(` + sub() + ` / on(pod) ` + sub() + `)`,
			`(` + sub() + ` * ignoring(pod) ` + sub() + `)`,
			`label_replace(` + sub() + `, "namespace", "x", "", "")`,
			`(` + sub() + ` + scalar(` + sub() + `))`,
		}[rng.IntN(9)]
	}
	switch rng.IntN(9) {
	case 0:
		return fmt.Sprintf(`rate(%s[%dm])`, sel(), 1+rng.IntN(5))
	case 1:
		return `sum by (<<.GroupBy>>) (` + sub() + `)`
	case 2:
		return `max without (container) (` + sub() + `)`
	case 3:
		return `abs(` + sub() + `)`
	case 4:
		return `(` + sub() + `) * 2`
	case 5:
		return `(` + sub() + ` / on(<<.GroupBy>>) ` + sub() + `)`
	case 6:
		return `(` + sub() + ` > bool ` + sub() + `)`
	case 7:
		return `label_replace(` + sub() + `, "x", "$1", "pod", "(.*)")`
	default:
		return `max_over_time((` + sub() + `)[5m:1m])`
	}
}

func FuzzSharedEquivalent(f *testing.F) {
	f.Add(`sum(rate(x{namespace="promscaler-probe-namespace",pod="promscaler-probe-object"}[2m])) by (pod)`, `sum(rate(x{pod!=""}[2m])) by (namespace,pod)`)
	f.Add(`a{namespace="promscaler-probe-namespace",pod="promscaler-probe-object"} / on(pod) b`, `a / on(namespace,pod) b`)
	f.Add(`absent(x)`, `x`)
	f.Fuzz(func(t *testing.T, perRequest, shared string) {
		l := SharedLabels{Namespace: "namespace", Resource: "pod"}
		err := SharedEquivalent(perRequest, shared, l)
		if err2 := SharedEquivalent(perRequest, shared, l); fmt.Sprint(err) != fmt.Sprint(err2) {
			t.Fatalf("not deterministic: %v then %v", err, err2)
		}
		if err == nil && (!strings.Contains(perRequest, probeNamespace) || !strings.Contains(perRequest, probeObject)) {
			t.Fatalf("accepted a per-request query without the probe matchers: %q / %q", perRequest, shared)
		}
	})
}

func TestSharedEquivalentErrors(t *testing.T) {
	l := SharedLabels{Namespace: "namespace", Resource: "pod"}
	tests := []struct{ name, perRequest, shared, want string }{
		{"parse per-request", `sum(`, `x`, "parsing the per-request query"},
		{"parse shared", `x`, `)`, "parsing the shared query"},
		{"same label", `x`, `x`, "must be two labels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ll := l
			if tt.name == "same label" {
				ll.Resource = "namespace"
			}
			err := SharedEquivalent(tt.perRequest, tt.shared, ll)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("SharedEquivalent: %v, want %q", err, tt.want)
			}
		})
	}
	if diff := cmp.Diff("", fmt.Sprint(SharedEquivalent(
		`rate(x{namespace="promscaler-probe-namespace",pod=~"promscaler-probe-object"}[1m])`, `rate(x{pod=~".+"}[1m])`, l)), cmp.Transformer("nil", func(s string) string {
		return strings.TrimPrefix(s, "<nil>")
	})); diff != "" {
		t.Errorf("regexp object matcher (-want +got):\n%s", diff)
	}
}
