package discovery

import (
	"strings"
	"testing"

	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/pkg/tenancy"
	"github.com/promscaler/promscaler/test/ruletest"
)

// A team rule (confined to namespace a) serves its metric in namespace a
// only: not in b, where a cluster-wide rule produces it, not in a new
// namespace without discovered series (the fallback to the winning rule),
// not for cluster-scoped objects, even when it is the last rule and even
// when its series (a backend ignoring match[]) carry another namespace.
func TestTeamRuleServesItsNamespaceOnly(t *testing.T) {
	t.Parallel()
	const ruleList = `
rules:
- seriesQuery: '{__name__=~"^.*_total$"}'
  resources: {template: <<.Resource>>}
externalRules:
- seriesQuery: '{__name__=~"^.*_total$"}'
  resources: {template: <<.Resource>>, namespaced: false}
`
	both := withTeamRules(t, ruleList)
	cw, tc := both.CustomRules()[0], both.CustomRules()[1]
	cx, tx := both.ExternalRules()[0], both.ExternalRules()[1]
	series := []rules.Series{
		ser("cluster_total", "namespace", "b", "pod", "p"),
		ser("team_total", "namespace", "a", "pod", "p"),
		ser("team_total", "node", "n1"),
	}
	teamSeries := append(series[1:2:2], ser("team_total", "namespace", "b", "pod", "p"), ser("team_total", "node", "n1"))
	x := BuildIndex([]RuleSeries{
		{Rule: cw, Series: append(series, ser("shared_total", "namespace", "b", "pod", "p"))},
		{Rule: tc, Series: append(teamSeries, ser("shared_total", "namespace", "a", "pod", "p"))},
		{Rule: cx, Series: series[:1]},
		{Rule: tx, Series: teamSeries},
	}, IndexOptions{})

	for _, tt := range []struct {
		ns, metric string
		want       *rules.Rule
	}{
		{"a", "team_total", tc},
		{"b", "team_total", cw}, // the cluster rule's series in b
		{"new", "team_total", cw},
		{"a", "shared_total", tc},
		{"b", "shared_total", cw},
		{"new", "shared_total", cw},
	} {
		got, ok := x.Custom(pods, tt.ns, tt.metric)
		if !ok || got.Rule != tt.want {
			t.Errorf("Custom(pods, %q, %q) = %s, %t; want %s", tt.ns, tt.metric, describe(got, ok), ok, tt.want.Path())
		}
	}
	// Only the team rule produces team_only_total: nowhere but a.
	y := BuildIndex([]RuleSeries{{Rule: tc, Series: teamSeries}, {Rule: tx, Series: teamSeries}}, IndexOptions{})
	for _, ns := range []string{"b", "new"} {
		if e, ok := y.Custom(pods, ns, "team_total"); ok {
			t.Errorf("Custom(pods, %q, team_total) = %s; want none", ns, e)
		}
		if e, ok := y.External(ns, "team_total"); ok {
			t.Errorf("External(%q, team_total) = %s; want none", ns, e)
		}
	}
	if e, ok := y.Custom(nodes, "", "team_total"); ok {
		t.Errorf("Custom(nodes, team_total) = %s; want none", e)
	}
	if e, ok := y.External("a", "team_total"); !ok || e.Rule != tx {
		t.Errorf("External(a, team_total) = %s, %t; want %s", e, ok, tx.Path())
	}
	// Discovery reads no namespace for a rule with resources.namespaced:
	// false: the rows of its confined seriesQuery serve namespace a.
	z := BuildIndex([]RuleSeries{{Rule: tx, Series: []rules.Series{ser("team_total")}}}, IndexOptions{})
	if e, ok := z.External("a", "team_total"); !ok || e.Rule != tx {
		t.Errorf("External(a, team_total) from rows without a namespace = %s, %t; want %s", e, ok, tx.Path())
	}
	if e, ok := z.External("b", "team_total"); ok {
		t.Errorf("External(b, team_total) from rows without a namespace = %s; want none", e)
	}
	if e, ok := y.Custom(pods, "a", "team_total"); !ok || e.Rule != tc {
		t.Errorf("Custom(pods, a, team_total) = %s, %t; want %s", e, ok, tc.Path())
	}
	for _, c := range y.CustomCandidates(pods, true, "team_total") {
		if len(c.Namespaces) != 1 || c.Namespaces[0] != "a" {
			t.Errorf("team candidate namespaces %v, want [a]", c.Namespaces)
		}
	}
}

// A team rule producing more distinct metrics than the limit serves none of
// them and is reported (RefusedRules, with its count and the limit); one
// within it, and a cluster-wide rule however many it produces, are served.
func TestTeamRuleMetricsLimit(t *testing.T) {
	t.Parallel()
	const ruleList = `
rules:
- seriesQuery: '{__name__=~"^.*_total$"}'
  resources: {template: <<.Resource>>}
`
	both := withTeamRules(t, ruleList)
	cluster, tr := both.CustomRules()[0], both.CustomRules()[1]
	var three []rules.Series
	for _, name := range []string{"x_total", "y_total", "z_total", "z_total"} {
		three = append(three, ser(name, "namespace", "a", "pod", "p"))
	}
	for _, tt := range []struct {
		name    string
		limit   int
		series  []rules.Series
		refused bool
	}{
		{"over the limit", 2, three, true},
		{"at the limit", 3, three, false},
		{"no limit", -1, three, false},
		{"the default", 0, three, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x := BuildIndex([]RuleSeries{{Rule: cluster, Series: three}, {Rule: tr, Series: tt.series}}, IndexOptions{MaxTeamRuleMetrics: tt.limit})
			got, ok := x.Custom(pods, "a", "x_total")
			if !ok {
				t.Fatal("x_total not served in a")
			}
			if served := got.Rule == tr; served == tt.refused {
				t.Errorf("x_total in a served by %s; team rule refused: %t", got.Rule.Path(), tt.refused)
			}
			refused := x.RefusedRules()
			if !tt.refused {
				if len(refused) > 0 {
					t.Errorf("refused %v, want none", refused)
				}
				return
			}
			if len(refused) != 1 || refused[0].Rule != tr || refused[0].Metrics != 3 || refused[0].Limit != tt.limit {
				t.Fatalf("refused %+v, want the team rule with 3 metrics and limit %d", refused, tt.limit)
			}
			for _, want := range []string{tr.Path(), "produces 3 metrics", "limit of 2 metrics per team rule"} {
				if !strings.Contains(refused[0].Error(), want) {
					t.Errorf("%q does not say %q", refused[0].Error(), want)
				}
			}
		})
	}
}

// withTeamRules is ruleList cluster-wide followed by ruleList as a team's
// rules, confined to namespace a: the team's rules come last, the winners.
func withTeamRules(t *testing.T, ruleList string) *rules.RuleSet {
	t.Helper()
	e, err := tenancy.New(tenancy.DefaultLabel, "a")
	if err != nil {
		t.Fatal(err)
	}
	team, err := ruletest.Compile(t, ruleList).ConfineTo(e)
	if err != nil {
		t.Fatal(err)
	}
	both, err := rules.Merge([]*rules.RuleSet{ruletest.Compile(t, ruleList), team})
	if err != nil {
		t.Fatal(err)
	}
	return both
}
