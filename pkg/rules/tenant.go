package rules

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/tenancy"
)

// probeSeries is the series name the metricsQuery of a team rule is
// rendered with when it is checked at load.
const probeSeries = "promscaler_confinement_probe"

// ConfineTo returns a copy of s whose rules serve namespace e.Namespace()
// only: a team's rules (a ConfigMap in the team's namespace). In the copy,
// each rule's seriesQuery carries the namespace matcher (discovery sees
// that namespace's series only); every query a rule renders
// (QueryForSeries, QueryForExternalSeries) is refused for a request in
// another namespace or for cluster-scoped objects, and is confined by e
// (tenancy.Enforcer.Confine) before it is returned; an error wrapping
// tenancy.ErrNotConfinable says what could not be confined.
//
// It refuses, with errors naming each place, what cannot be confined:
// resourceRules and externalQueries (cluster-wide by nature), a rule that
// does not map e.Label() to namespaces, a seriesQuery that is not a series
// selector or selects another namespace, and a metricsQuery that, rendered
// for an object of the namespace, cannot be confined (another namespace or
// a regular expression on the namespace label in its text).
func (s *RuleSet) ConfineTo(e *tenancy.Enforcer) (*RuleSet, error) {
	if e == nil {
		return nil, errors.New("no namespace enforcer")
	}
	out := &RuleSet{file: s.file, warnings: slices.Clone(s.warnings)}
	var errs []error
	if s.resource != nil {
		errs = append(errs, errors.New("resourceRules: not allowed in team rules (metrics.k8s.io is cluster-wide)"))
	}
	for _, q := range s.externalQueries {
		errs = append(errs, fmt.Errorf("%s: externalQueries are not allowed in team rules; write an externalRules entry", q.path))
	}
	confine := func(rules []*Rule) []*Rule {
		var out []*Rule
		for _, r := range rules {
			c, err := r.confineTo(e)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, c)
		}
		return out
	}
	out.custom, out.external = confine(s.custom), confine(s.external)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Tenant returns the namespace a team rule is confined to (see
// RuleSet.ConfineTo), "" for a cluster-wide rule.
func (r *Rule) Tenant() string {
	if r.tenant == nil {
		return ""
	}
	return r.tenant.Namespace()
}

// ServesNamespace reports whether the rule may serve a request in
// namespace ns ("" for cluster-scoped objects): always for a cluster-wide
// rule, only for its own namespace for a team rule.
func (r *Rule) ServesNamespace(ns string) bool {
	return r.tenant == nil || r.tenant.Namespace() == ns
}

// confineTo returns a copy of r confined by e, checked as ConfineTo says.
func (r *Rule) confineTo(e *tenancy.Enforcer) (*Rule, error) {
	l, err := r.resources.LabelForResource(NamespaceResource)
	if err != nil {
		return nil, fmt.Errorf("%s.resources: a team rule must map the label %q to namespaces: %w", r.path, e.Label(), err)
	}
	if l != e.Label() {
		return nil, fmt.Errorf("%s.resources: a team rule must map the label %q to namespaces, not %q", r.path, e.Label(), l)
	}
	sq, err := e.ConfineSelector(r.seriesQuery)
	if err != nil {
		return nil, fmt.Errorf("%s.seriesQuery: %w", r.path, err)
	}
	c := *r
	c.seriesQuery, c.tenant = sq, e
	if err := c.probe(); err != nil {
		return nil, err
	}
	return &c, nil
}

// probe renders the rule's metricsQuery for an object of its namespace
// and confines it, so that a query that can never be confined is refused
// at load rather than on every request.
func (r *Rule) probe() error {
	var err error
	if r.kind == KindExternal {
		_, err = r.QueryForExternalSeries(ExternalRequest{Series: probeSeries, Namespace: r.Tenant()})
	} else {
		gr, ok := r.probeResource()
		if !ok {
			return nil // confined on each request
		}
		_, err = r.QueryForSeries(CustomRequest{Series: probeSeries, Resource: gr, Namespace: r.Tenant(), Names: []string{"probe"}})
	}
	// The rendering errors name the rule and its metricsQuery.
	return err
}

// probeResource is a namespaced resource the rule maps a label to: pods
// when it can, else the first override's (by label).
func (r *Rule) probeResource() (schema.GroupResource, bool) {
	pods := schema.GroupResource{Resource: "pods"}
	if _, err := r.resources.LabelForResource(pods); err == nil {
		return pods, true
	}
	ov := r.resources.Overrides()
	labels := make([]string, 0, len(ov))
	for l, gr := range ov {
		if gr != NamespaceResource {
			labels = append(labels, l)
		}
	}
	if len(labels) == 0 {
		return schema.GroupResource{}, false
	}
	slices.Sort(labels)
	return ov[labels[0]], true
}

// checkTenant checks that a team rule's request is in its namespace, before
// rendering; nil for a cluster-wide rule.
func (r *Rule) checkTenant(namespace string) error {
	if r.tenant == nil || r.tenant.Namespace() == namespace {
		return nil
	}
	where := "cluster-scoped objects"
	if namespace != "" {
		where = fmt.Sprintf("namespace %q", namespace)
	}
	return fmt.Errorf("%s: %w: the rule serves namespace %q only, not %s", r.path, tenancy.ErrNotConfinable, r.tenant.Namespace(), where)
}

// confine confines a team rule's rendered query to its namespace; it
// returns q unchanged for a cluster-wide rule.
func (r *Rule) confine(q Query) (Query, error) {
	if r.tenant == nil {
		return q, nil
	}
	expr, err := r.tenant.Confine(q.Expr)
	if err != nil {
		return Query{}, fmt.Errorf("%s.metricsQuery: %w", r.path, err)
	}
	q.Expr = expr
	return q, nil
}
