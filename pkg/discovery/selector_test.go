package discovery

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/ruletest"
)

func TestParseSelector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []rules.Matcher
		wantErr string
	}{
		{name: "bare name", in: "node_load1", want: []rules.Matcher{{Name: "__name__", Op: "=", Value: "node_load1"}}},
		{name: "name with colon", in: " job:rate5m ", want: []rules.Matcher{{Name: "__name__", Op: "=", Value: "job:rate5m"}}},
		{
			name: "seed",
			in:   `{__name__="pm_status",namespace!="",pod_name!="",state="active processes"}`,
			want: []rules.Matcher{
				{Name: "__name__", Op: "=", Value: "pm_status"},
				{Name: "namespace", Op: "!=", Value: ""},
				{Name: "pod_name", Op: "!=", Value: ""},
				{Name: "state", Op: "=", Value: "active processes"},
			},
		},
		{
			name: "name, regexes, quotes, trailing comma",
			in:   "http_requests_total{ pod =~ 'web-.*' , path!~`/health\\z`, msg=\"a\\\"b\\n\", }",
			want: []rules.Matcher{
				{Name: "__name__", Op: "=", Value: "http_requests_total"},
				{Name: "pod", Op: "=~", Value: "web-.*"},
				{Name: "path", Op: "!~", Value: `/health\z`},
				{Name: "msg", Op: "=", Value: "a\"b\n"},
			},
		},
		{name: "single quotes with escapes", in: `{a='it\'s "x"'}`, want: []rules.Matcher{{Name: "a", Op: "=", Value: `it's "x"`}}},
		{name: "quoted metric name and label", in: `{"my.metric", "a.b"="c"}`, want: []rules.Matcher{
			{Name: "__name__", Op: "=", Value: "my.metric"}, {Name: "a.b", Op: "=", Value: "c"},
		}},
		{name: "empty", in: "  ", wantErr: "no metric name and no label matchers"},
		{name: "empty braces", in: "{}", wantErr: "no metric name and no label matchers"},
		{name: "only empty matchers", in: `{namespace!="x"}`, wantErr: "every matcher matches the empty string"},
		{name: "unclosed", in: `{a="b"`, wantErr: "missing closing '}'"},
		{name: "unterminated string", in: `{a="b}`, wantErr: "unterminated string"},
		{name: "bad operator", in: `{a=="b"}`, wantErr: "expected a quoted string"},
		{name: "no operator", in: `{a "b"}`, wantErr: "expected one of =, !=, =~, !~"},
		{name: "bad regexp", in: `{a=~"("}`, wantErr: "regular expression"},
		{name: "trailing garbage", in: `up{a="b"} offset 5m`, wantErr: "unexpected"},
		{name: "range selector", in: `up[5m]`, wantErr: "unexpected"},
		{name: "missing separator", in: `{a="b" c="d"}`, wantErr: "expected ',' or '}'"},
		{name: "newline in string", in: "{a=\"b\nc\"}", wantErr: "newline in string"},
		{name: "invalid UTF-8, escaped", in: `{a="\xb8"}`, wantErr: "string is not valid UTF-8"},
		{name: "invalid UTF-8, raw value", in: "{a=`\xb8`}", wantErr: "string is not valid UTF-8"},
		{name: "invalid UTF-8, raw name", in: "{`\xb8`}", wantErr: "string is not valid UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sel, err := ParseSelector(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrBadSelector) {
					t.Fatalf("ParseSelector(%q) error = %v, want ErrBadSelector containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSelector(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, sel.Matchers()); diff != "" {
				t.Errorf("matchers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectorMatches(t *testing.T) {
	t.Parallel()
	sel, err := ParseSelector(`{__name__=~"http_.*_total", namespace!="", pod=~"web-.+", code!~"5.."}`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		labels model.LabelSet
		want   bool
		failed string
	}{
		{"all hold", model.LabelSet{"__name__": "http_requests_total", "namespace": "a", "pod": "web-1", "code": "200"}, true, ""},
		{"absent code is empty", model.LabelSet{"__name__": "http_requests_total", "namespace": "a", "pod": "web-1"}, true, ""},
		{"regex is anchored", model.LabelSet{"__name__": "xhttp_requests_total", "namespace": "a", "pod": "web-1"}, false, `__name__=~"http_.*_total"`},
		{"missing namespace", model.LabelSet{"__name__": "http_requests_total", "pod": "web-1"}, false, `namespace!=""`},
		{"negative regex", model.LabelSet{"__name__": "http_requests_total", "namespace": "a", "pod": "web-1", "code": "503"}, false, `code!~"5.."`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := sel.Matches(tc.labels); got != tc.want {
				t.Errorf("Matches = %v, want %v", got, tc.want)
			}
			m, failed := sel.FailedMatcher(tc.labels)
			got := ""
			if failed {
				got = m.String()
			}
			if got != tc.failed {
				t.Errorf("FailedMatcher = %q, want %q", got, tc.failed)
			}
		})
	}
}

func TestMatchSeries(t *testing.T) {
	t.Parallel()
	rs := ruletest.Compile(t, twoRulesConfig)
	series := []model.LabelSet{
		{"__name__": "http_requests_total", "namespace": "a", "pod": "p"},
		{"__name__": "http_requests_total", "namespace": "a"},
		{"__name__": "node_load1", "instance": "n"},
		{"__name__": "queue_length", "namespace": "q"},
	}
	got, err := MatchSeries(rs, series)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range got {
		count[r.Rule.Path()] = len(r.Series)
	}
	want := map[string]int{"rules[0]": 1, "rules[1]": 2, "rules[2]": 1, "externalRules[0]": 1, "externalRules[1]": 1}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("series per rule (-want +got):\n%s", diff)
	}
}

func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{
		`{__name__="pm_status",namespace!="",pod_name!=""}`, `up`, `a{b=~"c.*",d!~'e'}`, "{`x`}", `{"a.b"="c",}`, `{a="\u00e9\x41"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		sel, err := ParseSelector(in)
		if err != nil {
			if !errors.Is(err, ErrBadSelector) {
				t.Fatalf("error %v is not ErrBadSelector", err)
			}
			return
		}
		ms := sel.Matchers()
		if len(ms) == 0 {
			t.Fatalf("%q parsed with no matchers", in)
		}
		// Re-rendering the matchers, as the labels strategy does with a
		// name and a presence matcher added, gives a selector with the same
		// meaning.
		ms = append(withName(sel, "fuzz_name"), rules.Matcher{Name: "pod", Op: rules.MatchNotEqual})
		again, err := ParseSelector(renderSelector(ms))
		if err != nil {
			t.Fatalf("re-parsing the rendering of %q: %v", in, err)
		}
		if diff := cmp.Diff(ms, again.Matchers()); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", in, diff)
		}
	})
}

// TestSelectorWithName: the labels strategy adds __name__="N" and presence
// matchers to a seriesQuery, whatever its form, inside the braces
// (Prometheus rejects a name both before and inside them).
func TestSelectorWithName(t *testing.T) {
	tests := []struct {
		name, seriesQuery string
		extra             []rules.Matcher
		want              string
	}{
		{"bare name", `up`, nil, `{__name__="up"}`},
		{"name and braces", `http_total{a="b"}`, []rules.Matcher{{Name: "pod", Op: rules.MatchNotEqual}},
			`{__name__="http_total",a="b",pod!=""}`},
		{"regex on the name", `{__name__=~"x.*",a!=""}`, nil, `{__name__=~"x.*",a!="",__name__="up"}`},
		{"escapes and UTF-8 label names", "{\"a.b\"=~`\\d+\"`}", []rules.Matcher{{Name: "namespace", Op: rules.MatchEqual}},
			`{"a.b"=~"\\d+\"",__name__="up",namespace=""}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := ParseSelector(tc.seriesQuery)
			if err != nil {
				t.Fatal(err)
			}
			name := "up"
			if strings.HasPrefix(tc.seriesQuery, "http_total") {
				name = "http_total"
			}
			got := renderSelector(append(withName(sel, name), tc.extra...))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("selector (-want +got):\n%s", diff)
			}
			// It parses back to the same matchers.
			back, err := ParseSelector(got)
			if err != nil {
				t.Fatalf("rendered selector does not parse: %v", err)
			}
			if diff := cmp.Diff(append(withName(sel, name), tc.extra...), back.Matchers()); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}
