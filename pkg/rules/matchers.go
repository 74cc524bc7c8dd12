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

// MatchOp is a PromQL label matching operator.
type MatchOp string

// The four PromQL label matching operators.
const (
	MatchEqual     MatchOp = "="
	MatchNotEqual  MatchOp = "!="
	MatchRegexp    MatchOp = "=~"
	MatchNotRegexp MatchOp = "!~"
)

// Matcher is one PromQL label matcher such as pod=~"a|b".
//
// Value is the raw, unquoted value: a literal for = and !=, an RE2 regular
// expression (implicitly anchored by Prometheus) for =~ and !~. String
// quotes it, so any value - including quotes, backslashes and newlines - is
// rendered as exactly one PromQL string literal.
type Matcher struct {
	Name  string
	Op    MatchOp
	Value string
}

// String renders the matcher as PromQL, e.g. `pod=~"a|b"`.
func (m Matcher) String() string {
	return string(m.appendTo(make([]byte, 0, len(m.Name)+len(m.Op)+len(m.Value)+2)))
}

func (m Matcher) appendTo(b []byte) []byte {
	b = append(b, m.Name...)
	b = append(b, m.Op...)
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
func JoinMatchers(ms []Matcher) string {
	n := 0
	for _, m := range ms {
		n += len(m.Name) + len(m.Value) + 5
	}
	b := make([]byte, 0, n)
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = m.appendTo(b)
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
func SelectorMatchers(sel labels.Selector) ([]Matcher, error) {
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, fmt.Errorf("%w: selector %q selects nothing", ErrUnsupportedSelector, sel.String())
	}
	out := make([]Matcher, 0, len(reqs))
	for _, r := range reqs {
		m, err := requirementMatcher(r.Key(), r.Operator(), r.ValuesUnsorted())
		if err != nil {
			return nil, fmt.Errorf("label selector %q: %w", sel.String(), err)
		}
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b Matcher) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// requirementMatcher converts one selector requirement. values need not be
// sorted.
func requirementMatcher(key string, op selection.Operator, values []string) (Matcher, error) {
	if err := checkLabelName(key); err != nil {
		return Matcher{}, err
	}
	if err := checkLabelValues(key, values); err != nil {
		return Matcher{}, err
	}
	one := func() (string, error) {
		if len(values) != 1 {
			return "", fmt.Errorf("%w: label %q: operator %q needs exactly one value, got %d", ErrUnsupportedSelector, key, op, len(values))
		}
		return values[0], nil
	}
	switch op {
	case selection.Exists:
		return Matcher{Name: key, Op: MatchNotEqual}, nil
	case selection.DoesNotExist:
		return Matcher{Name: key, Op: MatchEqual}, nil
	case selection.Equals, selection.DoubleEquals:
		v, err := one()
		return Matcher{Name: key, Op: MatchEqual, Value: v}, err
	case selection.NotEquals:
		v, err := one()
		return Matcher{Name: key, Op: MatchNotEqual, Value: v}, err
	case selection.In, selection.NotIn:
		if len(values) == 0 {
			return Matcher{}, fmt.Errorf("%w: label %q: operator %q needs at least one value", ErrUnsupportedSelector, key, op)
		}
		sorted := slices.Clone(values)
		slices.Sort(sorted)
		sorted = slices.Compact(sorted)
		mop := MatchRegexp
		if op == selection.NotIn {
			mop = MatchNotRegexp
		}
		return Matcher{Name: key, Op: mop, Value: OneOf(sorted)}, nil
	case selection.GreaterThan, selection.LessThan:
		return Matcher{}, fmt.Errorf("%w: label %q: operator %q cannot be expressed as a PromQL label matcher (use =, !=, in, notin, exists or !exists)", ErrUnsupportedOperator, key, op)
	default:
		return Matcher{}, fmt.Errorf("%w: label %q: operator %q", ErrUnsupportedOperator, key, op)
	}
}
