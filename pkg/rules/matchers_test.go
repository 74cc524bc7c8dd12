package rules

import (
	"errors"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	promlabels "github.com/prometheus/prometheus/model/labels"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

func TestSelectorMatchers(t *testing.T) {
	tests := []struct {
		name     string
		selector string
		want     []*promlabels.Matcher
		wantErr  error
	}{
		{name: "empty", selector: "", want: nil},
		{name: "equals", selector: "queue=work", want: []*promlabels.Matcher{mm(promlabels.MatchEqual, "queue", "work")}},
		{name: "double equals", selector: "queue==work", want: []*promlabels.Matcher{mm(promlabels.MatchEqual, "queue", "work")}},
		{name: "not equals", selector: "queue!=work", want: []*promlabels.Matcher{mm(promlabels.MatchNotEqual, "queue", "work")}},
		{name: "exists", selector: "queue", want: []*promlabels.Matcher{mm(promlabels.MatchNotEqual, "queue", "")}},
		{name: "does not exist", selector: "!queue", want: []*promlabels.Matcher{mm(promlabels.MatchEqual, "queue", "")}},
		{name: "in sorted and escaped", selector: "host in (b.example, a.example)", want: []*promlabels.Matcher{mm(promlabels.MatchRegexp, "host", `a\.example|b\.example`)}},
		{name: "in single value", selector: "host in (a)", want: []*promlabels.Matcher{mm(promlabels.MatchRegexp, "host", `a`)}},
		{name: "notin", selector: "env notin (dev,test)", want: []*promlabels.Matcher{mm(promlabels.MatchNotRegexp, "env", `dev|test`)}},
		{name: "sorted by key", selector: "z=1,a=2,m", want: []*promlabels.Matcher{mm(promlabels.MatchEqual, "a", "2"), mm(promlabels.MatchNotEqual, "m", ""), mm(promlabels.MatchEqual, "z", "1")}},
		{name: "gt unsupported", selector: "size>3", wantErr: ErrUnsupportedOperator},
		{name: "lt unsupported", selector: "size<3", wantErr: ErrUnsupportedOperator},
		{name: "kubernetes label key is not a prometheus label", selector: "app.kubernetes.io/name=web", wantErr: ErrInvalidLabelName},
		{name: "dash in key", selector: "my-label=x", wantErr: ErrInvalidLabelName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := labels.Parse(tc.selector)
			if err != nil {
				t.Fatalf("labels.Parse(%q): %v", tc.selector, err)
			}
			got, err := SelectorMatchers(sel)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("SelectorMatchers(%q) error = %v, want %v", tc.selector, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, sameMatchers); diff != "" {
				t.Errorf("SelectorMatchers(%q) mismatch (-want +got):\n%s", tc.selector, diff)
			}
		})
	}
}

func TestSelectorMatchersSpecialSelectors(t *testing.T) {
	if got, err := SelectorMatchers(nil); err != nil || got != nil {
		t.Errorf("SelectorMatchers(nil) = %v, %v; want nil, nil", got, err)
	}
	if got, err := SelectorMatchers(labels.Everything()); err != nil || got != nil {
		t.Errorf("SelectorMatchers(Everything) = %v, %v; want nil, nil", got, err)
	}
	if _, err := SelectorMatchers(labels.Nothing()); !errors.Is(err, ErrUnsupportedSelector) {
		t.Errorf("SelectorMatchers(Nothing) error = %v, want %v", err, ErrUnsupportedSelector)
	}
}

// Requirement values are validated by apimachinery, so selectors cannot
// carry hostile values; requirementMatcher is still safe for any value.
func TestRequirementMatcherHostileValues(t *testing.T) {
	values := []string{`a"b`, `a\`, "line\nbreak", `.*`, `x|y`, `"} or vector(1) #`, "\x00", `\"`}
	for _, op := range []selection.Operator{selection.Equals, selection.NotEquals, selection.In, selection.NotIn} {
		for _, v := range values {
			m, err := requirementMatcher("l", op, []string{v})
			if err != nil {
				t.Fatalf("requirementMatcher(%q, %q): %v", op, v, err)
			}
			rendered := JoinMatchers([]*promlabels.Matcher{m})
			parsed, err := parseSelectorBody(rendered)
			if err != nil {
				t.Fatalf("rendered %s does not parse back: %v", rendered, err)
			}
			if diff := cmp.Diff([]*promlabels.Matcher{m}, parsed, sameMatchers); diff != "" {
				t.Errorf("%q %q: parsed back mismatch (-want +got):\n%s", op, v, diff)
			}
			if m.Type == promlabels.MatchRegexp || m.Type == promlabels.MatchNotRegexp {
				re := regexp.MustCompile("^(?s:" + m.Value + ")$")
				if !re.MatchString(v) {
					t.Errorf("%q: regexp %q does not match its own value %q", op, m.Value, v)
				}
				if re.MatchString(v + "x") {
					t.Errorf("%q: regexp %q matches more than %q", op, m.Value, v)
				}
			} else if m.Value != v {
				t.Errorf("%q: value %q, want %q", op, m.Value, v)
			}
		}
	}
	if _, err := requirementMatcher("l", selection.Equals, []string{"\xff"}); !errors.Is(err, ErrInvalidLabelValue) {
		t.Errorf("invalid UTF-8 value: error = %v, want %v", err, ErrInvalidLabelValue)
	}
	if _, err := requirementMatcher("l", selection.In, nil); !errors.Is(err, ErrUnsupportedSelector) {
		t.Errorf("in without values: error = %v, want %v", err, ErrUnsupportedSelector)
	}
}

func TestRenderMatcher(t *testing.T) {
	tests := []struct {
		name string
		m    *promlabels.Matcher
		want string
	}{
		{"equal", mm(promlabels.MatchEqual, "pod", "a"), `pod="a"`},
		{"not equal empty", mm(promlabels.MatchNotEqual, "pod", ""), `pod!=""`},
		{"regexp", mm(promlabels.MatchRegexp, "pod", OneOf([]string{"a", "b"})), `pod=~"a|b"`},
		{"not regexp escaped", mm(promlabels.MatchNotRegexp, "host", OneOf([]string{"a.b"})), `host!~"a\\.b"`},
		{"quote", mm(promlabels.MatchEqual, "l", `say "hi"`), `l="say \"hi\""`},
		{"backslash", mm(promlabels.MatchEqual, "l", `C:\dir`), `l="C:\\dir"`},
		{"newline", mm(promlabels.MatchEqual, "l", "a\nb"), `l="a\nb"`},
		{"unicode kept", mm(promlabels.MatchEqual, "l", "café"), `l="café"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := JoinMatchers([]*promlabels.Matcher{tc.m}); got != tc.want {
				t.Errorf("rendered %s, want %s", got, tc.want)
			}
		})
	}
	if got, want := JoinMatchers([]*promlabels.Matcher{mm(promlabels.MatchEqual, "a", "1"), mm(promlabels.MatchRegexp, "b", "x|y")}), `a="1",b=~"x|y"`; got != want {
		t.Errorf("JoinMatchers = %s, want %s", got, want)
	}
	if got := JoinMatchers(nil); got != "" {
		t.Errorf("JoinMatchers(nil) = %q, want empty", got)
	}
}

func TestAppendQuotedIsStrconvQuote(t *testing.T) {
	for _, s := range []string{"", "a", "web-1.x_y", `"`, `\`, "\n", "\x7f", "\x1f", " ", "~", "café", "\xff", "a\u2028b", "tab\there"} {
		if got, want := string(appendQuoted(nil, s)), strconv.Quote(s); got != want {
			t.Errorf("appendQuoted(%q) = %s, want %s", s, got, want)
		}
		if got, want := quoteInner(s), strconv.Quote(s); `"`+got+`"` != want {
			t.Errorf("quoteInner(%q) = %s, want the inside of %s", s, got, want)
		}
	}
}

func TestCheckNames(t *testing.T) {
	for name, want := range map[string]bool{
		"pod": true, "_x": true, "kube_pod_9": true, "A": true,
		"": false, "9pod": false, "pod-name": false, "a.b": false, "a/b": false, "café": false, "job:rate5m": false,
	} {
		if got := checkLabelName(name) == nil; got != want {
			t.Errorf("checkLabelName(%q) = %v, want valid %v", name, checkLabelName(name), want)
		}
	}
	for name, want := range map[string]bool{
		"up": true, "http_requests_total": true, "job:rate5m": true, "_x": true, ":x": true, "": true,
		"9up": false, "my.metric": false, "a-b": false, `x{a="b"}`: false, "é": false,
	} {
		if got := checkSeriesName(name) == nil; got != want {
			t.Errorf("checkSeriesName(%q) = %v, want valid %v", name, checkSeriesName(name), want)
		}
	}
}

func TestOneOf(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		match  []string
		reject []string
	}{
		{"plain", []string{"a", "b"}, []string{"a", "b"}, []string{"ab", "a|b", ""}},
		{"dots", []string{"ip-10-0-0-1.ec2.internal"}, []string{"ip-10-0-0-1.ec2.internal"}, []string{"ip-10-0-0-1xec2xinternal"}},
		{"alternation inside a value", []string{"a|b"}, []string{"a|b"}, []string{"a", "b"}},
		{"wildcard value", []string{".*"}, []string{".*"}, []string{"anything", ""}},
		{"group breaker", []string{")|(.*"}, []string{")|(.*"}, []string{"x"}},
		{"empty value among others", []string{"", "a"}, []string{"", "a"}, []string{"b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			re := regexp.MustCompile("^(?s:" + OneOf(tc.values) + ")$")
			for _, v := range tc.match {
				if !re.MatchString(v) {
					t.Errorf("OneOf(%q) = %q does not match %q", tc.values, re, v)
				}
			}
			for _, v := range tc.reject {
				if re.MatchString(v) {
					t.Errorf("OneOf(%q) = %q matches %q", tc.values, re, v)
				}
			}
		})
	}
}

// FuzzSelectorToMatchers parses arbitrary selector strings and, for those
// Kubernetes accepts, checks that the conversion never panics and that the
// rendered matchers parse back to exactly the same matchers, with regexps
// that match exactly the requirement's values.
func FuzzSelectorToMatchers(f *testing.F) {
	for _, s := range []string{"", "a=b", "a!=b", "a", "!a", "a in (x,y)", "a notin (x.y,z)", "a>1", "a=b,c in (d),!e", "app.kubernetes.io/name=x", "a==b-c_d.e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := labels.Parse(s)
		if err != nil {
			return
		}
		ms, err := SelectorMatchers(sel)
		if err != nil {
			return
		}
		reqs, _ := sel.Requirements()
		if len(ms) != len(reqs) {
			t.Fatalf("%q: %d matchers for %d requirements", s, len(ms), len(reqs))
		}
		rendered := JoinMatchers(ms)
		parsed, err := parseSelectorBody(rendered)
		if len(ms) > 0 && err != nil {
			t.Fatalf("%q rendered %s which does not parse: %v", s, rendered, err)
		}
		if len(ms) > 0 {
			if diff := cmp.Diff(ms, parsed, sameMatchers); diff != "" {
				t.Fatalf("%q: parsed back mismatch (-want +got):\n%s", s, diff)
			}
		}
		for _, r := range reqs {
			if r.Operator() != selection.In && r.Operator() != selection.NotIn {
				continue
			}
			var m *promlabels.Matcher
			for _, c := range ms {
				if c.Name == r.Key() && (c.Type == promlabels.MatchRegexp || c.Type == promlabels.MatchNotRegexp) {
					m = c
				}
			}
			if m == nil {
				t.Fatalf("%q: no regexp matcher for %s", s, r.Key())
			}
			re, err := regexp.Compile("^(?s:" + m.Value + ")$")
			if err != nil {
				t.Fatalf("%q: regexp %q does not compile: %v", s, m.Value, err)
			}
			for _, v := range r.Values().UnsortedList() {
				if !re.MatchString(v) {
					t.Fatalf("%q: regexp %q does not match value %q", s, m.Value, v)
				}
			}
		}
	})
}
