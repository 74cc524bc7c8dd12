package rules

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	promlabels "github.com/prometheus/prometheus/model/labels"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
)

// FuzzRenderQuery fuzzes the template renderer two ways: an arbitrary
// metricsQuery must compile or fail cleanly and render or fail cleanly (no
// panic); and arbitrary namespace and object names rendered through
// "<<.Series>>{<<.LabelMatchers>>}" must parse back to exactly the intended
// matchers, the name regexp matching exactly the requested names.
func FuzzRenderQuery(f *testing.F) {
	f.Add(seedQuery, "pm_status", "abtest", "a", "b")
	f.Add(`sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`, "job:rate5m", "default", "web.1", "web-2")
	f.Add(`<<index .LabelValuesByName "pod_name">> <<index .GroupBySlice 0>> <<len .GroupBySlice>>`, `x{a="b"}`, "", `a"}`, `.*`)
	f.Add(`<<index .GroupBySlice 5>>`, "my.metric", "x", "\n", `\`)
	f.Add(`<<define "x">><<template "x" .>><<end>><<template "x" .>>`, "", "ns", "a", "a")
	f.Add(`<<.Nope>>`, "up", "ns", "a|b", "(")
	mapper := kubemapper.New()
	fixed := seedRule()
	fixed.MetricsQuery = `<<.Series>>{<<.LabelMatchers>>}`
	fixedSet, err := Compile(&config.Config{Rules: []config.DiscoveryRule{fixed}}, mapper)
	if err != nil {
		f.Fatal(err)
	}
	fixedRule := fixedSet.CustomRules()[0]
	f.Fuzz(func(t *testing.T, tmpl, seriesName, namespace, name1, name2 string) {
		// Part 1: arbitrary templates. Loops over huge ranges are slow, not
		// unsafe (output is bounded by MaxQueryBytes); keep the fuzzer fast.
		if !strings.Contains(tmpl, "range") && len(tmpl) < 4096 {
			rule := seedRule()
			rule.MetricsQuery = tmpl
			if rs, err := Compile(&config.Config{Rules: []config.DiscoveryRule{rule}}, mapper); err == nil {
				_, _ = rs.CustomRules()[0].QueryForSeries(CustomRequest{Series: seriesName, Resource: pods, Namespace: namespace, Names: []string{name1, name2}})
				_, _ = rs.CustomRules()[0].QueryForSeries(CustomRequest{Series: seriesName, Resource: pods, Namespace: namespace, AllObjects: true})
			}
		}

		// .LabelValuesByName recovers the raw values of any name list.
		if got, want := joinedValues(OneOf([]string{name1, name2})), name1+"|"+name2; got != want {
			t.Fatalf("joinedValues(OneOf(%q, %q)) = %q, want %q", name1, name2, got, want)
		}

		// The fast quoting path is strconv.Quote exactly.
		for _, v := range []string{namespace, name1, name2} {
			if got, want := string(appendQuoted(nil, v)), strconv.Quote(v); got != want {
				t.Fatalf("appendQuoted(%q) = %s, want %s", v, got, want)
			}
		}

		// Part 2: values never change the query's meaning.
		names := []string{name1, name2}
		if seriesName == "" {
			seriesName = "pm_status"
		}
		q, err := fixedRule.QueryForSeries(CustomRequest{Series: seriesName, Resource: pods, Namespace: namespace, Names: names})
		if err != nil {
			if model.LegacyValidation.IsValidMetricName(seriesName) && utf8.ValidString(namespace) && utf8.ValidString(name1) && utf8.ValidString(name2) {
				t.Fatalf("valid request refused: %v", err)
			}
			return // invalid series names and invalid UTF-8 are refused
		}
		series, ms, err := parseVectorSelector(q.Expr)
		if err != nil {
			t.Fatalf("rendered %s does not parse: %v", q.Expr, err)
		}
		if series != seriesName || !model.LegacyValidation.IsValidMetricName(series) {
			t.Fatalf("series = %q, want %q", series, seriesName)
		}
		var want []*promlabels.Matcher
		if namespace != "" {
			want = append(want, mm(promlabels.MatchEqual, "namespace", namespace))
		}
		want = append(want, mm(promlabels.MatchRegexp, "pod_name", OneOf(names)))
		if diff := cmp.Diff(want, ms, sameMatchers); diff != "" {
			t.Fatalf("matchers mismatch (-want +got):\n%s", diff)
		}
		re, err := regexp.Compile("^(?s:" + ms[len(ms)-1].Value + ")$")
		if err != nil {
			t.Fatalf("name regexp %q does not compile: %v", ms[len(ms)-1].Value, err)
		}
		for _, n := range names {
			if !re.MatchString(n) {
				t.Fatalf("name regexp %q does not match %q", re, n)
			}
		}
		for _, other := range []string{name1 + name2, name1 + "|" + name2, name1 + "x", "x" + name2} {
			if other != name1 && other != name2 && re.MatchString(other) {
				t.Fatalf("name regexp %q matches unrequested %q", re, other)
			}
		}
	})
}

func benchRule(b *testing.B) *Rule {
	b.Helper()
	rs, err := Compile(&config.Config{Rules: []config.DiscoveryRule{seedRule()}}, kubemapper.New())
	if err != nil {
		b.Fatal(err)
	}
	return rs.CustomRules()[0]
}

func BenchmarkQueryForSeries(b *testing.B) {
	r := benchRule(b)
	for _, n := range []int{1, 2, 100, 5000} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("web-7d9f8c6b5-%05d", i)
		}
		b.Run(fmt.Sprintf("names=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			req := CustomRequest{Series: "pm_status", Resource: pods, Namespace: "abtest", Names: names}
			for b.Loop() {
				if _, err := r.QueryForSeries(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("all-objects", func(b *testing.B) {
		b.ReportAllocs()
		req := CustomRequest{Series: "pm_status", Resource: pods, Namespace: "abtest", AllObjects: true}
		for b.Loop() {
			if _, err := r.QueryForSeries(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkQueryForExternalSeries(b *testing.B) {
	rs, err := Compile(&config.Config{ExternalRules: []config.DiscoveryRule{externalRule(nil)}}, kubemapper.New())
	if err != nil {
		b.Fatal(err)
	}
	r := rs.ExternalRules()[0]
	req := ExternalRequest{Series: "rabbitmq_queue_length", Namespace: "default", MetricSelector: mustSelector(b, "queue in (a,b),env=prod")}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.QueryForExternalSeries(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResourcesForSeries(b *testing.B) {
	m, _, err := NewResourceMapper(config.ResourceMapping{Template: "<<.Resource>>"}, kubemapper.New())
	if err != nil {
		b.Fatal(err)
	}
	lbls := map[string]string{"__name__": "x", "namespace": "ns", "pod": "p", "container": "c", "instance": "i", "job": "j", "node": "n"}
	ls := make(map[string]string, len(lbls))
	for k, v := range lbls {
		ls[k] = v
	}
	set := SeriesFromLabelSet(toLabelSet(ls)).Labels
	b.ReportAllocs()
	for b.Loop() {
		m.ResourcesForSeries(set)
	}
}

func BenchmarkSelectorMatchers(b *testing.B) {
	sel := mustSelector(b, "app=web,tier in (frontend,backend),!canary,env!=dev")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := SelectorMatchers(sel); err != nil {
			b.Fatal(err)
		}
	}
}

func toLabelSet(m map[string]string) model.LabelSet {
	out := make(model.LabelSet, len(m))
	for k, v := range m {
		out[model.LabelName(k)] = model.LabelValue(v)
	}
	return out
}

// FuzzResourceTemplate fuzzes resources.template and series labels: compiling
// and resolving never panic, a recognised label always names a resource the
// RESTMapper knows, and a rendered label is a valid label name.
func FuzzResourceTemplate(f *testing.F) {
	for _, s := range [][2]string{
		{"<<.Resource>>", "pod"},
		{"kube_<<.Group>>_<<.Resource>>", "kube_networking_k8s_io_ingress"},
		{"<<if .Group>><<.Group>>_<<end>><<.Resource>>", "apps_deployment"},
		{"<<.Resource>>_<<.Resource>>", "pod_pod"},
		{"<<.Group>><<.Resource>><<.Group>><<.Resource>>", "appsdeploymentappsdeployment"},
		{"x<<.Resource", "x"},
	} {
		f.Add(s[0], s[1])
	}
	mapper := testMapper()
	f.Fuzz(func(t *testing.T, tmpl, label string) {
		if strings.Contains(tmpl, "range") || len(tmpl) > 1024 || len(label) > 256 {
			return
		}
		m, _, err := NewResourceMapper(config.ResourceMapping{Template: tmpl}, mapper)
		if err != nil {
			return
		}
		if gr, ok := m.ResourceForLabel(label); ok {
			if _, err := mapper.ResourceFor(gr.WithVersion("")); err != nil {
				t.Fatalf("label %q mapped to %v, unknown to the RESTMapper: %v", label, gr, err)
			}
			if l, err := m.LabelForResource(gr); err == nil && !model.LegacyValidation.IsValidLabelName(l) {
				t.Fatalf("LabelForResource(%v) = %q, not a label name", gr, l)
			}
		}
	})
}
