package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func ptr[T any](v T) *T { return &v }

var ignoreSource = cmpopts.IgnoreFields(Config{}, "Source")

func TestParseSeedExample(t *testing.T) {
	cfg, err := Load("testdata/valid/seed-fpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Rules: []DiscoveryRule{{
		SeriesQuery: `{__name__="pm_status",namespace!="",pod_name!="",state="active processes"}`,
		Resources: ResourceMapping{Overrides: map[string]GroupResource{
			"namespace": {Resource: "namespace"},
			"pod_name":  {Resource: "pod"},
		}},
		Name: NameMapping{As: "fpm_active_rate"},
		MetricsQuery: `sum(max_over_time(<<.Series>>{<<.LabelMatchers>>,state="active processes"}[2m])) by (<<.GroupBy>>)` +
			` / sum(max_over_time(<<.Series>>{<<.LabelMatchers>>,state="total processes"}[2m])) by (<<.GroupBy>>)`,
	}}}
	if diff := cmp.Diff(want, cfg, ignoreSource); diff != "" {
		t.Errorf("decoded configuration mismatch (-want +got):\n%s", diff)
	}
	if got, want := cfg.Source.Values["rules[0].name.as"], (Position{Line: 10, Column: 9}); got != want {
		t.Errorf("position of rules[0].name.as = %+v, want %+v", got, want)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"comments", "# nothing configured yet\n\n"},
		{"document marker", "---\n"},
		{"null", "~\n"},
		{"empty sections", "rules: []\nexternalRules:\nresourceRules:\nexternalQueries: []\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.in), "config.yaml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(&Config{}, cfg, ignoreSource, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if cfg.Source == nil || cfg.Source.File != "config.yaml" {
				t.Errorf("Source = %+v, want one naming config.yaml", cfg.Source)
			}
		})
	}
}

func TestParseYAMLFeatures(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want *Config
	}{{
		name: "anchors and merge keys",
		in: `externalRules:
- &queue
  seriesQuery: '{__name__="queue_depth"}'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
  resources: {namespaced: false}
- <<: *queue
  seriesQuery: '{__name__="queue_lag"}'
`,
		want: &Config{ExternalRules: []DiscoveryRule{{
			SeriesQuery:  `{__name__="queue_depth"}`,
			MetricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>})`,
			Resources:    ResourceMapping{Namespaced: ptr(false)},
		}, {
			SeriesQuery:  `{__name__="queue_lag"}`,
			MetricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>})`,
			Resources:    ResourceMapping{Namespaced: ptr(false)},
		}}},
	}, {
		// prometheus-adapter decodes with yaml.v2, which reads YAML 1.1
		// booleans; such files must keep loading.
		name: "YAML 1.1 booleans",
		in:   "externalRules:\n- seriesQuery: up\n  metricsQuery: sum(up)\n  resources: {namespaced: no}\n",
		want: &Config{ExternalRules: []DiscoveryRule{{
			SeriesQuery: "up", MetricsQuery: "sum(up)", Resources: ResourceMapping{Namespaced: ptr(false)},
		}}},
	}, {
		name: "numbers as strings",
		in:   "resourceRules:\n  cpu: {containerQuery: '1', nodeQuery: 2, containerLabel: c, resources: {template: '<<.Resource>>'}}\n  memory: {containerQuery: '3', nodeQuery: 4, containerLabel: c, resources: {template: '<<.Resource>>'}}\n  window: 5m\n",
		want: &Config{ResourceRules: &ResourceRules{
			CPU:    ResourceRule{ContainerQuery: "1", NodeQuery: "2", ContainerLabel: "c", Resources: ResourceMapping{Template: "<<.Resource>>"}},
			Memory: ResourceRule{ContainerQuery: "3", NodeQuery: "4", ContainerLabel: "c", Resources: ResourceMapping{Template: "<<.Resource>>"}},
			Window: "5m",
		}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.in), "config.yaml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, cfg, ignoreSource); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAliasBomb(t *testing.T) {
	in := `a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
rules:
- seriesQuery: up
  seriesFilters: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
`
	_, err := Parse([]byte(in), "bomb.yaml")
	if err == nil {
		t.Fatal("Parse succeeded, want an error")
	}
	var list ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error %T is not a non-empty ErrorList", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want an error wrapping fs.ErrNotExist", err)
	}
}

func TestLoadLargeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, make([]byte, maxFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load of an oversized file: %v, want a size error", err)
	}
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		name, got, want, parent string
	}{
		{"top key", KeyPath("", "rules"), "rules", ""},
		{"index", IndexPath("rules", 3), "rules[3]", "rules"},
		{"nested key", KeyPath(IndexPath("rules", 3), "name"), "rules[3].name", "rules[3]"},
		{"odd key", KeyPath("rules[0].resources.overrides", "app.kubernetes.io/name"), `rules[0].resources.overrides["app.kubernetes.io/name"]`, "rules[0].resources.overrides"},
		{"odd key with bracket", KeyPath("x", `a"]["b`), `x["a\"][\"b"]`, "x"},
		{"key below odd key", KeyPath(KeyPath("o", "a.b"), "resource"), `o["a.b"].resource`, `o["a.b"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("path = %q, want %q", tc.got, tc.want)
			}
			if got := parentPath(tc.got); got != tc.parent {
				t.Errorf("parentPath(%q) = %q, want %q", tc.got, got, tc.parent)
			}
		})
	}
}

func TestPositionAndErrorAt(t *testing.T) {
	in := "rules:\n- seriesQuery: up\n  name:\n    matches: '^(.*)$'\n"
	cfg, err := Parse([]byte(in), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want Position
	}{
		{"rules[0].name.matches", Position{4, 14}},
		{"rules[0].name.as", Position{3, 3}},      // missing: the key of name
		{"rules[0].metricsQuery", Position{2, 3}}, // missing: the item
		{"externalRules[2]", Position{1, 1}},      // nothing of it: the file
	} {
		t.Run(tc.path, func(t *testing.T) {
			got, ok := cfg.Position(tc.path)
			if !ok || got != tc.want {
				t.Errorf("Position(%q) = %+v, %v; want %+v, true", tc.path, got, ok, tc.want)
			}
		})
	}
	e := cfg.ErrorAt("rules[0].name.matches", "bad %s", "thing")
	if got, want := e.Error(), "c.yaml:4:14: rules[0].name.matches: bad thing"; got != want {
		t.Errorf("ErrorAt = %q, want %q", got, want)
	}
	var inCode *Config = &Config{}
	if _, ok := inCode.Position("rules"); ok {
		t.Error("Position of a configuration built in code reports ok")
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *Error
		want string
	}{
		{"full", &Error{File: "config.yaml", Line: 14, Column: 7, Path: "externalRules[2].name.as", Msg: "bad", Hint: "fix it"},
			"config.yaml:14:7: externalRules[2].name.as: bad (hint: fix it)"},
		{"no column", &Error{File: "f", Line: 3, Path: "rules", Msg: "m"}, "f:3: rules: m"},
		{"no file", &Error{Line: 3, Column: 1, Path: "rules", Msg: "m"}, "line 3:1: rules: m"},
		{"path only", &Error{Path: "rules[0]", Msg: "m"}, "rules[0]: m"},
		{"message only", &Error{Msg: "m"}, "m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
	list := ErrorList{{Msg: "a"}, {Msg: "b"}}
	if got := list.Error(); got != "a\nb" {
		t.Errorf("ErrorList.Error() = %q", got)
	}
	var target *Error
	if !errors.As(error(list), &target) || target.Msg != "a" {
		t.Errorf("errors.As(ErrorList, *Error) = %v", target)
	}
	if ErrorList(nil).Err() != nil {
		t.Error("empty ErrorList.Err() is not nil")
	}
}

// TestValidateInCode checks a configuration built in code: errors carry
// paths and no positions.
func TestValidateInCode(t *testing.T) {
	cfg := &Config{
		Rules:           []DiscoveryRule{{SeriesQuery: "up", Resources: ResourceMapping{Template: "<<.Resource>>"}, Name: NameMapping{Matches: "("}}},
		ExternalQueries: []ExternalQuery{{Name: "q", Query: "sum(x{<<.LabelMatchers>>})", DefaultValue: ptr("x")}},
	}
	var got []string
	for _, e := range cfg.Validate() {
		got = append(got, e.Error())
	}
	want := []string{
		`rules[0].name.matches: invalid regular expression "(": missing closing ): ` + "`(`" + ` (hint: the syntax is Go's RE2 (no look-around or back-references))`,
		`externalQueries[0].defaultValue: defaultValue "x" is not a Kubernetes quantity: expected a number with an optional suffix (hint: e.g. "0", "1.5", "100m", "2Ki")`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Validate() (-want +got):\n%s", diff)
	}
}

func TestWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{{
		name: "none",
		in:   "rules:\n- seriesQuery: up\n  resources: {template: '<<.Resource>>'}\n  metricsQuery: sum(<<.Series>>)\n",
	}, {
		name: "no metricsQuery",
		in:   "rules:\n- seriesQuery: up\n  resources: {template: '<<.Resource>>'}\n",
		want: []string{"c.yaml:2:3: rules[0].metricsQuery: metricsQuery is not set; promscaler uses sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) (prometheus-adapter would send an empty query, which Prometheus rejects) (hint: set metricsQuery explicitly)"},
	}, {
		name: "blank metricsQuery",
		in:   "externalRules:\n- seriesQuery: up\n  resources: {namespaced: false}\n  metricsQuery: ' '\n",
		want: []string{"c.yaml:4:17: externalRules[0].metricsQuery: metricsQuery is not set; promscaler uses sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) (prometheus-adapter would send an empty query, which Prometheus rejects) (hint: set metricsQuery explicitly)"},
	}, {
		name: "namespaced on a custom rule",
		in:   "rules:\n- seriesQuery: up\n  resources: {template: '<<.Resource>>', namespaced: false}\n  metricsQuery: sum(<<.Series>>)\n",
		want: []string{"c.yaml:3:54: rules[0].resources.namespaced: namespaced only applies to externalRules; it has no effect on rules (custom metrics) (hint: remove it, or move the rule to externalRules)"},
	}, {
		name: "no resource mapping",
		in:   "rules:\n- seriesQuery: up\n  metricsQuery: sum(<<.Series>>)\n",
		want: []string{`c.yaml:2:3: rules[0].resources: resources maps no label to a Kubernetes resource (no template, no overrides), so this rule serves no metric (hint: e.g. resources: {template: "<<.Resource>>"} or overrides)`},
	}, {
		name: "invalid override label",
		in:   "rules:\n- seriesQuery: up\n  resources: {overrides: {kubernetes.io/pod: {resource: pod}}}\n  metricsQuery: sum(<<.Series>>)\n",
		want: []string{`c.yaml:3:27: rules[0].resources.overrides["kubernetes.io/pod"]: "kubernetes.io/pod" is not a valid Prometheus label name, so no series can carry it`},
	}, {
		name: "namespaceLabel without namespaced",
		in:   "externalQueries:\n- name: q\n  query: sum(x)\n  namespaceLabel: ns\n",
		want: []string{"c.yaml:4:19: externalQueries[0].namespaceLabel: namespaceLabel has no effect because namespaced is not true (hint: set namespaced: true to use it)"},
	}, {
		name: "two labels for one resource",
		in:   "rules:\n- seriesQuery: up\n  resources:\n    overrides:\n      pod: {resource: pod}\n      pod_name: {resource: pods}\n      ingress: {resource: ingress, group: networking.k8s.io}\n      ing: {resource: ingresses, group: networking.k8s.io}\n  metricsQuery: sum(<<.Series>>)\n",
		want: []string{
			"c.yaml:5:7: rules[0].resources.overrides: labels ing, ingress all map to ingresses.networking.k8s.io, so which one a query matches on is ambiguous (hint: keep one override per resource)",
			"c.yaml:5:7: rules[0].resources.overrides: labels pod, pod_name all map to pod, so which one a query matches on is ambiguous (hint: keep one override per resource)",
		},
	}, {
		name: "series name rejected by a filter",
		in:   "rules:\n- seriesQuery: 'http_requests_total{pod!=\"\"}'\n  seriesFilters: [{isNot: '_total$'}]\n  resources: {template: '<<.Resource>>'}\n  metricsQuery: sum(<<.Series>>)\n",
		want: []string{`c.yaml:3:19: rules[0].seriesFilters[0]: this filter drops "http_requests_total", the only series name seriesQuery selects, so the rule serves no metric`},
	}, {
		name: "series name rejected by name.matches",
		in:   "rules:\n- seriesQuery: '{__name__=\"pm_status\",pod!=\"\"}'\n  name: {matches: '^(.*)_total$'}\n  resources: {template: '<<.Resource>>'}\n  metricsQuery: sum(<<.Series>>)\n",
		want: []string{`c.yaml:3:19: rules[0].name.matches: name.matches does not match "pm_status", the only series name seriesQuery selects, so the rule serves no metric`},
	}, {
		name: "regex name selector is not checked",
		in:   "rules:\n- seriesQuery: '{__name__=~\"pm_.*\"}'\n  name: {matches: '^(.*)_total$'}\n  resources: {template: '<<.Resource>>'}\n  metricsQuery: sum(<<.Series>>)\n",
	}, {
		name: "namespaced external rule without a namespace label",
		in:   "externalRules:\n- seriesQuery: up\n  resources: {overrides: {job: {resource: service}}}\n  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>})\n",
		want: []string{"c.yaml:3:14: externalRules[0].resources: this external rule is namespaced (resources.namespaced is not false) but no label maps to namespaces, so requests in a namespace cannot select its series (hint: map the label, e.g. resources: {overrides: {namespace: {resource: namespace}}}, or set resources.namespaced: false)"},
	}, {
		name: "external rule mapping namespaces",
		in:   "externalRules:\n- seriesQuery: up\n  resources: {overrides: {ns: {resource: namespaces}}}\n  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>})\n",
	}, {
		name: "external rule with a template",
		in:   "externalRules:\n- seriesQuery: up\n  resources: {template: '<<.Resource>>'}\n  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>})\n",
	}, {
		name: "external rule not namespaced",
		in:   "externalRules:\n- seriesQuery: up\n  resources: {namespaced: false}\n  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>})\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.in), "c.yaml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, w := range cfg.Warnings() {
				got = append(got, w.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Warnings() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestQueryTemplates covers what a metricsQuery may and may not do.
func TestQueryTemplates(t *testing.T) {
	for _, tc := range []struct {
		name, query string
		wantErr     string // substring; "" for valid
	}{
		{"plain", "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)", ""},
		{"no template action", "sum(up)", ""},
		{"label values", `sum(x{pod=~"<<index .LabelValuesByName "pod">>"})`, ""},
		{"missing label value", `sum(x{job=~"<<index .LabelValuesByName "job">>"})`, ""},
		{"index past the request's data", `sum(x) by (<<index .GroupBySlice 3>>)`, ""},
		{"range over data", `sum(x) by (<<range $i, $l := .GroupBySlice>><<if $i>>,<<end>><<$l>><<end>>)`, ""},
		{"range over root field", `sum(x) by (<<range $.GroupBySlice>><<.>><<end>>)`, ""},
		{"printf", `sum(x{a="<<printf "%s" .Series>>"})`, ""},
		{"define and template", `<<define "m">><<.LabelMatchers>><<end>>sum(x{<<template "m" .>>})`, ""},
		{"unknown field", "sum(<<.Metric>>)", "template uses .Metric, which does not exist"},
		{"field of a string", "sum(<<.Series.Name>>)", "template fails at <.Series.Name>"},
		{"window", "rate(x[<<.Window>>])", ".Window is only set for resourceRules"},
		{"window in a condition", "<<if .Window>>rate(x[1m])<<else>>x<<end>>", ".Window is only set for resourceRules"},
		{"wrong arg count", "sum(x) by (<<len .Series 2>>)", "wrong number of args for len"},
		{"unknown function", "sum(<<lower .Series>>)", `function "lower" not defined`},
		{"unclosed action", "sum(<<.Series)", "template does not parse"},
		{"empty output", "<<if false>>x<<end>>", "renders an empty query"},
		{"range over an int", "<<range 5>>x<<end>>", "range over \"5\" is not allowed"},
		{"range over a variable", "<<$n := 5>><<range $n>>x<<end>>", "range over \"$n\" is not allowed"},
		{"range in a define", "<<define \"a\">><<range 9>>x<<end>><<end>>x", "range over \"9\" is not allowed"},
		{"output bomb", `<<range .GroupBySlice>><<printf "%01000000d" 1>><<printf "%01000000d" 1>><<end>>`, "renders more than 1048576 bytes"},
		{"recursion", `<<define "r">><<template "r" .>><<end>><<template "r" .>>`, `template "r" calls itself`},
		{"mutual recursion", `<<define "a">><<if .Series>><<template "b" .>><<end>><<end>><<define "b">><<template "a" .>><<end>>x<<template "a" .>>`, "calls itself"},
		{"undefined template", `<<template "nope" .>>`, `template "nope" not defined`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := checkQueryTemplate("metricsQuery", tc.query, discoveryQuery, "")
			switch {
			case tc.wantErr == "" && p != nil:
				t.Errorf("unexpected problem: %s", p.Msg)
			case tc.wantErr != "" && p == nil:
				t.Errorf("no problem, want one containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(p.Msg, tc.wantErr):
				t.Errorf("problem %q, want one containing %q", p.Msg, tc.wantErr)
			}
		})
	}
}

func TestResourceWindow(t *testing.T) {
	q := "sum(rate(x{<<.LabelMatchers>>}[<<.Window>>])) by (<<.GroupBy>>)"
	if p, _ := checkQueryTemplate("containerQuery", q, resourceQuery, "5m"); p != nil {
		t.Errorf("with a window: %s", p.Msg)
	}
	if p, _ := checkQueryTemplate("containerQuery", q, resourceQuery, ""); p == nil || !strings.Contains(p.Msg, "window is not set") {
		t.Errorf("without a window: %v, want the window error", p)
	}
}

// TestMetricsQueryDefault checks that Parse keeps an unset metricsQuery as
// written, that MetricsQueryOrDefault is what applies the default, and that
// the warning is given once, for a parsed file and for code alike.
func TestMetricsQueryDefault(t *testing.T) {
	cfg, err := Parse([]byte("rules:\n- seriesQuery: up\n  resources: {template: '<<.Resource>>'}\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Rules[0].MetricsQuery; got != "" {
		t.Errorf("Parse changed metricsQuery to %q", got)
	}
	if got := cfg.Rules[0].MetricsQueryOrDefault(); got != DefaultMetricsQuery {
		t.Errorf("MetricsQueryOrDefault = %q, want the default", got)
	}
	inCode := &Config{Rules: []DiscoveryRule{{SeriesQuery: "up", Resources: ResourceMapping{Template: "<<.Resource>>"}}}}
	for name, c := range map[string]*Config{"parsed": cfg, "in code": inCode} {
		var got []string
		for _, w := range c.Warnings() {
			got = append(got, w.Path+": "+w.Msg)
		}
		want := []string{"rules[0].metricsQuery: metricsQuery is not set; promscaler uses " + DefaultMetricsQuery + " (prometheus-adapter would send an empty query, which Prometheus rejects)"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: Warnings (-want +got):\n%s", name, diff)
		}
	}
}

// TestQueryErrors checks that queries Prometheus would reject are found
// with Prometheus's parser, at their place, and are neither errors nor
// warnings.
func TestQueryErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{{
		name: "valid",
		in:   "externalRules:\n- seriesQuery: '{__name__=~\"^x_.*\",job!=\"\"}'\n  resources: {namespaced: false}\n  metricsQuery: 'sum by (job) (rate(<<.Series>>{<<.LabelMatchers>>}[5m])) / on() group_left sum(up)'\n",
	}, {
		name: "unclosed series query",
		in:   "externalRules:\n- seriesQuery: '{__name__=\"up\"'\n  resources: {namespaced: false}\n  metricsQuery: sum(<<.Series>>)\n",
		want: []string{`c.yaml:2:16: externalRules[0].seriesQuery: Prometheus would reject seriesQuery as a series selector: unexpected end of input inside braces (at character 15) (hint: a series selector such as '{__name__=~"^http_.*",namespace!=""}')`},
	}, {
		name: "series query that is an expression",
		in:   "rules:\n- seriesQuery: 'sum(up)'\n  resources: {template: '<<.Resource>>'}\n  metricsQuery: sum(<<.Series>>)\n",
		want: []string{"c.yaml:2:16: rules[0].seriesQuery: Prometheus would reject seriesQuery as a series selector"},
	}, {
		name: "unbalanced query",
		in:   "externalRules:\n- seriesQuery: up\n  resources: {namespaced: false}\n  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>)'\n",
		want: []string{`c.yaml:4:17: externalRules[0].metricsQuery: Prometheus would reject the query this template renders: unexpected character inside braces: ')' (at character 47); rendered with sample values: sum(series_name{namespace="default",pod=~"a|b")`},
	}, {
		name: "unknown function",
		in:   "rules:\n- seriesQuery: up\n  resources: {template: '<<.Resource>>'}\n  metricsQuery: 'rate_of(<<.Series>>{<<.LabelMatchers>>}[5m])'\n",
		want: []string{`c.yaml:4:17: rules[0].metricsQuery: Prometheus would reject the query this template renders: unknown function with name "rate_of" (at character 1)`},
	}, {
		name: "range vector where an instant vector is expected",
		in:   "rules:\n- seriesQuery: up\n  resources: {template: '<<.Resource>>'}\n  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}[5m]) by (<<.GroupBy>>)'\n",
		want: []string{`c.yaml:4:17: rules[0].metricsQuery: Prometheus would reject the query this template renders: expected type instant vector in aggregation expression, got range vector`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.in), "c.yaml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if w := cfg.Warnings(); len(w) != 0 {
				t.Errorf("Warnings: %v", w)
			}
			got := cfg.QueryErrors()
			if len(got) != len(tc.want) {
				t.Fatalf("QueryErrors = %v, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i].Error(), w) {
					t.Errorf("QueryErrors[%d] = %s\nwant prefix  %s", i, got[i], w)
				}
			}
		})
	}
}

func TestHelpers(t *testing.T) {
	if got := (&DiscoveryRule{}).MetricsQueryOrDefault(); got != DefaultMetricsQuery {
		t.Errorf("MetricsQueryOrDefault of an empty rule = %q", got)
	}
	if got := (&DiscoveryRule{MetricsQuery: "sum(x)"}).MetricsQueryOrDefault(); got != "sum(x)" {
		t.Errorf("MetricsQueryOrDefault = %q", got)
	}
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"mapping nil", (&ResourceMapping{}).IsNamespaced(), true},
		{"mapping false", (&ResourceMapping{Namespaced: ptr(false)}).IsNamespaced(), false},
		{"query nil", (&ExternalQuery{}).IsNamespaced(), false},
		{"query true", (&ExternalQuery{Namespaced: ptr(true)}).IsNamespaced(), true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: IsNamespaced = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if got := (&ExternalQuery{}).NamespaceLabelOrDefault(); got != "namespace" {
		t.Errorf("NamespaceLabelOrDefault = %q", got)
	}
}

func TestParseQueryTemplate(t *testing.T) {
	q, err := ParseQueryTemplate("q", `<<index .LabelValuesByName "x">>|<<.Series>>`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.Execute(&QueryTemplateData{Series: "s"})
	if err != nil || got != "|s" {
		t.Errorf("Execute = %q, %v; want %q", got, err, "|s")
	}
	if _, err := (mustQuery(t, "<<if .Series>>x<<end>>")).Execute(&QueryTemplateData{}); !errors.Is(err, ErrEmptyQuery) {
		t.Errorf("empty output: error %v, want ErrEmptyQuery", err)
	}
	if _, err := mustQuery(t, `<<range .GroupBySlice>><<$.LabelMatchers>><<end>>`).Execute(&QueryTemplateData{
		LabelMatchers: strings.Repeat("x", 1<<16), GroupBySlice: make([]string, 17),
	}); !errors.Is(err, ErrQueryTooLong) {
		t.Errorf("runaway output: error %v, want ErrQueryTooLong", err)
	}
	for _, text := range []string{"", "  ", "<<range 3>>x<<end>>", "<<.Series"} {
		var te *TemplateError
		if _, err := ParseQueryTemplate("q", text); !errors.As(err, &te) {
			t.Errorf("ParseQueryTemplate(%q) error %v, want a *TemplateError", text, err)
		}
	}
}

func mustQuery(t *testing.T, text string) *QueryTemplate {
	t.Helper()
	q, err := ParseQueryTemplate("q", text)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestFindMistake(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		wantCol    int // 0: no mistake
		wantHint   string
	}{
		{"unescaped double quote", `  q: "sum(x{a!="b"})"`, 17, hintDoubleQuote},
		{"unescaped single quote", `- 'it's'`, 7, hintSingleQuote},
		{"tab", "\t  a: b", 1, hintTab},
		{"trailing comma", `    pod: {resource: "pod"},`, 27, hintComma},
		{"flow mapping", `x: {a: "b", c: "d"}`, 0, ""},
		{"flow list with comma inside", `x: [{a: 1}, {b: 2}]`, 0, ""},
		{"quoted value and comment", `key: "v" # note`, 0, ""},
		{"quoted key", `"containerLabel": "container"`, 0, ""},
		{"escaped quote", `q: "a\"b\" c"`, 0, ""},
		{"doubled single quote", `q: 'it''s'`, 0, ""},
		{"plain value", `q: sum(x{a="b"}) by (c)`, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := findMistake(tc.line)
			if tc.wantCol == 0 {
				if ok {
					t.Errorf("found %+v, want no mistake", m)
				}
				return
			}
			if !ok || m.col != tc.wantCol || m.hint != tc.wantHint {
				t.Errorf("findMistake = %+v, %v; want column %d, hint %q", m, ok, tc.wantCol, tc.wantHint)
			}
		})
	}
}

func TestNaNAsZero(t *testing.T) {
	const file = `nanAsZero: false
rules:
- seriesQuery: 'ratio{namespace!="",pod!=""}'
  nanAsZero: true
- seriesQuery: 'other{namespace!="",pod!=""}'
externalQueries:
- name: backlog
  query: sum(backlog)
  nanAsZero: true
`
	c, err := Parse([]byte(file), "nan.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got := []bool{c.NaNIsZero(c.Rules[0].NaNAsZero), c.NaNIsZero(c.Rules[1].NaNAsZero), c.NaNIsZero(c.ExternalQueries[0].NaNAsZero)}
	if diff := cmp.Diff([]bool{true, false, true}, got); diff != "" {
		t.Errorf("NaNIsZero (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name string
		cfg  *Config
		own  *bool
		want bool
	}{
		{"nothing set", &Config{}, nil, true},
		{"nil config", nil, nil, true},
		{"global false", &Config{NaNAsZero: ptr(false)}, nil, false},
		{"rule true over global false", &Config{NaNAsZero: ptr(false)}, ptr(true), true},
		{"rule false over default", &Config{}, ptr(false), false},
	} {
		if got := tc.cfg.NaNIsZero(tc.own); got != tc.want {
			t.Errorf("%s: NaNIsZero = %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := Parse([]byte("nanAsZero: maybe\n"), "bad.yaml"); err == nil || !strings.Contains(err.Error(), "nanAsZero") {
		t.Errorf("nanAsZero: maybe: err = %v, want an error naming nanAsZero", err)
	}
}
