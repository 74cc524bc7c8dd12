package rules

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/tenancy"
)

// Kind says which API a discovery rule serves.
type Kind int

// The kinds of discovery rules.
const (
	// KindCustom rules come from config.Config.Rules and serve
	// custom.metrics.k8s.io.
	KindCustom Kind = iota
	// KindExternal rules come from config.Config.ExternalRules and serve
	// external.metrics.k8s.io.
	KindExternal
)

// API group names served by the rule kinds.
const (
	CustomMetricsAPI   = "custom.metrics.k8s.io"
	ExternalMetricsAPI = "external.metrics.k8s.io"
)

// String returns "custom" or "external".
func (k Kind) String() string {
	switch k {
	case KindCustom:
		return "custom"
	case KindExternal:
		return "external"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// API returns the API group the kind serves, e.g. "custom.metrics.k8s.io".
func (k Kind) API() string {
	if k == KindExternal {
		return ExternalMetricsAPI
	}
	return CustomMetricsAPI
}

// Rule is one compiled discovery rule (an entry of rules or externalRules):
// its series query, filters, metric naming, label <-> resource mapping and
// query template. A Rule is immutable (apart from ResourceMapper's memo)
// and safe for concurrent use.
type Rule struct {
	file         string // configuration file, "" when built in code
	path         string
	index        int
	order        int
	kind         Kind
	seriesQuery  string
	namer        *metricNamer
	resources    *ResourceMapper
	query        *config.QueryTemplate
	namespaced   bool // external rules: apply the namespace matcher
	defaultValue *string
	nanAsZero    bool
	maxSampleAge time.Duration
	tenant       *tenancy.Enforcer // team rules only (RuleSet.ConfineTo)
	backend      string
}

// Path returns the rule's place in the configuration, e.g. "rules[3]" or
// "externalRules[0]"; use it in logs and errors.
func (r *Rule) Path() string { return r.path }

// File returns the configuration file the rule comes from ("" for a
// configuration built in code).
func (r *Rule) File() string { return r.file }

// Index returns the rule's index in its list (rules or externalRules) in
// its file.
func (r *Rule) Index() int { return r.index }

// Order returns the rule's place among the rules of its kind in the whole
// configuration (every file, in order): of two rules producing the same
// metric, the one with the larger Order is served.
func (r *Rule) Order() int { return r.order }

// Kind returns whether the rule is a custom or an external metrics rule.
func (r *Rule) Kind() Kind { return r.kind }

// SeriesQuery returns the Prometheus series selector used for discovery.
func (r *Rule) SeriesQuery() string { return r.seriesQuery }

// MetricsQuery returns the metricsQuery template text
// (config.DefaultMetricsQuery when the rule has none).
func (r *Rule) MetricsQuery() string { return r.query.Text() }

// Namespaced reports, for an external rule, whether a request's namespace
// is applied as a matcher (resources.namespaced, default true). Custom
// rules always apply the namespace of namespaced objects.
func (r *Rule) Namespaced() bool { return r.namespaced }

// DefaultValue returns the rule's defaultValue (a promscaler addition), if
// set, as written in the configuration.
func (r *Rule) DefaultValue() (string, bool) {
	if r.defaultValue == nil {
		return "", false
	}
	return *r.defaultValue, true
}

// NaNAsZero reports whether a NaN sample of the rule is answered as 0
// (nanAsZero of the rule, else of the configuration, default true).
func (r *Rule) NaNAsZero() bool { return r.nanAsZero }

// MaxSampleAge returns the rule's maxSampleAge; 0 means the backend's.
func (r *Rule) MaxSampleAge() time.Duration { return r.maxSampleAge }

// Backend returns the name of the backend the rule discovers its series in
// and queries (config.DefaultBackend when the rule names none).
func (r *Rule) Backend() string { return r.backend }

// Resources returns the rule's label <-> resource mapper.
func (r *Rule) Resources() *ResourceMapper { return r.resources }

// KeepSeries reports whether a series name passes the rule's seriesFilters
// (all, in order) and name.matches. A name that is not a classic metric
// name is never kept: no query could use it safely.
func (r *Rule) KeepSeries(seriesName string) bool { return r.namer.keeps(seriesName) }

// DropReason returns "" when the series name is kept, else which filter
// drops it, e.g. `seriesFilters[1].isNot "_total$" matches it`.
func (r *Rule) DropReason(seriesName string) string { return r.namer.dropReason(seriesName) }

// MetricNameForSeries returns the API metric name of a series:
// name.matches applied to the series name and expanded with name.as
// (regexp.Regexp.ExpandString). It returns ErrSeriesNameMismatch when the
// series name does not match.
func (r *Rule) MetricNameForSeries(seriesName string) (string, error) {
	return r.namer.metricName(seriesName)
}

// ResourcesForSeries returns the group-resources the series' labels map to
// and whether the series is namespaced; see ResourceMapper.ResourcesForSeries.
func (r *Rule) ResourcesForSeries(lbls model.LabelSet) ([]schema.GroupResource, bool) {
	return r.resources.ResourcesForSeries(lbls)
}

// LabelForResource returns the label carrying names of objects of gr; see
// ResourceMapper.LabelForResource.
func (r *Rule) LabelForResource(gr schema.GroupResource) (string, error) {
	return r.resources.LabelForResource(gr)
}

// QueryForSeries renders the metricsQuery of a custom rule for req. The
// .LabelMatchers are: the metric selector's matchers (sorted by label),
// then namespace="<ns>" when req.Namespace is set, then the resource
// matcher; .GroupBy is the resource's label. When the query naming the
// objects is longer than req.MaxBytes, it is rendered for all objects.
func (r *Rule) QueryForSeries(req CustomRequest) (Query, error) {
	if err := r.checkRequest(KindCustom, req.Series, req.Namespace, "QueryForSeries called on an external rule"); err != nil {
		return Query{}, err
	}
	q, err := r.queryForSeries(req)
	if err == nil && req.MaxBytes > 0 && !req.AllObjects && len(q.Expr) > req.MaxBytes {
		// Few but long names (or a template repeating the matchers).
		req.AllObjects = true
		q, err = r.queryForSeries(req)
	}
	if err != nil {
		return Query{}, err
	}
	q.MaxSampleAge = r.maxSampleAge
	return r.confine(q)
}

func (r *Rule) queryForSeries(req CustomRequest) (Query, error) {
	ms, resLabel, nsLabel, err := objectMatchers(r.resources, req.MetricSelector, req.Resource, req.Namespace, req.Names, req.AllObjects)
	if err != nil {
		return Query{}, fmt.Errorf("%s: %w", r.path, err)
	}
	in := renderInput{series: req.Series, matchers: ms, groupBy: []string{resLabel}}
	if req.AllObjects {
		in.allObjects = resLabel
	}
	expr, err := r.render(in)
	if err != nil {
		return Query{}, err
	}
	return Query{Expr: expr, ResourceLabel: resLabel, NamespaceLabel: nsLabel, AllObjects: req.AllObjects}, nil
}

// QueryForExternalSeries renders the metricsQuery of an external rule for
// req: .LabelMatchers are the metric selector's matchers (sorted by label)
// then, when the rule is namespaced and req.Namespace is set, the
// namespace matcher; .GroupBy is empty.
func (r *Rule) QueryForExternalSeries(req ExternalRequest) (Query, error) {
	if err := r.checkRequest(KindExternal, req.Series, req.Namespace, "QueryForExternalSeries called on a custom rule"); err != nil {
		return Query{}, err
	}
	nsLabel := ""
	if r.namespaced && req.Namespace != "" {
		l, err := r.resources.LabelForResource(NamespaceResource)
		if err != nil {
			return Query{}, fmt.Errorf("%s: namespace matcher (set resources.namespaced: false to query without one): %w", r.path, err)
		}
		nsLabel = l
	}
	ms, nsLabel, err := externalMatchers(req.MetricSelector, nsLabel, req.Namespace)
	if err != nil {
		return Query{}, fmt.Errorf("%s: %w", r.path, err)
	}
	expr, err := r.render(renderInput{series: req.Series, matchers: ms})
	if err != nil {
		return Query{}, err
	}
	return r.confine(Query{Expr: expr, NamespaceLabel: nsLabel, MaxSampleAge: r.maxSampleAge})
}

// checkRequest checks what every query of the rule needs: that the rule
// is of kind (wrongKind is the error otherwise), a valid series name and a
// namespace the rule's tenant may query.
func (r *Rule) checkRequest(kind Kind, series, namespace, wrongKind string) error {
	if r.kind != kind {
		return fmt.Errorf("%s: %s", r.path, wrongKind)
	}
	if err := checkSeriesName(series); err != nil {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	return r.checkTenant(namespace)
}

// render renders the rule's metricsQuery.
func (r *Rule) render(in renderInput) (string, error) {
	expr, err := renderQuery(r.query, in)
	if err != nil {
		return "", fmt.Errorf("%s.metricsQuery: %w", r.path, err)
	}
	return expr, nil
}

func compileRule(kind Kind, index int, cfg config.DiscoveryRule, rest meta.RESTMapper) (*Rule, []string, error) {
	path := fmt.Sprintf("rules[%d]", index)
	if kind == KindExternal {
		path = fmt.Sprintf("externalRules[%d]", index)
	}
	r := &Rule{
		path:         path,
		index:        index,
		order:        index,
		kind:         kind,
		seriesQuery:  cfg.SeriesQuery,
		namespaced:   true,
		defaultValue: cfg.DefaultValue,
		backend:      config.BackendOrDefault(cfg.Backend),
	}
	if kind == KindExternal {
		r.namespaced = cfg.Resources.IsNamespaced()
	}
	var errs []error
	if strings.TrimSpace(cfg.SeriesQuery) == "" {
		errs = append(errs, fmt.Errorf("%s.seriesQuery: must not be empty", path))
	}
	namer, err := compileNamer(cfg.SeriesFilters, cfg.Name)
	if err != nil {
		errs = append(errs, prefixErrors(path, err))
	}
	r.namer = namer
	res, warnings, err := compileResources(path, cfg.Resources, rest)
	errs = append(errs, err)
	r.resources = res
	if q, err := config.ParseQueryTemplate("metricsQuery", cfg.MetricsQueryOrDefault()); err != nil {
		errs = append(errs, fmt.Errorf("%s.metricsQuery: %w", path, err))
	} else {
		r.query = q
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return r, warnings, nil
}

// compileResources is NewResourceMapper for the resources of the rule at
// path, its errors and warnings prefixed with "path.resources.".
func compileResources(path string, c config.ResourceMapping, rest meta.RESTMapper) (*ResourceMapper, []string, error) {
	res, warnings, err := NewResourceMapper(c, rest)
	if err != nil {
		err = prefixErrors(path+".resources", err)
	}
	for i, w := range warnings {
		warnings[i] = path + ".resources." + w
	}
	return res, warnings, err
}

// prefixErrors prefixes every error joined in err with "path.": the errors
// of this package's compile steps start with the field they are about
// ("seriesFilters[0]: ...", "template: ...").
func prefixErrors(path string, err error) error {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]error, 0, len(errs))
	for _, e := range errs {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			out = append(out, prefixErrors(path, errors.Join(j.Unwrap()...)))
			continue
		}
		out = append(out, fmt.Errorf("%s.%w", path, e))
	}
	return errors.Join(out...)
}
