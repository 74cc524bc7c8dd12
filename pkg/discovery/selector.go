package discovery

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/pkg/rules"
)

// ErrBadSelector is returned (wrapped, with the position) for a seriesQuery
// that is not a Prometheus series selector.
var ErrBadSelector = errors.New("invalid series selector")

// Selector is a parsed Prometheus series selector (a rule's seriesQuery),
// such as `http_requests_total{namespace!="",pod=~"web-.*"}`. It is used
// offline, to decide which series of a saved /api/v1/series answer a rule
// would have discovered.
type Selector struct {
	text     string
	matchers []selMatcher
}

type selMatcher struct {
	rules.Matcher
	re *regexp.Regexp // anchored; for =~ and !~
}

func (m selMatcher) matches(v string) bool {
	switch m.Op {
	case rules.MatchEqual:
		return v == m.Value
	case rules.MatchNotEqual:
		return v != m.Value
	case rules.MatchRegexp:
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

// String returns the selector as written.
func (s *Selector) String() string { return s.text }

// Matchers returns the selector's label matchers, a metric name written
// before the braces first (as __name__="...").
func (s *Selector) Matchers() []rules.Matcher {
	out := make([]rules.Matcher, len(s.matchers))
	for i, m := range s.matchers {
		out[i] = m.Matcher
	}
	return out
}

// Matches reports whether a series with these labels is selected: every
// matcher holds, an absent label counting as the empty value (as in
// Prometheus).
func (s *Selector) Matches(ls model.LabelSet) bool {
	for _, m := range s.matchers {
		if !m.matches(string(ls[model.LabelName(m.Name)])) {
			return false
		}
	}
	return true
}

// requires reports whether every series the selector selects has label:
// some matcher on it does not match the empty value.
func (s *Selector) requires(label string) bool {
	for _, m := range s.matchers {
		if m.Name == label && !m.matches("") {
			return true
		}
	}
	return false
}

// FailedMatcher returns the first matcher a series with these labels does
// not satisfy, for explanations; ok is false when the selector matches.
func (s *Selector) FailedMatcher(ls model.LabelSet) (m rules.Matcher, ok bool) {
	for _, sm := range s.matchers {
		if !sm.matches(string(ls[model.LabelName(sm.Name)])) {
			return sm.Matcher, true
		}
	}
	return rules.Matcher{}, false
}

// ParseSelector parses a Prometheus series selector: an optional metric name
// followed by optional braces holding label matchers (=, !=, =~, !~) with
// double-quoted, single-quoted or back-quoted values; label names may be
// quoted (Prometheus 3). Regular expressions are anchored as in Prometheus.
// As Prometheus does, it rejects a selector all of whose matchers match the
// empty string, which would select every series.
func ParseSelector(text string) (*Selector, error) {
	p := &selParser{s: text}
	sel, err := p.parse()
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrBadSelector, text, err)
	}
	return sel, nil
}

type selParser struct {
	s   string
	pos int
}

func (p *selParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *selParser) skipSpace() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func isIdentStart(c byte, metric bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || metric && c == ':'
}

func isIdentChar(c byte, metric bool) bool {
	return isIdentStart(c, metric) || c >= '0' && c <= '9'
}

func (p *selParser) ident(metric bool) string {
	start := p.pos
	if p.pos < len(p.s) && isIdentStart(p.s[p.pos], metric) {
		p.pos++
		for p.pos < len(p.s) && isIdentChar(p.s[p.pos], metric) {
			p.pos++
		}
	}
	return p.s[start:p.pos]
}

func (p *selParser) parse() (*Selector, error) {
	sel := &Selector{text: p.s}
	p.skipSpace()
	if name := p.ident(true); name != "" {
		sel.matchers = append(sel.matchers, selMatcher{Matcher: rules.Matcher{Name: string(model.MetricNameLabel), Op: rules.MatchEqual, Value: name}})
	}
	p.skipSpace()
	if p.pos < len(p.s) && p.s[p.pos] == '{' {
		p.pos++
		if err := p.parseMatchers(sel); err != nil {
			return nil, err
		}
	}
	p.skipSpace()
	if p.pos != len(p.s) {
		return nil, p.errorf("unexpected %q", rest(p.s[p.pos:]))
	}
	if len(sel.matchers) == 0 {
		return nil, errors.New("no metric name and no label matchers")
	}
	for _, m := range sel.matchers {
		if !m.matches("") {
			return sel, nil
		}
	}
	return nil, errors.New("every matcher matches the empty string, so the selector would select every series (add one such as __name__=~\".+\")")
}

func rest(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

func (p *selParser) parseMatchers(sel *Selector) error {
	for {
		p.skipSpace()
		if p.pos >= len(p.s) {
			return p.errorf("missing closing '}'")
		}
		if p.s[p.pos] == '}' {
			p.pos++
			return nil
		}
		var name string
		quoted := false
		if c := p.s[p.pos]; c == '"' || c == '\'' || c == '`' {
			v, err := p.str()
			if err != nil {
				return err
			}
			name, quoted = v, true
		} else {
			name = p.ident(false)
			if name == "" {
				return p.errorf("expected a label name, found %q", rest(p.s[p.pos:]))
			}
		}
		p.skipSpace()
		op, ok := p.op()
		if !ok {
			// Prometheus 3: a lone quoted string is the metric name.
			if quoted && p.pos < len(p.s) && (p.s[p.pos] == ',' || p.s[p.pos] == '}') {
				sel.matchers = append(sel.matchers, selMatcher{Matcher: rules.Matcher{Name: string(model.MetricNameLabel), Op: rules.MatchEqual, Value: name}})
				if p.s[p.pos] == ',' {
					p.pos++
				}
				continue
			}
			return p.errorf("expected one of =, !=, =~, !~ after label %q", name)
		}
		p.skipSpace()
		if p.pos >= len(p.s) {
			return p.errorf("missing value for label %q", name)
		}
		val, err := p.str()
		if err != nil {
			return err
		}
		m := selMatcher{Matcher: rules.Matcher{Name: name, Op: op, Value: val}}
		if op == rules.MatchRegexp || op == rules.MatchNotRegexp {
			re, err := regexp.Compile("^(?s:" + val + ")$")
			if err != nil {
				return fmt.Errorf("label %q: regular expression %q: %w", name, val, err)
			}
			m.re = re
		}
		sel.matchers = append(sel.matchers, m)
		p.skipSpace()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == '}' {
			continue
		}
		if p.pos >= len(p.s) {
			return p.errorf("missing closing '}'")
		}
		return p.errorf("expected ',' or '}', found %q", rest(p.s[p.pos:]))
	}
}

func (p *selParser) op() (rules.MatchOp, bool) {
	for _, op := range []rules.MatchOp{rules.MatchRegexp, rules.MatchNotRegexp, rules.MatchNotEqual, rules.MatchEqual} {
		if strings.HasPrefix(p.s[p.pos:], string(op)) {
			p.pos += len(op)
			return op, true
		}
	}
	return "", false
}

// str reads a PromQL string literal: "..." and '...' with Go escapes, or
// `...` raw.
func (p *selParser) str() (string, error) {
	start := p.pos
	q := p.s[p.pos]
	if q != '"' && q != '\'' && q != '`' {
		return "", p.errorf("expected a quoted string, found %q", rest(p.s[p.pos:]))
	}
	p.pos++
	var lit strings.Builder
	lit.WriteByte('"')
	for {
		if p.pos >= len(p.s) {
			p.pos = start
			return "", p.errorf("unterminated string")
		}
		c := p.s[p.pos]
		switch {
		case c == q:
			p.pos++
			var v string
			if q == '`' {
				v = p.s[start+1 : p.pos-1]
			} else {
				lit.WriteByte('"')
				var err error
				if v, err = strconv.Unquote(lit.String()); err != nil {
					p.pos = start
					return "", p.errorf("invalid string %s: %v", p.s[start:min(len(p.s), start+40)], err)
				}
			}
			// Raw strings too: Prometheus refuses names and values that are
			// not UTF-8, whatever the quotes.
			if !utf8.ValidString(v) {
				p.pos = start
				return "", p.errorf("string is not valid UTF-8")
			}
			return v, nil
		case q == '`':
			p.pos++
		case c == '\\' && p.pos+1 < len(p.s):
			if p.s[p.pos+1] == '\'' {
				lit.WriteByte('\'')
			} else {
				lit.WriteString(p.s[p.pos : p.pos+2])
			}
			p.pos += 2
		case c == '"':
			lit.WriteString(`\"`)
			p.pos++
		case c == '\n':
			p.pos = start
			return "", p.errorf("newline in string")
		default:
			lit.WriteByte(c)
			p.pos++
		}
	}
}

// MatchSeries returns, for each rule of rs (custom rules, then external
// rules, as rules.RuleSet.Rules orders them), the series of a saved
// /api/v1/series answer its seriesQuery selects. It is the offline stand-in
// for asking Prometheus; feed its result to BuildIndex. A seriesQuery that
// does not parse is an error naming the rule.
func MatchSeries(rs *rules.RuleSet, series []model.LabelSet) ([]RuleSeries, error) {
	var errs []error
	ruleList := rs.Rules()
	out := make([]RuleSeries, 0, len(ruleList))
	bySel := map[string][]rules.Series{}
	for _, r := range ruleList {
		matched, ok := bySel[r.SeriesQuery()]
		if !ok {
			sel, err := ParseSelector(r.SeriesQuery())
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.seriesQuery: %w", r.Path(), err))
				continue
			}
			for _, ls := range series {
				if sel.Matches(ls) {
					matched = append(matched, rules.SeriesFromLabelSet(ls))
				}
			}
			bySel[r.SeriesQuery()] = matched
		}
		out = append(out, RuleSeries{Rule: r, Series: matched})
	}
	return out, errors.Join(errs...)
}

// labelNameExpr writes a label name for a PromQL expression: as is when it
// is a legacy identifier, else quoted (Prometheus 3 UTF-8 names).
func labelNameExpr(name string) string {
	if name != "" && isIdentStart(name[0], false) {
		ok := true
		for i := 1; i < len(name); i++ {
			if !isIdentChar(name[i], false) {
				ok = false
				break
			}
		}
		if ok {
			return name
		}
	}
	return strconv.Quote(name)
}
