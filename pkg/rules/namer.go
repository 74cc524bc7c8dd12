package rules

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/pkg/config"
)

// ErrSeriesNameMismatch is returned by MetricNameForSeries when the series
// name does not match name.matches.
var ErrSeriesNameMismatch = errors.New("series name does not match name.matches")

// Series is one discovered Prometheus series: its name and labels.
type Series struct {
	Name   string
	Labels model.LabelSet
}

// SeriesFromLabelSet builds a Series from one entry of a Prometheus
// /api/v1/series answer (the name is the __name__ label).
func SeriesFromLabelSet(ls model.LabelSet) Series {
	return Series{Name: string(ls[model.MetricNameLabel]), Labels: ls}
}

// seriesFilter keeps (Is) or drops (IsNot) series names matching re.
type seriesFilter struct {
	path string // "seriesFilters[1].isNot", "name.matches"
	re   *regexp.Regexp
	keep bool
}

func (f seriesFilter) passes(name string) bool { return f.re.MatchString(name) == f.keep }

func compileFilter(path string, f config.RegexFilter) (seriesFilter, error) {
	switch {
	case f.Is != "" && f.IsNot != "":
		return seriesFilter{}, fmt.Errorf("%s: set only one of is and isNot", path)
	case f.Is != "":
		re, err := regexp.Compile(f.Is)
		if err != nil {
			return seriesFilter{}, fmt.Errorf("%s.is: %w", path, err)
		}
		return seriesFilter{path: path + ".is", re: re, keep: true}, nil
	case f.IsNot != "":
		re, err := regexp.Compile(f.IsNot)
		if err != nil {
			return seriesFilter{}, fmt.Errorf("%s.isNot: %w", path, err)
		}
		return seriesFilter{path: path + ".isNot", re: re, keep: false}, nil
	default:
		return seriesFilter{}, fmt.Errorf("%s: set one of is and isNot", path)
	}
}

// metricNamer is a rule's series filters and name mapping.
type metricNamer struct {
	filters []seriesFilter // seriesFilters in order, then name.matches
	nameRe  *regexp.Regexp
	nameAs  string
}

func compileNamer(filters []config.RegexFilter, name config.NameMapping) (*metricNamer, error) {
	var errs []error
	n := &metricNamer{}
	for i, f := range filters {
		sf, err := compileFilter(fmt.Sprintf("seriesFilters[%d]", i), f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n.filters = append(n.filters, sf)
	}
	matches := name.Matches
	if matches == "" {
		matches = ".*"
	}
	re, err := regexp.Compile(matches)
	if err != nil {
		errs = append(errs, fmt.Errorf("name.matches: %w", err))
		return nil, errors.Join(errs...)
	}
	n.nameRe = re
	if name.Matches != "" {
		// prometheus-adapter also drops series whose name does not match.
		n.filters = append(n.filters, seriesFilter{path: "name.matches", re: re, keep: true})
	}
	n.nameAs = name.As
	if n.nameAs == "" {
		switch re.NumSubexp() {
		case 0:
			n.nameAs = "$0"
		case 1:
			n.nameAs = "$1"
		default:
			errs = append(errs, fmt.Errorf("name.as: must be set when name.matches %q has %d capture groups", name.Matches, re.NumSubexp()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return n, nil
}

// dropReason returns "" when the series name passes every filter, else why
// it is dropped.
func (n *metricNamer) dropReason(name string) string {
	if !model.LegacyValidation.IsValidMetricName(name) {
		return fmt.Sprintf("the series name %q is not a classic Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), so no query could use it", name)
	}
	for _, f := range n.filters {
		if f.passes(name) {
			continue
		}
		if f.keep {
			return fmt.Sprintf("%s %q does not match it", f.path, f.re.String())
		}
		return fmt.Sprintf("%s %q matches it", f.path, f.re.String())
	}
	return ""
}

func (n *metricNamer) keeps(name string) bool {
	if !model.LegacyValidation.IsValidMetricName(name) {
		return false
	}
	for _, f := range n.filters {
		if !f.passes(name) {
			return false
		}
	}
	return true
}

func (n *metricNamer) metricName(seriesName string) (string, error) {
	idx := n.nameRe.FindStringSubmatchIndex(seriesName)
	if idx == nil {
		return "", fmt.Errorf("%w: series %q, name.matches %q", ErrSeriesNameMismatch, seriesName, n.nameRe.String())
	}
	return string(n.nameRe.ExpandString(nil, n.nameAs, seriesName, idx)), nil
}
