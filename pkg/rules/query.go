package rules

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	promlabels "github.com/prometheus/prometheus/model/labels"

	"github.com/promscaler/promscaler/pkg/config"
)

// ErrNoObjects is returned for a custom metrics query that names no objects
// and does not ask for all objects.
var ErrNoObjects = errors.New("no object names given")

// CustomRequest is what a custom metrics query is rendered for: one series
// of a rule, a resource, and the objects of that resource.
type CustomRequest struct {
	// Series is the Prometheus series name (not the API metric name). It
	// must be a classic metric name (ErrInvalidMetricName otherwise) or "".
	Series string
	// Resource is the normalised (plural) group-resource of the objects.
	Resource schema.GroupResource
	// Namespace of the objects; "" for cluster-scoped resources (and for
	// namespaces themselves). When set, the rule must map a label to
	// namespaces.
	Namespace string
	// Names are the object names. One name renders label="name", several
	// render label=~"a|b" (each name regex-escaped), in the given order.
	Names []string
	// AllObjects renders no matcher on the resource label: the query asks
	// for every object of the resource (in Namespace), so its length does
	// not grow with the number of objects; the caller keeps the samples of
	// the objects it wants by reading Query.ResourceLabel and must ignore
	// samples without that label (an empty name after "by (label)"). A
	// label!="" matcher would cost Prometheus a merge of the postings of
	// every value of the label in the TSDB; it is rendered only when no
	// other matcher requires a value (no namespace and no selector matcher
	// such as app="web"), so that .LabelMatchers is never empty. Names is
	// then ignored.
	AllObjects bool
	// MaxBytes, when positive, bounds the query naming the objects: when
	// it would be longer, the query is rendered as with AllObjects instead
	// (Query.AllObjects says so), so that its length does not grow with
	// the names.
	MaxBytes int
	// MetricSelector is the request's metric label selector; nil means
	// everything.
	MetricSelector labels.Selector
}

// ExternalRequest is what an external metrics query is rendered for.
type ExternalRequest struct {
	// Series is the Prometheus series name (not the API metric name). It
	// must be a classic metric name (ErrInvalidMetricName otherwise) or "".
	// It is ignored by externalQueries, which render .Series as the
	// configured metric name.
	Series string
	// Namespace of the request; applied as a matcher only when the rule is
	// namespaced.
	Namespace string
	// MetricSelector is the request's metric label selector; nil means
	// everything.
	MetricSelector labels.Selector
}

// Query is a rendered PromQL query and the labels needed to read its
// result.
type Query struct {
	// Expr is the PromQL expression.
	Expr string
	// ResourceLabel is the label carrying object names (custom and resource
	// metrics; "" for external metrics).
	ResourceLabel string
	// NamespaceLabel is the label the namespace matcher was applied to; ""
	// when the query has no namespace matcher.
	NamespaceLabel string
	// AllObjects reports that the query asks for every object of the
	// resource (CustomRequest.AllObjects, or MaxBytes exceeded): the
	// caller keeps the objects it wants.
	AllObjects bool
	// MaxSampleAge is the rule's maxSampleAge (0: the backend's): the
	// caller sends it with the query (promclient.WithMaxSampleAge).
	MaxSampleAge time.Duration
}

// allObjectsRegexp is .LabelValuesByName for the resource label of an
// AllObjects query, so that templates writing label=~"<<index ...>>" select
// every object.
const allObjectsRegexp = ".+"

// DefaultMaxNamesInQuery is the default largest number of object (pod,
// node...) names the metrics paths put into a query's name matcher. Above
// it they ask for every object of the resource in the namespace and keep
// the ones they want, so that a query stays a few hundred bytes whatever
// the number of objects.
const DefaultMaxNamesInQuery = 20

// renderInput is the matcher and grouping part of a query.
type renderInput struct {
	series     string
	matchers   []*promlabels.Matcher
	groupBy    []string
	window     string
	allObjects string // resource label of an AllObjects query, if any
}

func renderQuery(t *config.QueryTemplate, in renderInput) (string, error) {
	byName := make(map[string]string, len(in.matchers))
	for _, m := range in.matchers {
		byName[m.Name] = labelValuesFor(m)
	}
	if in.allObjects != "" {
		byName[in.allObjects] = allObjectsRegexp
	}
	groupBy := in.groupBy
	if groupBy == nil {
		groupBy = []string{}
	}
	data := config.QueryTemplateData{
		Series:            in.series,
		LabelMatchers:     JoinMatchers(in.matchers),
		LabelValuesByName: byName,
		GroupBy:           strings.Join(groupBy, ","),
		GroupBySlice:      groupBy,
		Window:            in.window,
	}
	return t.Execute(&data)
}

// labelValuesFor is a matcher's .LabelValuesByName entry, as
// prometheus-adapter renders it: the requested values joined with "|",
// not regex-escaped (so that label="<<index .LabelValuesByName "l">>"
// matches a value such as "api.v2"), only escaped for use between double
// quotes. The =~ and !~ matchers of this package are always OneOf lists
// (object names, "in" and "notin" values), whose values joinedValues
// recovers exactly.
func labelValuesFor(m *promlabels.Matcher) string {
	switch m.Type {
	case promlabels.MatchRegexp, promlabels.MatchNotRegexp:
		return quoteInner(joinedValues(m.Value))
	default:
		return quoteInner(m.Value)
	}
}

// joinedValues inverts OneOf: given OneOf(values) it returns the values
// joined with "|", unescaped (OneOf([]string{"a.b", "c"}) is `a\.b|c`,
// joinedValues of it is "a.b|c").
func joinedValues(oneOf string) string {
	if !strings.Contains(oneOf, `\`) {
		return oneOf
	}
	b := make([]byte, 0, len(oneOf))
	for i := 0; i < len(oneOf); i++ {
		if oneOf[i] == '\\' && i+1 < len(oneOf) {
			i++
		}
		b = append(b, oneOf[i])
	}
	return string(b)
}

// objectMatchers builds the metric-selector matchers, then the namespace
// matcher, then the resource matcher, in prometheus-adapter's order.
func objectMatchers(res *ResourceMapper, sel labels.Selector, gr schema.GroupResource, namespace string, names []string, all bool) (ms []*promlabels.Matcher, resLabel, nsLabel string, err error) {
	ms, err = SelectorMatchers(sel)
	if err != nil {
		return nil, "", "", err
	}
	if namespace != "" {
		nsLabel, err = res.LabelForResource(NamespaceResource)
		if err != nil {
			return nil, "", "", fmt.Errorf("namespace matcher: %w", err)
		}
		if !utf8.ValidString(namespace) {
			return nil, "", "", fmt.Errorf("namespace matcher: %w: namespace %q is not valid UTF-8", ErrInvalidLabelValue, namespace)
		}
		m, err := newMatcher(promlabels.MatchEqual, nsLabel, namespace)
		if err != nil {
			return nil, "", "", err
		}
		ms = append(ms, m)
	}
	resLabel, err = res.LabelForResource(gr)
	if err != nil {
		return nil, "", "", err
	}
	switch {
	case all:
		// No matcher on the resource label: label!="" makes Prometheus
		// merge the postings of every value of the label in the whole TSDB
		// before intersecting them with the other matchers. It is kept
		// only when no other matcher requires a value (cluster-scoped
		// resource or all namespaces, no selector): a selector must keep
		// one such matcher, and {<<.LabelMatchers>>,x="y"} must not start
		// with a comma.
		if !anyRequiresValue(ms) {
			m, err := newMatcher(promlabels.MatchNotEqual, resLabel, "")
			if err != nil {
				return nil, "", "", err
			}
			ms = append(ms, m)
		}
	case len(names) == 0:
		return nil, "", "", fmt.Errorf("%w for %s", ErrNoObjects, gr.String())
	default:
		if err := checkLabelValues(resLabel, names); err != nil {
			return nil, "", "", err
		}
		m, err := namesMatcher(resLabel, names)
		if err != nil {
			return nil, "", "", err
		}
		ms = append(ms, m)
	}
	return ms, resLabel, nsLabel, nil
}

// namesMatcher selects the objects named: label="name", or
// label=~"a|b" (regex-escaped).
func namesMatcher(label string, names []string) (*promlabels.Matcher, error) {
	if len(names) == 1 {
		return newMatcher(promlabels.MatchEqual, label, names[0])
	}
	return newMatcher(promlabels.MatchRegexp, label, OneOf(names))
}

// anyRequiresValue reports whether one of ms does not match the empty
// string, i.e. selects only series carrying its label (Prometheus refuses a
// selector without such a matcher).
func anyRequiresValue(ms []*promlabels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches("") {
			return true
		}
	}
	return false
}

// externalMatchers builds the metric-selector matchers then, when
// nsLabel != "" and namespace != "", the namespace matcher.
func externalMatchers(sel labels.Selector, nsLabel, namespace string) ([]*promlabels.Matcher, string, error) {
	ms, err := SelectorMatchers(sel)
	if err != nil {
		return nil, "", err
	}
	if nsLabel == "" || namespace == "" {
		return ms, "", nil
	}
	if !utf8.ValidString(namespace) {
		return nil, "", fmt.Errorf("namespace matcher: %w: namespace %q is not valid UTF-8", ErrInvalidLabelValue, namespace)
	}
	m, err := newMatcher(promlabels.MatchEqual, nsLabel, namespace)
	if err != nil {
		return nil, "", err
	}
	return append(ms, m), nsLabel, nil
}
