// Package tenancy confines PromQL queries to one namespace. It is what
// keeps a team's rules (rules served from a ConfigMap in the team's
// namespace) from reading another namespace's series: every query rendered
// from such a rule is parsed with Prometheus' own PromQL parser, and every
// series selector in it (the metric of the rule and any other metric the
// text names, on either side of `or`, `unless`, `on()`, in subqueries, with
// offsets or `@`) gets the namespace label's equality matcher. What cannot
// be confined to the namespace is refused with an error naming the
// selector: a matcher on the namespace label selecting another namespace,
// and a regular expression on it.
//
// The work is done on the parsed query, never on its text, so string
// literals, comments and label names that merely look like matchers change
// nothing. prom-label-proxy enforces tenants the same way (an Inspect over
// the parser's AST); its injectproxy package is not imported because it
// carries the proxy's HTTP routes and Alertmanager client, and because a
// rule here is refused where the proxy would replace a matcher.
package tenancy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// DefaultLabel is the namespace label of Kubernetes series.
const DefaultLabel = "namespace"

// ErrNotConfinable is wrapped by every error about a query that cannot be
// confined to the namespace (not by parse errors).
var ErrNotConfinable = errors.New("query cannot be confined to the namespace")

// promql is the parser: the standard functions, no experimental ones (the
// experimental info() function reads series its text does not name).
var promql = parser.NewParser(parser.Options{})

// Enforcer confines queries to one namespace. It is immutable and safe for
// concurrent use.
type Enforcer struct {
	label     string
	namespace string
}

// New returns an Enforcer adding label="namespace" to every selector.
func New(label, namespace string) (*Enforcer, error) {
	if !model.LegacyValidation.IsValidLabelName(label) || strings.HasPrefix(label, "__") {
		return nil, fmt.Errorf("tenancy: %q is not a namespace label name", label)
	}
	if namespace == "" {
		return nil, errors.New("tenancy: empty namespace")
	}
	return &Enforcer{label: label, namespace: namespace}, nil
}

// Label and Namespace return what the Enforcer enforces.
func (e *Enforcer) Label() string { return e.label }

// Namespace returns the namespace queries are confined to.
func (e *Enforcer) Namespace() string { return e.namespace }

// Confine parses query and returns it, formatted by the parser, with the
// namespace matcher on every series selector. It returns an error wrapping
// ErrNotConfinable for a selector that selects another namespace or uses a
// regular expression (or a negative matcher naming the namespace itself) on
// the namespace label, and the parser's error for a query that does not
// parse.
func (e *Enforcer) Confine(query string) (string, error) {
	expr, err := promql.ParseExpr(query)
	if err != nil {
		return "", fmt.Errorf("parsing query %q: %w", query, err)
	}
	if err := e.ConfineExpr(expr); err != nil {
		return "", fmt.Errorf("query %q: %w", query, err)
	}
	return expr.String(), nil
}

// ConfineExpr adds the namespace matcher to every series selector of expr
// in place. On error expr may be partly changed: do not use it.
func (e *Enforcer) ConfineExpr(expr parser.Expr) error {
	var errs []error
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			if err := e.confineSelector(vs); err != nil {
				errs = append(errs, err)
			}
		}
		return nil
	})
	return errors.Join(errs...)
}

// confineSelector checks the selector's matchers on the namespace label
// and adds the equality matcher when it has none.
func (e *Enforcer) confineSelector(vs *parser.VectorSelector) error {
	has := false
	for _, m := range vs.LabelMatchers {
		if m.Name != e.label {
			continue
		}
		switch m.Type {
		case labels.MatchEqual:
			if m.Value != e.namespace {
				return fmt.Errorf("%w: selector %s selects namespace %q, not %q", ErrNotConfinable, vs, m.Value, e.namespace)
			}
			has = true
		case labels.MatchNotEqual:
			if m.Value == e.namespace {
				return fmt.Errorf("%w: selector %s excludes namespace %q", ErrNotConfinable, vs, e.namespace)
			}
		case labels.MatchRegexp, labels.MatchNotRegexp:
			return fmt.Errorf("%w: selector %s has a regular expression on the namespace label %q", ErrNotConfinable, vs, e.label)
		}
	}
	if !has {
		m, err := labels.NewMatcher(labels.MatchEqual, e.label, e.namespace)
		if err != nil {
			return fmt.Errorf("building the namespace matcher: %w", err)
		}
		vs.LabelMatchers = append(vs.LabelMatchers, m)
	}
	return nil
}

// ConfineSelector is Confine for a series selector (a rule's seriesQuery,
// sent as match[]): it refuses anything but a plain selector (no offset,
// no @, no range), and returns the selector with the namespace matcher.
func (e *Enforcer) ConfineSelector(selector string) (string, error) {
	expr, err := promql.ParseExpr(selector)
	if err != nil {
		return "", fmt.Errorf("parsing series selector %q: %w", selector, err)
	}
	vs, ok := expr.(*parser.VectorSelector)
	if !ok || vs.OriginalOffset != 0 || vs.Timestamp != nil || vs.StartOrEnd != 0 {
		return "", fmt.Errorf("%q is not a series selector", selector)
	}
	if err := e.confineSelector(vs); err != nil {
		return "", err
	}
	return vs.String(), nil
}
