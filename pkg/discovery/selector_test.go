package discovery

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/promscaler/promscaler/test/ruletest"
)

// matcherStrings renders matchers as PromQL, for comparisons.
func matcherStrings(ms []*labels.Matcher) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	return out
}

func TestParseSelector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "bare name", in: "node_load1", want: []string{`__name__="node_load1"`}},
		{name: "name with colon", in: " job:rate5m ", want: []string{`__name__="job:rate5m"`}},
		{
			name: "seed",
			in:   `{__name__="pm_status",namespace!="",pod_name!="",state="active processes"}`,
			want: []string{`__name__="pm_status"`, `namespace!=""`, `pod_name!=""`, `state="active processes"`},
		},
		{
			name: "name, regexes, quotes, trailing comma",
			in:   "http_requests_total{ pod =~ 'web-.*' , path!~`/health\\z`, msg=\"a\\\"b\\n\", }",
			want: []string{`pod=~"web-.*"`, `path!~"/health\\z"`, `msg="a\"b\n"`, `__name__="http_requests_total"`},
		},
		{name: "single quotes with escapes", in: `{a='it\'s "x"'}`, want: []string{`a="it's \"x\""`}},
		{name: "quoted metric name and label", in: `{"my.metric", "a.b"="c"}`, want: []string{`__name__="my.metric"`, `"a.b"="c"`}},
		{name: "empty", in: "  ", wantErr: "unexpected end of input"},
		{name: "empty braces", in: "{}", wantErr: "every matcher matches the empty string"},
		{name: "only empty matchers", in: `{namespace!="x"}`, wantErr: "every matcher matches the empty string"},
		{name: "unclosed", in: `{a="b"`, wantErr: "unexpected end of input"},
		{name: "unterminated string", in: `{a="b}`, wantErr: "unterminated quoted string"},
		{name: "bad operator", in: `{a=="b"}`, wantErr: "unexpected"},
		{name: "no operator", in: `{a "b"}`, wantErr: "unexpected"},
		{name: "bad regexp", in: `{a=~"("}`, wantErr: "missing closing )"},
		{name: "trailing garbage", in: `up{a="b"} offset 5m`, wantErr: "unexpected"},
		{name: "range selector", in: `up[5m]`, wantErr: "unexpected"},
		{name: "missing separator", in: `{a="b" c="d"}`, wantErr: "unexpected"},
		{name: "newline in string", in: "{a=\"b\nc\"}", wantErr: "unterminated quoted string"},
		// Prometheus's parser takes an escaped byte that is not UTF-8 (and
		// so does Prometheus's /api/v1/series).
		{name: "invalid UTF-8, escaped", in: `{a="\xb8"}`, want: []string{`a="\xb8"`}},
		{name: "invalid UTF-8, raw value", in: "{a=`\xb8`}", wantErr: "invalid UTF-8"},
		{name: "invalid UTF-8, raw name", in: "{`\xb8`}", wantErr: "invalid UTF-8"},
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
			if diff := cmp.Diff(tc.want, matcherStrings(sel.Matchers())); diff != "" {
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
		ms = append(withName(sel, "fuzz_name"), labels.MustNewMatcher(labels.MatchNotEqual, "pod", ""))
		again, err := ParseSelector(renderSelector(ms))
		if err != nil {
			t.Fatalf("re-parsing the rendering of %q: %v", in, err)
		}
		if diff := cmp.Diff(matcherStrings(ms), matcherStrings(again.Matchers())); diff != "" {
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
		extra             []*labels.Matcher
		want              string
	}{
		{"bare name", `up`, nil, `{__name__="up"}`},
		{"name and braces", `http_total{a="b"}`, []*labels.Matcher{labels.MustNewMatcher(labels.MatchNotEqual, "pod", "")},
			`{a="b",__name__="http_total",pod!=""}`},
		{"regex on the name", `{__name__=~"x.*",a!=""}`, nil, `{__name__=~"x.*",a!="",__name__="up"}`},
		{"escapes and UTF-8 label names", "{\"a.b\"=~`\\d+\"`}", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "namespace", "")},
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
			if diff := cmp.Diff(matcherStrings(append(withName(sel, name), tc.extra...)), matcherStrings(back.Matchers())); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}
