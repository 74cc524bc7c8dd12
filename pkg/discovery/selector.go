package discovery

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/promscaler/promscaler/pkg/rules"
)

// ErrBadSelector is returned (wrapped, with the parser's reason) for a
// seriesQuery that is not a Prometheus series selector.
var ErrBadSelector = errors.New("invalid series selector")

// promql is Prometheus's own PromQL parser.
var promql = parser.NewParser(parser.Options{})

// Selector is a parsed Prometheus series selector (a rule's seriesQuery),
// such as `http_requests_total{namespace!="",pod=~"web-.*"}`: the labels
// strategy renders its matchers into label requests, and offline tools use
// it to decide which series of a saved /api/v1/series answer a rule would
// have discovered.
type Selector struct {
	text     string
	matchers []*labels.Matcher
}

// String returns the selector as written.
func (s *Selector) String() string { return s.text }

// Matchers returns the selector's label matchers in the parser's order (a
// metric name written before the braces is __name__="..." after the
// others).
func (s *Selector) Matchers() []*labels.Matcher {
	return append([]*labels.Matcher(nil), s.matchers...)
}

// Matches reports whether a series with these labels is selected: every
// matcher holds, an absent label counting as the empty value (as in
// Prometheus).
func (s *Selector) Matches(ls model.LabelSet) bool {
	_, failed := s.FailedMatcher(ls)
	return !failed
}

// requires reports whether every series the selector selects has label:
// some matcher on it does not match the empty value.
func (s *Selector) requires(label string) bool {
	for _, m := range s.matchers {
		if m.Name == label && !m.Matches("") {
			return true
		}
	}
	return false
}

// FailedMatcher returns the first matcher a series with these labels does
// not satisfy, for explanations; ok is false when the selector matches.
func (s *Selector) FailedMatcher(ls model.LabelSet) (m *labels.Matcher, ok bool) {
	for _, m := range s.matchers {
		if !m.Matches(string(ls[model.LabelName(m.Name)])) {
			return m, true
		}
	}
	return nil, false
}

// ParseSelector parses a Prometheus series selector with Prometheus's
// parser (parser.ParseMetricSelector): what it accepts as the match[] of
// /api/v1/series, and nothing else. As Prometheus does, it rejects a
// selector all of whose matchers match the empty string, which would
// select every series.
func ParseSelector(text string) (*Selector, error) {
	ms, err := promql.ParseMetricSelector(text)
	if err != nil {
		var errs parser.ParseErrors
		if errors.As(err, &errs) && len(errs) > 0 {
			err = fmt.Errorf("%s (at character %d)", errs[0].Err, int(errs[0].PositionRange.Start)+1)
		}
		return nil, fmt.Errorf("%w %q: %w", ErrBadSelector, text, err)
	}
	for _, m := range ms {
		if !m.Matches("") {
			return &Selector{text: text, matchers: ms}, nil
		}
	}
	return nil, fmt.Errorf("%w %q: every matcher matches the empty string, so the selector would select every series (add one such as __name__=~\".+\")", ErrBadSelector, text)
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
	if model.LegacyValidation.IsValidLabelName(name) {
		return name
	}
	return strconv.Quote(name)
}
