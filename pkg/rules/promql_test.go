package rules

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	promlabels "github.com/prometheus/prometheus/model/labels"
)

// parseSelectorBody parses the inside of a selector's braces
// ("a=\"x\",b=~\"y\"") back into matchers with Prometheus's parser, so
// tests can prove that rendered values stay inside their string literals.
func parseSelectorBody(s string) ([]*promlabels.Matcher, error) {
	return promql.ParseMetricSelector("{" + s + "}")
}

// parseVectorSelector parses "series{matchers}" as rendered by the template
// "<<.Series>>{<<.LabelMatchers>>}": the series name, then the matchers in
// braces.
func parseVectorSelector(s string) (string, []*promlabels.Matcher, error) {
	ms, err := promql.ParseMetricSelector(s)
	if err != nil {
		return "", nil, err
	}
	var series string
	var out []*promlabels.Matcher
	for _, m := range ms {
		if m.Name == model.MetricNameLabel && m.Type == promlabels.MatchEqual && series == "" {
			series = m.Value
			continue
		}
		out = append(out, m)
	}
	if series == "" {
		return "", nil, fmt.Errorf("no series name in %q", s)
	}
	return series, out, nil
}

// mm is a matcher for tests' wants.
func mm(t promlabels.MatchType, name, value string) *promlabels.Matcher {
	return promlabels.MustNewMatcher(t, name, value)
}

// sameMatchers compares matchers by type, name and value (their compiled
// regular expressions are not compared).
var sameMatchers = cmp.Comparer(func(a, b *promlabels.Matcher) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Type == b.Type && a.Name == b.Name && a.Value == b.Value
})
