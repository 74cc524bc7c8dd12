package rules

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	promlabels "github.com/prometheus/prometheus/model/labels"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Errors returned (wrapped, with the offending label or value) by the
// functions of this package. Test with errors.Is.
var (
	// ErrUnsupportedOperator is returned for a label selector operator that
	// has no PromQL matcher equivalent (gt, lt).
	ErrUnsupportedOperator = errors.New("unsupported label selector operator")
	// ErrInvalidLabelName is returned when a name used as a PromQL label name
	// (from a label selector, an override or a rendered resource template)
	// is not a valid Prometheus label name.
	ErrInvalidLabelName = errors.New("invalid Prometheus label name")
	// ErrInvalidLabelValue is returned for a value that cannot be a
	// Prometheus label value (not valid UTF-8).
	ErrInvalidLabelValue = errors.New("invalid Prometheus label value")
	// ErrInvalidMetricName is returned when a series name handed to a query
	// template is not a classic Prometheus metric name
	// ([a-zA-Z_:][a-zA-Z0-9_:]*): Prometheus 3 accepts arbitrary UTF-8 names,
	// which written bare into a query could change its meaning.
	ErrInvalidMetricName = errors.New("invalid Prometheus metric name")
	// ErrUnsupportedSelector is returned for a label selector that cannot be
	// expressed as PromQL matchers (e.g. labels.Nothing()).
	ErrUnsupportedSelector = errors.New("unsupported label selector")
)

// newMatcher returns Prometheus's matcher. The regular expressions of
// this package's matchers are OneOf lists, which always compile.
func newMatcher(t promlabels.MatchType, name, value string) (*promlabels.Matcher, error) {
	m, err := promlabels.NewMatcher(t, name, value)
	if err != nil {
		return nil, fmt.Errorf("label %q: %w", name, err)
	}
	return m, nil
}

// appendMatcher renders m as PromQL, e.g. `pod=~"a|b"`. The value is
// quoted, so any value - including quotes, backslashes and newlines - is
// exactly one PromQL string literal. The name is a legacy label name
// (checked when the matcher is built), written bare.
func appendMatcher(b []byte, m *promlabels.Matcher) []byte {
	b = append(b, m.Name...)
	b = append(b, m.Type.String()...)
	return appendQuoted(b, m.Value)
}

// plainASCII reports whether s is printable ASCII without a double quote or a
// backslash: a string strconv.Quote leaves unchanged between its quotes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendQuoted appends s as a double-quoted PromQL string, exactly as
// strconv.AppendQuote does (PromQL unquotes with Go's rules), with a fast
// path for the common plain-ASCII value.
func appendQuoted(b []byte, s string) []byte {
	if !plainASCII(s) {
		return strconv.AppendQuote(b, s)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// JoinMatchers renders matchers comma-separated, in order, as they appear
// inside a PromQL selector's braces (the .LabelMatchers template variable).
func JoinMatchers(ms []*promlabels.Matcher) string {
	n := 0
	for _, m := range ms {
		n += len(m.Name) + len(m.Value) + 5
	}
	b := make([]byte, 0, n)
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMatcher(b, m)
	}
	return string(b)
}

func checkSeriesName(name string) error {
	if name != "" && !model.LegacyValidation.IsValidMetricName(name) {
		return fmt.Errorf("%w: series %q (must match [a-zA-Z_:][a-zA-Z0-9_:]*)", ErrInvalidMetricName, name)
	}
	return nil
}

func checkLabelName(name string) error {
	if !model.LegacyValidation.IsValidLabelName(name) {
		return fmt.Errorf("%w: %q (must match [a-zA-Z_][a-zA-Z0-9_]*)", ErrInvalidLabelName, name)
	}
	return nil
}

func checkLabelValues(name string, values []string) error {
	for _, v := range values {
		if !utf8.ValidString(v) {
			return fmt.Errorf("%w: label %q: value %q is not valid UTF-8", ErrInvalidLabelValue, name, v)
		}
	}
	return nil
}

// OneOf returns an RE2 regular expression matching exactly the given values
// and nothing else: each value is escaped with regexp.QuoteMeta and the
// results are joined with "|". Prometheus anchors the whole expression.
func OneOf(values []string) string {
	switch len(values) {
	case 0:
		return ""
	case 1:
		return regexp.QuoteMeta(values[0])
	}
	var sb strings.Builder
	n := len(values)
	for _, v := range values {
		n += len(v)
	}
	sb.Grow(n + n/8)
	for i, v := range values {
		if i > 0 {
			sb.WriteByte('|')
		}
		sb.WriteString(regexp.QuoteMeta(v))
	}
	return sb.String()
}

// quoteInner returns s escaped for use between double quotes in PromQL,
// without the surrounding quotes.
func quoteInner(s string) string {
	if plainASCII(s) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// SelectorMatchers converts a Kubernetes label selector into PromQL label
// matchers, sorted by label name (stable for equal names):
//
//	l, l exists            l!=""
//	!l, l does not exist   l=""
//	l=v, l==v              l="v"
//	l!=v                   l!="v"
//	l in (a,b)             l=~"a|b"   (values regex-escaped, sorted)
//	l notin (a,b)          l!~"a|b"
//
// gt and lt have no PromQL equivalent and return ErrUnsupportedOperator;
// label names that are not Prometheus label names return
// ErrInvalidLabelName. A nil selector or labels.Everything() gives no
// matchers. Values are never interpreted: a value's regexp metacharacters,
// quotes, backslashes and newlines stay inside its string literal.
func SelectorMatchers(sel labels.Selector) ([]*promlabels.Matcher, error) {
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, fmt.Errorf("%w: selector %q selects nothing", ErrUnsupportedSelector, sel.String())
	}
	out := make([]*promlabels.Matcher, 0, len(reqs))
	for _, r := range reqs {
		m, err := requirementMatcher(r.Key(), r.Operator(), r.ValuesUnsorted())
		if err != nil {
			return nil, fmt.Errorf("label selector %q: %w", sel.String(), err)
		}
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b *promlabels.Matcher) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// requirementMatcher converts one selector requirement. values need not be
// sorted.
func requirementMatcher(key string, op selection.Operator, values []string) (*promlabels.Matcher, error) {
	if err := checkLabelName(key); err != nil {
		return nil, err
	}
	if err := checkLabelValues(key, values); err != nil {
		return nil, err
	}
	one := func() (string, error) {
		if len(values) != 1 {
			return "", fmt.Errorf("%w: label %q: operator %q needs exactly one value, got %d", ErrUnsupportedSelector, key, op, len(values))
		}
		return values[0], nil
	}
	switch op {
	case selection.Exists:
		return newMatcher(promlabels.MatchNotEqual, key, "")
	case selection.DoesNotExist:
		return newMatcher(promlabels.MatchEqual, key, "")
	case selection.Equals, selection.DoubleEquals:
		v, err := one()
		if err != nil {
			return nil, err
		}
		return newMatcher(promlabels.MatchEqual, key, v)
	case selection.NotEquals:
		v, err := one()
		if err != nil {
			return nil, err
		}
		return newMatcher(promlabels.MatchNotEqual, key, v)
	case selection.In, selection.NotIn:
		if len(values) == 0 {
			return nil, fmt.Errorf("%w: label %q: operator %q needs at least one value", ErrUnsupportedSelector, key, op)
		}
		sorted := slices.Clone(values)
		slices.Sort(sorted)
		sorted = slices.Compact(sorted)
		t := promlabels.MatchRegexp
		if op == selection.NotIn {
			t = promlabels.MatchNotRegexp
		}
		return newMatcher(t, key, OneOf(sorted))
	case selection.GreaterThan, selection.LessThan:
		return nil, fmt.Errorf("%w: label %q: operator %q cannot be expressed as a PromQL label matcher (use =, !=, in, notin, exists or !exists)", ErrUnsupportedOperator, key, op)
	default:
		return nil, fmt.Errorf("%w: label %q: operator %q", ErrUnsupportedOperator, key, op)
	}
}
