package rules_test

import (
	"strings"
	"testing"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/pkg/tenancy"
)

// ruleFile is a configuration with one external rule for series, served
// with query (a metricsQuery).
func ruleFile(series, query string) string {
	return "externalRules:\n- seriesQuery: '{__name__=\"" + series + "\"}'\n  resources: {namespaced: false}\n  metricsQuery: '" + query + "'\n"
}

func opts(strict func(string) bool) rules.Options {
	return rules.Options{Mapper: kubemapper.New(), Strict: strict, AnyBackend: true}
}

// TestLoadQueryErrorsStrictness: a query Prometheus would reject loads
// with a warning unless its file is strict; an old file's problem never
// blocks another file's reload.
func TestLoadQueryErrorsStrictness(t *testing.T) {
	bad := rules.File{Path: "bad.yaml", Data: []byte(ruleFile("x", "sum(<<.Series>>{)"))}
	good := rules.File{Path: "good.yaml", Data: []byte(ruleFile("y", "sum(<<.Series>>)"))}
	files := []rules.File{bad, good}
	r, err := rules.Load(files, opts(rules.Strict(false, "")))
	if err != nil {
		t.Fatalf("non-strict Load: %v", err)
	}
	if len(r.QueryErrors) != 1 || !strings.HasPrefix(r.QueryErrors[0].Error(), "bad.yaml:4:") || len(r.Warnings) != 0 {
		t.Errorf("query errors = %q, warnings %q, want the query error of bad.yaml", r.QueryErrors, r.Warnings)
	}
	if _, err := rules.Load(files, opts(rules.Strict(false, "good.yaml"))); err != nil {
		t.Errorf("reload of good.yaml refused because of bad.yaml: %v", err)
	}
	if _, err := rules.Load(files, opts(rules.Strict(false, "bad.yaml"))); err == nil || !strings.Contains(err.Error(), "bad.yaml:4:") {
		t.Errorf("reload of bad.yaml: error %v, want its query error", err)
	}
	if _, err := rules.Load(files, opts(rules.Strict(true, ""))); err == nil {
		t.Error("--strict Load accepted a query Prometheus rejects")
	}
}

// TestLoadConflictsAcrossFiles: the same metric from two files is served
// from the later file, and both places are named.
func TestLoadConflictsAcrossFiles(t *testing.T) {
	files := []rules.File{
		{Path: "a.yaml", Data: []byte(ruleFile("q", "sum(<<.Series>>)"))},
		{Path: "b.yaml", Data: []byte(ruleFile("q", "max(<<.Series>>)"))},
	}
	r, err := rules.Load(files, opts(nil))
	if err != nil {
		t.Fatal(err)
	}
	ext := r.Set.ExternalRules()
	if len(ext) != 2 || ext[0].Path() != "a.yaml:externalRules[0]" || ext[1].Path() != "b.yaml:externalRules[0]" || ext[1].Order() <= ext[0].Order() {
		t.Fatalf("merged rules: %v", ext)
	}
	dup := []rules.File{
		{Path: "a.yaml", Data: []byte("externalQueries:\n- {name: q, query: 'sum(x)'}\n")},
		{Path: "b.yaml", Data: []byte("externalQueries:\n- {name: q, query: 'max(x)'}\n")},
	}
	if _, err := rules.Load(dup, opts(nil)); err == nil || !strings.Contains(err.Error(), "b.yaml:externalQueries[0].name") || !strings.Contains(err.Error(), "a.yaml:externalQueries[0]") {
		t.Errorf("duplicate external query across files: error %v, want both places", err)
	}
}

// TestLoadBackendKeys: a rule naming a backend the adapter does not have
// is refused at its place, unless any backend is allowed (check-config
// without the backends file).
func TestLoadBackendKeys(t *testing.T) {
	files := []rules.File{{Path: "a.yaml", Data: []byte("externalQueries:\n- {name: q, query: 'sum(x)', backend: thanos}\n")}}
	o := rules.Options{Mapper: kubemapper.New()}
	if _, err := rules.Load(files, o); err == nil || !strings.Contains(err.Error(), "a.yaml:2") || !strings.Contains(err.Error(), "thanos") {
		t.Errorf("unknown backend: error %v, want its file:line and name", err)
	}
	o.Backends = []string{"thanos"}
	if _, err := rules.Load(files, o); err != nil {
		t.Errorf("known backend: %v", err)
	}
	o.Backends, o.AnyBackend = nil, true
	if _, err := rules.Load(files, o); err != nil {
		t.Errorf("any backend: %v", err)
	}
}

// TestLoadConfine: team rules are confined to their namespace; what
// cannot be confined is refused, naming the file.
func TestLoadConfine(t *testing.T) {
	enf, err := tenancy.New("namespace", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	o := rules.Options{Mapper: kubemapper.New(), AnyBackend: true, Confine: enf}
	ok := []rules.File{{Path: "team-a/rules", Data: []byte("externalRules:\n- seriesQuery: 'jobs_waiting'\n  resources: {overrides: {namespace: {resource: namespace}}}\n  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'\n")}}
	r, err := rules.Load(ok, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Set.ExternalRules(); len(got) != 1 || got[0].Tenant() != "team-a" {
		t.Errorf("confined rules = %v, want one rule of team-a", got)
	}
	bad := []rules.File{{Path: "team-a/rules", Data: []byte("externalQueries:\n- {name: q, query: 'sum(x)'}\n")}}
	if _, err := rules.Load(bad, o); err == nil || !strings.Contains(err.Error(), "team-a/rules: ") || !strings.Contains(err.Error(), "not allowed in team rules") {
		t.Errorf("externalQueries in team rules: error %v, want refused naming the file", err)
	}
}
