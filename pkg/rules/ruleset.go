package rules

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/promscaler/promscaler/pkg/config"
)

// RuleSet is a whole configuration compiled for serving: discovery rules,
// external queries and resource rules. It is immutable and safe for
// concurrent use; a configuration reload compiles a new RuleSet.
type RuleSet struct {
	file            string // the configuration file, "" when built in code
	custom          []*Rule
	external        []*Rule
	externalQueries []*ExternalQuery
	resource        *ResourceRules
	warnings        []string
}

// Compile compiles cfg, resolving resources through mapper (the cluster's,
// or kubemapper's built-in one for offline tools). It reports every problem
// it finds at once, joined, each prefixed with its path (e.g.
// "rules[2].name.matches: ..."). Problems that do not prevent serving (an
// override naming a resource the mapper does not know, a rule that can
// serve nothing) are returned by Warnings. Compile is not a substitute for
// config validation, which also knows source lines.
func Compile(cfg *config.Config, mapper meta.RESTMapper) (*RuleSet, error) {
	if cfg == nil {
		return nil, errors.New("no configuration")
	}
	if mapper == nil {
		return nil, errors.New("no RESTMapper")
	}
	s := &RuleSet{}
	if cfg.Source != nil {
		s.file = cfg.Source.File
	}
	var errs []error
	for _, src := range []struct {
		kind  Kind
		rules []config.DiscoveryRule
		into  *[]*Rule
	}{{KindCustom, cfg.Rules, &s.custom}, {KindExternal, cfg.ExternalRules, &s.external}} {
		for i, rc := range src.rules {
			r, w, err := compileRule(src.kind, i, rc, mapper)
			s.warnings = append(s.warnings, w...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			r.nanAsZero = cfg.NaNIsZero(rc.NaNAsZero)
			if r.maxSampleAge, err = config.ParseMaxSampleAge(rc.MaxSampleAge); err != nil {
				errs = append(errs, fmt.Errorf("%s.maxSampleAge: %w", r.path, err))
				continue
			}
			r.file = s.file
			*src.into = append(*src.into, r)
		}
	}
	seen := make(map[string]string, len(cfg.ExternalQueries))
	for i, qc := range cfg.ExternalQueries {
		q, err := compileExternalQuery(i, qc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		q.nanAsZero = cfg.NaNIsZero(qc.NaNAsZero)
		if q.maxSampleAge, err = config.ParseMaxSampleAge(qc.MaxSampleAge); err != nil {
			errs = append(errs, fmt.Errorf("%s.maxSampleAge: %w", q.path, err))
			continue
		}
		if prev, dup := seen[q.name]; dup {
			errs = append(errs, fmt.Errorf("%s.name: %q is already served by %s", q.path, q.name, prev))
			continue
		}
		seen[q.name] = q.path
		s.externalQueries = append(s.externalQueries, q)
	}
	if cfg.ResourceRules != nil {
		rr, w, err := compileResourceRules(cfg.ResourceRules, mapper)
		s.warnings = append(s.warnings, w...)
		if err != nil {
			errs = append(errs, err)
		} else {
			s.resource = rr
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// Merge joins the rule sets of several configuration files, in order, into
// one: the rules of a later set come after those of an earlier one (see
// Rule.Order: of two rules producing the same metric, the later one is
// served). With more than one set, every path is prefixed with its file
// ("rules.d/team-a.yaml:rules[0]"), so that logs, conflicts and metrics
// name the place. Two externalQueries entries with the same name, or
// resourceRules in two files, are errors naming both places. The sets are
// not modified.
func Merge(sets []*RuleSet) (*RuleSet, error) {
	if len(sets) == 1 {
		return sets[0], nil
	}
	out := &RuleSet{}
	var errs []error
	where := func(s *RuleSet, path string) string {
		if s.file == "" {
			return path
		}
		return s.file + ":" + path
	}
	queries := map[string]string{}
	resourceFrom := ""
	for _, s := range sets {
		for _, r := range s.custom {
			c := *r
			c.path, c.order = where(s, r.path), len(out.custom)
			out.custom = append(out.custom, &c)
		}
		for _, r := range s.external {
			c := *r
			c.path, c.order = where(s, r.path), len(out.external)
			out.external = append(out.external, &c)
		}
		for _, q := range s.externalQueries {
			c := *q
			c.path = where(s, q.path)
			if prev, dup := queries[c.name]; dup {
				errs = append(errs, fmt.Errorf("%s.name: %q is already served by %s", c.path, c.name, prev))
				continue
			}
			queries[c.name] = c.path
			out.externalQueries = append(out.externalQueries, &c)
		}
		if s.resource != nil {
			if resourceFrom != "" {
				errs = append(errs, fmt.Errorf("%s: resourceRules are already set by %s; only one file may set them", where(s, "resourceRules"), resourceFrom))
			} else {
				resourceFrom = where(s, "resourceRules")
				out.resource = s.resource
			}
		}
		for _, w := range s.warnings {
			out.warnings = append(out.warnings, where(s, w))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// CustomRules returns the compiled rules (custom.metrics.k8s.io), in
// configuration order.
func (s *RuleSet) CustomRules() []*Rule { return slices.Clone(s.custom) }

// ExternalRules returns the compiled externalRules
// (external.metrics.k8s.io), in configuration order.
func (s *RuleSet) ExternalRules() []*Rule { return slices.Clone(s.external) }

// Rules returns every discovery rule: custom rules, then external rules.
func (s *RuleSet) Rules() []*Rule {
	out := make([]*Rule, 0, len(s.custom)+len(s.external))
	out = append(out, s.custom...)
	return append(out, s.external...)
}

// ExternalQueries returns the compiled externalQueries (a promscaler
// addition), in configuration order.
func (s *RuleSet) ExternalQueries() []*ExternalQuery { return slices.Clone(s.externalQueries) }

// ExternalQuery returns the externalQueries entry serving metric name.
func (s *RuleSet) ExternalQuery(name string) (*ExternalQuery, bool) {
	for _, q := range s.externalQueries {
		if q.name == name {
			return q, true
		}
	}
	return nil, false
}

// ResourceRules returns the compiled resourceRules, or nil when the
// configuration has none.
func (s *RuleSet) ResourceRules() *ResourceRules { return s.resource }

// Warnings returns the problems found that do not prevent serving, each
// prefixed with its path.
func (s *RuleSet) Warnings() []string { return slices.Clone(s.warnings) }

// ForgetUnresolved makes every rule resolve again labels that mapped to no
// resource (see ResourceMapper.ForgetUnresolved). Call it once per
// discovery cycle.
func (s *RuleSet) ForgetUnresolved() {
	for _, r := range s.custom {
		r.resources.ForgetUnresolved()
	}
	for _, r := range s.external {
		r.resources.ForgetUnresolved()
	}
	if s.resource != nil {
		s.resource.CPU.resources.ForgetUnresolved()
		s.resource.Memory.resources.ForgetUnresolved()
	}
}

// ExternalQuery is one compiled externalQueries entry (a promscaler
// addition): an external metric answered by a fixed query template, with
// no discovery.
type ExternalQuery struct {
	path         string
	name         string
	query        *config.QueryTemplate
	nsLabel      string // "" when not namespaced
	defaultValue *string
	nanAsZero    bool
	backend      string
	maxSampleAge time.Duration
}

func compileExternalQuery(i int, c config.ExternalQuery) (*ExternalQuery, error) {
	path := fmt.Sprintf("externalQueries[%d]", i)
	var errs []error
	q := &ExternalQuery{path: path, name: c.Name, defaultValue: c.DefaultValue, backend: config.BackendOrDefault(c.Backend)}
	if strings.TrimSpace(c.Name) == "" {
		errs = append(errs, fmt.Errorf("%s.name: must not be empty", path))
	}
	if c.IsNamespaced() {
		q.nsLabel = c.NamespaceLabelOrDefault()
		if err := checkLabelName(q.nsLabel); err != nil {
			errs = append(errs, fmt.Errorf("%s.namespaceLabel: %w", path, err))
		}
	}
	t, err := config.ParseQueryTemplate("query", c.Query)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s.query: %w", path, err))
	}
	q.query = t
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return q, nil
}

// Path returns the entry's place in the configuration, e.g.
// "externalQueries[0]".
func (q *ExternalQuery) Path() string { return q.path }

// Backend returns the name of the backend the query is sent to.
func (q *ExternalQuery) Backend() string { return q.backend }

// MaxSampleAge returns the entry's maxSampleAge; 0 means the backend's.
func (q *ExternalQuery) MaxSampleAge() time.Duration { return q.maxSampleAge }

// Name returns the external metric name served.
func (q *ExternalQuery) Name() string { return q.name }

// Namespaced reports whether the request namespace is applied as a matcher.
func (q *ExternalQuery) Namespaced() bool { return q.nsLabel != "" }

// NaNAsZero reports whether a NaN sample of the entry is answered as 0.
func (q *ExternalQuery) NaNAsZero() bool { return q.nanAsZero }

// DefaultValue returns the entry's defaultValue, if set, as written.
func (q *ExternalQuery) DefaultValue() (string, bool) {
	if q.defaultValue == nil {
		return "", false
	}
	return *q.defaultValue, true
}

// Query renders the entry for req: .Series is the metric name,
// .LabelMatchers the metric selector's matchers (sorted by label) then,
// when namespaced and req.Namespace is set, the namespace matcher.
func (q *ExternalQuery) Query(req ExternalRequest) (Query, error) {
	ms, nsLabel, err := externalMatchers(req.MetricSelector, q.nsLabel, req.Namespace)
	if err != nil {
		return Query{}, fmt.Errorf("%s: %w", q.path, err)
	}
	expr, err := renderQuery(q.query, renderInput{series: q.name, matchers: ms})
	if err != nil {
		return Query{}, fmt.Errorf("%s.query: %w", q.path, err)
	}
	return Query{Expr: expr, NamespaceLabel: nsLabel, MaxSampleAge: q.maxSampleAge}, nil
}
