package promtest

import (
	"fmt"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// SetSamples makes /api/v1/query answer from samples (nil restores the
// series-based answers): the query's first series selector, inside any
// function or aggregation (sum(rate(x{...}[5m])) by (l)), picks the samples
// its matchers match (Prometheus's parser and matchers; a matcher on one
// of the ignored labels is not applied, as a query not selecting on it);
// each is answered with its value and time, labelled with the outermost
// aggregation's by (...) labels (all its labels but __name__ without one).
// Samples are not added up: two samples of one group are both answered,
// as a hand-written query may return them.
func (s *Server) SetSamples(samples model.Vector, ignored ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples, s.ignored = samples, ignored
}

// evalSamples answers query from samples, as SetSamples says.
func evalSamples(samples model.Vector, ignored []string, query string) (model.Vector, error) {
	expr, err := promql.ParseExpr(query)
	if err != nil {
		return nil, err
	}
	var (
		sel      *parser.VectorSelector
		grouping []string
		grouped  bool
		seenAgg  bool
	)
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.AggregateExpr:
			if !seenAgg {
				seenAgg, grouping, grouped = true, n.Grouping, !n.Without
			}
		case *parser.VectorSelector:
			if sel == nil {
				sel = n
			}
		}
		return nil
	})
	if sel == nil {
		return nil, fmt.Errorf("promtest: no series selector in %q", query)
	}
	out := model.Vector{}
	for _, smp := range samples {
		if !matchAll(sel.LabelMatchers, smp.Metric, ignored) {
			continue
		}
		m := model.Metric{}
		for n, v := range smp.Metric {
			if grouped && slices.Contains(grouping, string(n)) || !grouped && n != model.MetricNameLabel {
				m[n] = v
			}
		}
		out = append(out, &model.Sample{Metric: m, Value: smp.Value, Timestamp: smp.Timestamp})
	}
	return out, nil
}

// matchAll reports whether every matcher but those on ignored labels
// matches m (an absent label counting as the empty value).
func matchAll(ms []*labels.Matcher, m model.Metric, ignored []string) bool {
	for _, lm := range ms {
		if !slices.Contains(ignored, lm.Name) && !lm.Matches(string(m[model.LabelName(lm.Name)])) {
			return false
		}
	}
	return true
}
