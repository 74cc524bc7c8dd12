package rules

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
)

func TestCompile(t *testing.T) {
	dv := "0"
	cfg := &config.Config{
		Rules: []config.DiscoveryRule{seedRule(), templateRule(`sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`)},
		ExternalRules: []config.DiscoveryRule{
			externalRule(nil),
			func() config.DiscoveryRule { r := externalRule(boolPtr(false)); r.DefaultValue = &dv; return r }(),
		},
		ExternalQueries: []config.ExternalQuery{{Name: "backlog", Query: "sum(backlog)", DefaultValue: &dv}},
		ResourceRules:   resourceRules(),
	}
	rs, err := Compile(cfg, kubemapper.New())
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	type ruleInfo struct {
		Path, Kind, API, SeriesQuery, MetricsQuery string
		Index                                      int
		Namespaced                                 bool
		Default                                    string
		HasDefault                                 bool
	}
	var got []ruleInfo
	for _, r := range rs.Rules() {
		d, ok := r.DefaultValue()
		got = append(got, ruleInfo{r.Path(), r.Kind().String(), r.Kind().API(), r.SeriesQuery(), r.MetricsQuery(), r.Index(), r.Namespaced(), d, ok})
	}
	want := []ruleInfo{
		{"rules[0]", "custom", CustomMetricsAPI, cfg.Rules[0].SeriesQuery, seedQuery, 0, true, "", false},
		{"rules[1]", "custom", CustomMetricsAPI, cfg.Rules[1].SeriesQuery, cfg.Rules[1].MetricsQuery, 1, true, "", false},
		{"externalRules[0]", "external", ExternalMetricsAPI, cfg.ExternalRules[0].SeriesQuery, cfg.ExternalRules[0].MetricsQuery, 0, true, "", false},
		{"externalRules[1]", "external", ExternalMetricsAPI, cfg.ExternalRules[1].SeriesQuery, cfg.ExternalRules[1].MetricsQuery, 1, false, "0", true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules mismatch (-want +got):\n%s", diff)
	}
	if n := len(rs.CustomRules()); n != 2 {
		t.Errorf("%d custom rules, want 2", n)
	}
	if n := len(rs.ExternalRules()); n != 2 {
		t.Errorf("%d external rules, want 2", n)
	}
	q, ok := rs.ExternalQuery("backlog")
	if !ok || q.Path() != "externalQueries[0]" || q.Name() != "backlog" || q.Namespaced() {
		t.Errorf("ExternalQuery(backlog) = %+v, %v", q, ok)
	}
	if d, ok := q.DefaultValue(); !ok || d != "0" {
		t.Errorf("DefaultValue = %q, %v", d, ok)
	}
	if _, ok := rs.ExternalQuery("missing"); ok {
		t.Error("ExternalQuery(missing) found")
	}
	if len(rs.ExternalQueries()) != 1 {
		t.Errorf("ExternalQueries() = %d entries, want 1", len(rs.ExternalQueries()))
	}
	rr := rs.ResourceRules()
	if rr == nil || rr.Window() != "5m" || rr.CPU.Path() != "resourceRules.cpu" || rr.Memory.ContainerLabel() != "container" {
		t.Errorf("ResourceRules = %+v", rr)
	}
	if w := rs.Warnings(); len(w) != 0 {
		t.Errorf("Warnings = %q, want none", w)
	}
	// The accessors return copies.
	rs.CustomRules()[0] = nil
	if rs.CustomRules()[0] == nil {
		t.Error("CustomRules exposes the internal slice")
	}

	// Discovery, end to end for one series of the seed rule.
	r := rs.CustomRules()[0]
	series := SeriesFromLabelSet(model.LabelSet{"__name__": "pm_status", "namespace": "abtest", "pod_name": "a", "state": "active processes"})
	if !r.KeepSeries(series.Name) || r.DropReason(series.Name) != "" {
		t.Errorf("seed series dropped: %s", r.DropReason(series.Name))
	}
	res, namespaced := r.ResourcesForSeries(series.Labels)
	if diff := cmp.Diff([]schema.GroupResource{namespaces, pods}, res); diff != "" || !namespaced {
		t.Errorf("ResourcesForSeries = %v, %v (-want +got):\n%s", res, namespaced, diff)
	}
	if l, err := r.LabelForResource(pods); err != nil || l != "pod_name" {
		t.Errorf("LabelForResource(pods) = %q, %v", l, err)
	}
	if r.Resources() == nil {
		t.Error("Resources() = nil")
	}
	rs.ForgetUnresolved() // must not panic, including on resource rules
}

func TestCompileReportsEveryError(t *testing.T) {
	cfg := &config.Config{
		Rules: []config.DiscoveryRule{
			{SeriesQuery: " ", MetricsQuery: "x"},
			{SeriesQuery: "up", SeriesFilters: []config.RegexFilter{{Is: "a", IsNot: "b"}}, Name: config.NameMapping{Matches: "(a)(b)"}, MetricsQuery: "<<.Series"},
			{SeriesQuery: "up", Resources: config.ResourceMapping{Template: "kube_<<.Group>>", Overrides: map[string]config.GroupResource{"pod": {}}}, MetricsQuery: "x"},
		},
		ExternalRules: []config.DiscoveryRule{
			{SeriesQuery: "up", Name: config.NameMapping{Matches: "("}, MetricsQuery: "x"},
		},
		ExternalQueries: []config.ExternalQuery{
			{Name: "", Query: "x"},
			{Name: "a", Query: "<<"},
			{Name: "b", Query: "x", Namespaced: boolPtr(true), NamespaceLabel: "ns-label"},
			{Name: "c", Query: "x"},
			{Name: "c", Query: "y"},
		},
		ResourceRules: &config.ResourceRules{
			CPU:    config.ResourceRule{ContainerQuery: "", NodeQuery: "<<.Nope", ContainerLabel: "9x"},
			Memory: config.ResourceRule{ContainerQuery: "x", NodeQuery: "y"},
		},
	}
	_, err := Compile(cfg, kubemapper.New())
	if err == nil {
		t.Fatal("Compile succeeded, want errors")
	}
	want := []string{
		"rules[0].seriesQuery: must not be empty",
		"rules[1].seriesFilters[0]: set only one of is and isNot",
		"rules[1].name.as: must be set",
		"rules[1].metricsQuery: template does not parse",
		"rules[2].resources.template: must use <<.Resource>>",
		"rules[2].resources.overrides[pod].resource: must not be empty",
		"externalRules[0].name.matches: error parsing regexp",
		"externalQueries[0].name: must not be empty",
		"externalQueries[1].query: template does not parse",
		"externalQueries[2].namespaceLabel: invalid Prometheus label name",
		`externalQueries[4].name: "c" is already served by externalQueries[3]`,
		"resourceRules.cpu.containerQuery: must not be empty",
		"resourceRules.cpu.nodeQuery: template does not parse",
		"resourceRules.cpu.containerLabel: invalid Prometheus label name",
	}
	lines := strings.Split(err.Error(), "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no error line starts with %q; got:\n%s", w, err)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("%d error lines, want %d:\n%s", len(lines), len(want), err)
	}
}

func TestCompileWarnings(t *testing.T) {
	cfg := &config.Config{Rules: []config.DiscoveryRule{
		{SeriesQuery: "up", MetricsQuery: "x"},
		{SeriesQuery: "up", Resources: config.ResourceMapping{Overrides: map[string]config.GroupResource{"w": {Group: "example.com", Resource: "widgets"}}}},
	}}
	rs, err := Compile(cfg, kubemapper.New())
	if err != nil {
		t.Fatal(err)
	}
	// Only what compiling against the RESTMapper finds: the configuration's
	// own oddities (no resource mapping, no metricsQuery) are
	// config.Config.Warnings, reported once.
	want := []string{
		"rules[1].resources.overrides[w]: resource widgets.example.com is not known",
	}
	got := rs.Warnings()
	if len(got) != len(want) {
		t.Fatalf("warnings = %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("warning[%d] = %q, want prefix %q", i, got[i], w)
		}
	}
}

func TestCompileNilInputs(t *testing.T) {
	if _, err := Compile(nil, kubemapper.New()); err == nil {
		t.Error("Compile(nil config) succeeded")
	}
	if _, err := Compile(&config.Config{}, nil); err == nil {
		t.Error("Compile(nil mapper) succeeded")
	}
	rs, err := Compile(&config.Config{}, kubemapper.New())
	if err != nil {
		t.Fatalf("Compile(empty): %v", err)
	}
	if len(rs.Rules()) != 0 || rs.ResourceRules() != nil {
		t.Errorf("empty config compiled to %d rules, resource rules %v", len(rs.Rules()), rs.ResourceRules())
	}
}

func TestKindString(t *testing.T) {
	if got := Kind(7).String(); got != "Kind(7)" {
		t.Errorf("Kind(7).String() = %q", got)
	}
}

// A RuleSet is used by the discovery loop and many request goroutines at
// once; run under -race.
func TestRuleSetConcurrentUse(t *testing.T) {
	rs := mustCompile(t, &config.Config{Rules: []config.DiscoveryRule{templateRule(`sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`)}})
	r := rs.CustomRules()[0]
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				lbls := model.LabelSet{"pod": "a", "namespace": "n", model.LabelName(fmt.Sprintf("l%d_%d", g, i%7)): "x"}
				if res, ns := r.ResourcesForSeries(lbls); len(res) != 2 || !ns {
					t.Errorf("ResourcesForSeries = %v, %v", res, ns)
					return
				}
				if _, err := r.QueryForSeries(CustomRequest{Series: "up", Resource: deployments, Namespace: "n", Names: []string{"d"}}); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					rs.ForgetUnresolved()
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
}

func TestCompileNaNAsZero(t *testing.T) {
	withNaN := func(r config.DiscoveryRule, v *bool) config.DiscoveryRule { r.NaNAsZero = v; return r }
	for _, tc := range []struct {
		name   string
		global *bool
		want   []bool // rules[0], rules[1], externalRules[0], externalQueries[0]
	}{
		{"default", nil, []bool{true, false, true, true}},
		{"global false", boolPtr(false), []bool{false, false, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{
				NaNAsZero:       tc.global,
				Rules:           []config.DiscoveryRule{seedRule(), withNaN(seedRule(), boolPtr(false))},
				ExternalRules:   []config.DiscoveryRule{withNaN(externalRule(nil), boolPtr(true))},
				ExternalQueries: []config.ExternalQuery{{Name: "backlog", Query: "sum(backlog)"}},
			}
			rs, err := Compile(cfg, kubemapper.New())
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got := []bool{rs.CustomRules()[0].NaNAsZero(), rs.CustomRules()[1].NaNAsZero(),
				rs.ExternalRules()[0].NaNAsZero(), rs.ExternalQueries()[0].NaNAsZero()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NaNAsZero (-want +got):\n%s", diff)
			}
		})
	}
}
