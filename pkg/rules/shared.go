package rules

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	promlabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A shared evaluation answers many custom metrics requests of one rule
// from one query: the rule's metricsQuery rendered for every object of the
// resource in every namespace, grouped by the namespace and resource
// labels (SharedQuery), then sliced per request by those two labels. The
// rewrite is made only where it is provably equivalent to the per-request
// query; SharedEquivalent decides it from the parsed PromQL of both.
//
// The argument, on the shared query's tree: call a vector expression
// partitioned when each of its output series carries the namespace and
// resource labels of the input series it was computed from, and its
// output restricted to one (namespace, object) pair equals its value over
// the input restricted to that pair. Then:
//
//   - a selector is partitioned (a series lacking a label forms the pair
//     with an empty value, which no request asks for);
//   - an element-wise function of a partitioned vector (rate, clamp, abs,
//     histogram_quantile, the *_over_time functions, label_replace not
//     writing either label...) and a subquery of one are partitioned;
//   - an aggregation grouping by both labels (or without neither) is;
//   - a binary operation of a partitioned vector and a scalar is, and of
//     two partitioned vectors matching on both labels (on() naming both,
//     ignoring() naming neither, or the default, every label);
//   - a subtree reading no series (literals, time(), vector(1)) is
//     constant: the same in both queries.
//
// Everything else (absent, scalar, sort, an aggregation or a match that
// drops a label, a selector the request's matchers are not applied to) is
// not shown partitioned, and the rule keeps the per-request query.
//
// Both queries are rendered from the same template, so SharedEquivalent
// also checks that they differ only where the rendering differs: each
// selector of the per-request query carries namespace="<ns>" and
// resource="<name>" (or =~) where the shared one carries none, or
// resource!="" / =~".+"; each grouping and on() list of the shared query is
// the per-request one plus the namespace label. The per-request query's
// restriction of a partitioned expression to one pair is then the shared
// one's slice for that pair.

// The probe values rendered into the per-request query compared by
// SharedEquivalent: no regular expression escapes them.
const (
	probeNamespace = "promscaler-probe-namespace"
	probeObject    = "promscaler-probe-object"
)

// ErrNotShareable is wrapped by every reason a rule's queries cannot be
// answered from a shared evaluation.
var ErrNotShareable = errors.New("not shareable")

// SharedLabels names the labels a shared evaluation is grouped by.
type SharedLabels struct {
	Namespace, Resource string
}

// SharedEquivalent reports (nil) whether the shared query, sliced by the
// namespace and resource labels, answers what the per-request query
// answers for any namespace and set of objects, or why it is not shown to:
// an error wrapping ErrNotShareable (or a parse error). perRequest is the
// query rendered for namespace probeNamespace and the one object
// probeObject; see the comment above for the argument.
func SharedEquivalent(perRequest, shared string, l SharedLabels) error {
	if l.Namespace == "" || l.Resource == "" || l.Namespace == l.Resource {
		return fmt.Errorf("%w: the namespace and resource labels must be two labels (have %q and %q)", ErrNotShareable, l.Namespace, l.Resource)
	}
	r, err := promql.ParseExpr(perRequest)
	if err != nil {
		return fmt.Errorf("parsing the per-request query: %w", promqlError(err))
	}
	s, err := promql.ParseExpr(shared)
	if err != nil {
		return fmt.Errorf("parsing the shared query: %w", promqlError(err))
	}
	c := comparer{l: l}
	kind, err := c.node(r, s)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotShareable, err)
	}
	if kind != partitioned {
		return fmt.Errorf("%w: the query reads no series restricted to the request's objects", ErrNotShareable)
	}
	if s.Type() != parser.ValueTypeVector {
		return fmt.Errorf("%w: the query is a %s, not an instant vector", ErrNotShareable, s.Type())
	}
	return nil
}

// promql parses rendered queries as config.CheckPromQL does.
var promql = parser.NewParser(parser.Options{
	EnableExperimentalFunctions: true,
	EnableBinopFillModifiers:    true,
	EnableUnquotedUTF8Names:     true,
})

// promqlError keeps the first line of a parse error.
func promqlError(err error) error {
	if err == nil {
		return nil
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return errors.New(msg)
}

// shape is what the comparison learnt of a subtree.
type shape int

const (
	constant    shape = iota // reads no series
	partitioned              // see the package comment above
)

type comparer struct{ l SharedLabels }

// node compares the per-request subtree r with the shared subtree s.
func (c comparer) node(r, s parser.Node) (shape, error) {
	switch s := s.(type) {
	case *parser.VectorSelector:
		rv, ok := r.(*parser.VectorSelector)
		if !ok {
			return 0, errDiffer(r, s)
		}
		return partitioned, c.selector(rv, s)
	case *parser.MatrixSelector:
		rm, ok := r.(*parser.MatrixSelector)
		if !ok || rm.Range != s.Range || !sameString(rm.RangeExpr, s.RangeExpr) {
			return 0, errDiffer(r, s)
		}
		return c.node(rm.VectorSelector, s.VectorSelector)
	case *parser.NumberLiteral, *parser.StringLiteral:
		if r.String() != s.String() {
			return 0, errDiffer(r, s)
		}
		return constant, nil
	case *parser.ParenExpr:
		rp, ok := r.(*parser.ParenExpr)
		if !ok {
			return 0, errDiffer(r, s)
		}
		return c.node(rp.Expr, s.Expr)
	case *parser.UnaryExpr:
		ru, ok := r.(*parser.UnaryExpr)
		if !ok || ru.Op != s.Op {
			return 0, errDiffer(r, s)
		}
		return c.node(ru.Expr, s.Expr)
	case *parser.StepInvariantExpr:
		rs, ok := r.(*parser.StepInvariantExpr)
		if !ok {
			return 0, errDiffer(r, s)
		}
		return c.node(rs.Expr, s.Expr)
	case *parser.SubqueryExpr:
		return c.subquery(r, s)
	case *parser.Call:
		return c.call(r, s)
	case *parser.AggregateExpr:
		return c.aggregate(r, s)
	case *parser.BinaryExpr:
		return c.binary(r, s)
	default:
		return 0, fmt.Errorf("%T is not known to keep objects apart", s)
	}
}

// errDiffer says that the two renderings differ beyond the matchers and
// groupings.
func errDiffer(r, s parser.Node) error {
	return fmt.Errorf("the shared rendering %q does not correspond to the per-request %q (the template uses the request's values beyond .LabelMatchers and .GroupBy)", s.String(), r.String())
}

// sameString compares two optional nodes by their PromQL text.
func sameString[T interface {
	comparable
	String() string
}](a, b T) bool {
	var zero T
	if a == zero || b == zero {
		return a == b
	}
	return a.String() == b.String()
}

func (c comparer) subquery(r parser.Node, s *parser.SubqueryExpr) (shape, error) {
	rs, ok := r.(*parser.SubqueryExpr)
	if !ok || rs.Range != s.Range || rs.Step != s.Step || rs.OriginalOffset != s.OriginalOffset ||
		!sameTimestamp(rs.Timestamp, s.Timestamp) || rs.StartOrEnd != s.StartOrEnd ||
		!sameString(rs.RangeExpr, s.RangeExpr) || !sameString(rs.StepExpr, s.StepExpr) || !sameString(rs.OriginalOffsetExpr, s.OriginalOffsetExpr) {
		return 0, errDiffer(r, s)
	}
	return c.node(rs.Expr, s.Expr)
}

func sameTimestamp(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// selector checks that the per-request selector is the shared one plus the
// request's namespace and object matchers.
func (c comparer) selector(r, s *parser.VectorSelector) error {
	if r.Name != s.Name || r.OriginalOffset != s.OriginalOffset || !sameTimestamp(r.Timestamp, s.Timestamp) ||
		r.StartOrEnd != s.StartOrEnd || !sameString(r.OriginalOffsetExpr, s.OriginalOffsetExpr) ||
		r.Anchored != s.Anchored || r.Smoothed != s.Smoothed {
		return errDiffer(r, s)
	}
	var rest []string
	var ns, obj bool
	for _, m := range r.LabelMatchers {
		switch {
		case m.Name == c.l.Namespace && m.Type == promlabels.MatchEqual && m.Value == probeNamespace:
			ns = true
		case m.Name == c.l.Resource && (m.Type == promlabels.MatchEqual || m.Type == promlabels.MatchRegexp) && m.Value == probeObject:
			obj = true
		default:
			rest = append(rest, m.String())
		}
	}
	if !ns || !obj {
		return fmt.Errorf("selector %s is not restricted to the request's namespace and objects (the template does not put .LabelMatchers in it)", s.String())
	}
	var shared []string
	for _, m := range s.LabelMatchers {
		if m.Name == c.l.Resource && (m.Type == promlabels.MatchNotEqual && m.Value == "" || m.Type == promlabels.MatchRegexp && m.Value == ".+") {
			continue
		}
		shared = append(shared, m.String())
	}
	slices.Sort(rest)
	slices.Sort(shared)
	if !slices.Equal(rest, shared) {
		return errDiffer(r, s)
	}
	return nil
}

// elementWise are the functions whose every output series is computed from
// one input series and keeps its labels (but __name__). label_replace and
// label_join are checked apart (they must not write either label).
var elementWise = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`abs acos acosh asin asinh atan atanh avg_over_time ceil changes clamp clamp_max
		clamp_min cos cosh count_over_time days_in_month day_of_month day_of_week day_of_year deg delta deriv exp
		first_over_time floor histogram_avg histogram_count histogram_sum histogram_stddev histogram_stdvar
		histogram_fraction histogram_quantile double_exponential_smoothing hour idelta increase integral irate
		last_over_time ln log2 log10 mad_over_time max_over_time min_over_time ts_of_first_over_time ts_of_max_over_time
		ts_of_min_over_time ts_of_last_over_time minute month predict_linear present_over_time quantile_over_time rad
		rate resets round sgn sin sinh sqrt stddev_over_time stdvar_over_time sum_over_time tan tanh timestamp year
		label_replace label_join`) {
		elementWise[f] = true
	}
}

func (c comparer) call(r parser.Node, s *parser.Call) (shape, error) {
	rc, ok := r.(*parser.Call)
	if !ok || rc.Func.Name != s.Func.Name || len(rc.Args) != len(s.Args) {
		return 0, errDiffer(r, s)
	}
	kinds := make([]shape, len(s.Args))
	for i := range s.Args {
		k, err := c.node(rc.Args[i], s.Args[i])
		if err != nil {
			return 0, err
		}
		kinds[i] = k
	}
	if !slices.Contains(kinds, partitioned) {
		return constant, nil
	}
	if !elementWise[s.Func.Name] {
		return 0, fmt.Errorf("%s() is not known to compute each object's value from its own series alone", s.Func.Name)
	}
	for i, a := range s.Args {
		t := a.Type()
		if kinds[i] == partitioned && t != parser.ValueTypeVector && t != parser.ValueTypeMatrix {
			return 0, fmt.Errorf("argument %d of %s() reads series but is a %s", i+1, s.Func.Name, t)
		}
	}
	if s.Func.Name == "label_replace" || s.Func.Name == "label_join" {
		if dst, ok := unparen(s.Args[1]).(*parser.StringLiteral); !ok || dst.Val == c.l.Namespace || dst.Val == c.l.Resource {
			return 0, fmt.Errorf("%s() writes label %s, which identifies the objects", s.Func.Name, s.Args[1])
		}
	}
	return partitioned, nil
}

func unparen(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

func (c comparer) aggregate(r parser.Node, s *parser.AggregateExpr) (shape, error) {
	ra, ok := r.(*parser.AggregateExpr)
	if !ok || ra.Op != s.Op || ra.Without != s.Without || (ra.Param == nil) != (s.Param == nil) {
		return 0, errDiffer(r, s)
	}
	if s.Param != nil {
		k, err := c.node(ra.Param, s.Param)
		if err != nil {
			return 0, err
		}
		if k != constant {
			return 0, fmt.Errorf("the parameter of %s reads series", s.Op)
		}
	}
	k, err := c.node(ra.Expr, s.Expr)
	if err != nil || k == constant {
		return k, err
	}
	if s.Op == parser.COUNT_VALUES {
		if l, ok := unparen(s.Param).(*parser.StringLiteral); !ok || l.Val == c.l.Namespace || l.Val == c.l.Resource {
			return 0, fmt.Errorf("count_values writes label %s, which identifies the objects", s.Param)
		}
	}
	if err := c.labelList(ra.Grouping, s.Grouping, !s.Without); err != nil {
		return 0, fmt.Errorf("%s %s: %w", s.Op, groupingWord(s.Without), err)
	}
	return partitioned, nil
}

func groupingWord(without bool) string {
	if without {
		return "without"
	}
	return "by"
}

// labelList checks a grouping or matching list: with keep (by, on), the
// shared list must be the per-request one plus the namespace label and
// hold both labels; else (without, ignoring) the lists must be equal and
// hold neither.
func (c comparer) labelList(r, s []string, keep bool) error {
	rs, ss := setOf(r), setOf(s)
	if !keep {
		if !slices.Equal(rs, ss) {
			return fmt.Errorf("(%s) differs from the per-request (%s)", strings.Join(s, ", "), strings.Join(r, ", "))
		}
		if slices.Contains(ss, c.l.Namespace) || slices.Contains(ss, c.l.Resource) {
			return fmt.Errorf("(%s) drops a label that identifies the objects", strings.Join(s, ", "))
		}
		return nil
	}
	if !slices.Contains(ss, c.l.Namespace) || !slices.Contains(ss, c.l.Resource) {
		return fmt.Errorf("(%s) does not keep both %s and %s (use <<.GroupBy>>)", strings.Join(s, ", "), c.l.Namespace, c.l.Resource)
	}
	if !slices.Equal(setOf(append(r, c.l.Namespace)), ss) {
		return fmt.Errorf("(%s) differs from the per-request (%s) beyond %s", strings.Join(s, ", "), strings.Join(r, ", "), c.l.Namespace)
	}
	return nil
}

func setOf(ls []string) []string {
	out := slices.Clone(ls)
	slices.Sort(out)
	return slices.Compact(out)
}

func (c comparer) binary(r parser.Node, s *parser.BinaryExpr) (shape, error) {
	rb, ok := r.(*parser.BinaryExpr)
	if !ok || rb.Op != s.Op || rb.ReturnBool != s.ReturnBool || (rb.VectorMatching == nil) != (s.VectorMatching == nil) {
		return 0, errDiffer(r, s)
	}
	lk, err := c.node(rb.LHS, s.LHS)
	if err != nil {
		return 0, err
	}
	rk, err := c.node(rb.RHS, s.RHS)
	if err != nil {
		return 0, err
	}
	switch {
	case lk == constant && rk == constant:
		return constant, nil
	case lk == constant && s.LHS.Type() == parser.ValueTypeScalar, rk == constant && s.RHS.Type() == parser.ValueTypeScalar:
		return partitioned, nil
	case lk == constant || rk == constant:
		return 0, fmt.Errorf("an operand of %s is a vector without the labels identifying the objects", s.Op)
	}
	rm, sm := rb.VectorMatching, s.VectorMatching
	if sm == nil {
		return 0, fmt.Errorf("%s of two vectors without a matching", s.Op)
	}
	if rm.Card != sm.Card || rm.On != sm.On || !slices.Equal(setOf(rm.Include), setOf(sm.Include)) || !sameFill(rm.FillValues, sm.FillValues) {
		return 0, errDiffer(r, s)
	}
	if !sm.On && len(sm.MatchingLabels) == 0 {
		return partitioned, nil // every label
	}
	if err := c.labelList(rm.MatchingLabels, sm.MatchingLabels, sm.On); err != nil {
		word := "ignoring"
		if sm.On {
			word = "on"
		}
		return 0, fmt.Errorf("%s %s: %w", s.Op, word, err)
	}
	return partitioned, nil
}

func sameFill(a, b parser.VectorMatchFillValues) bool {
	return sameFloat(a.LHS, b.LHS) && sameFloat(a.RHS, b.RHS)
}

func sameFloat(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b || *a != *a && *b != *b
}

// SharedRequest is what a shared evaluation is rendered for: one series of
// a rule, a namespaced resource, and the metric selector of the requests
// it answers (every namespace, every object).
type SharedRequest struct {
	// Series is the Prometheus series name, as in CustomRequest.
	Series string
	// Resource is the normalised (plural) group-resource of the objects;
	// it must be namespaced (a cluster-scoped resource's query already
	// covers every object).
	Resource schema.GroupResource
	// MetricSelector is the requests' metric label selector; nil means
	// everything.
	MetricSelector labels.Selector
}

// SharedQuery renders the rule's metricsQuery for every object of
// req.Resource in every namespace: no namespace matcher, no resource
// matcher (or resource!="" when no other matcher requires a value, as with
// CustomRequest.AllObjects), and .GroupBy the namespace label then the
// resource label. The answer is read by Query.NamespaceLabel and
// Query.ResourceLabel. It returns an error wrapping ErrNotShareable when
// the rule's requests cannot be answered from it (see SharedEquivalent and
// Sharing); call Sharing once per rule, series, resource and selector, and
// SharedQuery only for those it accepts.
func (r *Rule) SharedQuery(req SharedRequest) (Query, error) {
	if r.tenant != nil {
		return Query{}, fmt.Errorf("%s: %w: a team rule is confined to namespace %s", r.path, ErrNotShareable, r.tenant.Namespace())
	}
	if err := r.checkRequest(KindCustom, req.Series, "", "SharedQuery called on an external rule"); err != nil {
		return Query{}, err
	}
	nsLabel, err := r.resources.LabelForResource(NamespaceResource)
	if err != nil {
		return Query{}, fmt.Errorf("%s: %w: no label maps to namespaces: %w", r.path, ErrNotShareable, err)
	}
	ms, resLabel, _, err := objectMatchers(r.resources, req.MetricSelector, req.Resource, "", nil, true)
	if err != nil {
		return Query{}, fmt.Errorf("%s: %w", r.path, err)
	}
	if resLabel == nsLabel {
		return Query{}, fmt.Errorf("%s: %w: %s is read from the namespace label", r.path, ErrNotShareable, req.Resource)
	}
	expr, err := r.render(renderInput{series: req.Series, matchers: ms, groupBy: []string{nsLabel, resLabel}, allObjects: resLabel})
	if err != nil {
		return Query{}, err
	}
	return Query{Expr: expr, ResourceLabel: resLabel, NamespaceLabel: nsLabel, AllObjects: true, MaxSampleAge: r.maxSampleAge}, nil
}

// Sharing reports whether the rule's requests for req's series, resource
// and selector can be answered from SharedQuery (nil), or why not (an error
// wrapping ErrNotShareable, or a rendering error): it renders the
// per-request query for a probe namespace and object and the shared query,
// and decides with SharedEquivalent.
func (r *Rule) Sharing(req SharedRequest) error {
	s, err := r.SharedQuery(req)
	if err != nil {
		return err
	}
	p, err := r.queryForSeries(CustomRequest{Series: req.Series, Resource: req.Resource, Namespace: probeNamespace,
		Names: []string{probeObject}, MetricSelector: req.MetricSelector})
	if err != nil {
		return err
	}
	if err := SharedEquivalent(p.Expr, s.Expr, SharedLabels{Namespace: s.NamespaceLabel, Resource: s.ResourceLabel}); err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	return nil
}
