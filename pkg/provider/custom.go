package provider

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/apistatus"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/limits"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/pkg/tenancy"
)

// customTarget is a resolved custom metrics request: the resource, its kind
// and the index entry serving the metric.
type customTarget struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	apiVersion string // of gvk, written in every value
	metric     string
	entry      discovery.Entry
}

func (t *customTarget) gr() schema.GroupResource { return t.gvr.GroupResource() }

// what names the request in error messages.
func (t *customTarget) what() string {
	return fmt.Sprintf("metric %s for %s (%s)", t.metric, t.gr().String(), t.entry.Rule.Path())
}

// resolveCustom normalises the request's resource and finds the rule
// serving the metric, or returns the API error saying why not. A metric the
// index lacks is looked up again after a refresh (Config.Refresh).
func (p *Provider) resolveCustom(ctx context.Context, info cmprovider.CustomMetricInfo, namespace string) (*customTarget, error) {
	if _, err := p.currentIndex(); err != nil {
		return nil, err
	}
	gvr, gvk, err := resolve(p.cfg.Mapper, info.GroupResource)
	if err != nil {
		return nil, metricNotFound(info.GroupResource, info.Metric, "",
			fmt.Sprintf("resource %q is not known to the cluster", info.GroupResource.String()))
	}
	gr := gvr.GroupResource()
	e, x, ok, err := p.lookup(ctx, fmt.Sprintf("custom %s %t %s", gr, namespace != "", info.Metric), "metric "+info.Metric+" for "+gr.String(),
		func(x MetricIndex) (discovery.Entry, bool) { return x.Custom(gr, namespace, info.Metric) })
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, metricNotFound(gr, info.Metric, "", whyNoCustom(x, gr, func() bool { return namespaced(p.cfg.Mapper, gvk) }, namespace, info.Metric))
	}
	return &customTarget{gvr: gvr, gvk: gvk, apiVersion: gvk.GroupVersion().String(), metric: info.Metric, entry: e}, nil
}

// whyNoCustom explains a missing custom metric from the index. (In a
// namespace, a metric some rule produces for the resource is always
// served: see discovery.Index.Custom.)
func whyNoCustom(x MetricIndex, gr schema.GroupResource, resourceNamespaced func() bool, namespace, metric string) string {
	res := gr.String()
	if namespace != "" {
		if len(x.CustomCandidates(gr, false, metric)) > 0 {
			return fmt.Sprintf("it is served for %s cluster-wide: ask without a namespace", res)
		}
		if !resourceNamespaced() {
			return fmt.Sprintf("%s are cluster-scoped: ask without a namespace", res)
		}
		return fmt.Sprintf("no rule discovered it for %s", res)
	}
	if len(x.CustomCandidates(gr, true, metric)) > 0 {
		return fmt.Sprintf("it is served for %s per namespace: ask under /namespaces/<namespace>/", res)
	}
	return fmt.Sprintf("no rule discovered it for %s", res)
}

// GetMetricByName implements CustomMetricsProvider: the value of a metric
// for one object.
func (p *Provider) GetMetricByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	if err := limits.CheckMetricSelector("metricLabelSelector", metricSelector); err != nil {
		return nil, err
	}
	if err := limits.CheckNamespace(name.Namespace); err != nil {
		return nil, err
	}
	t, err := p.resolveCustom(ctx, info, name.Namespace)
	if err != nil {
		return nil, err
	}
	values, err := p.queryCustom(ctx, t, name.Namespace, []string{name.Name}, nil, metricSelector)
	if err != nil {
		return nil, err
	}
	sel, err := apiSelector(metricSelector)
	if err != nil {
		return nil, err
	}
	s, ok := sampleValueOf(values[0])
	if !ok {
		q, hasDefault, err := defaultValue(t.entry.Rule.Path(), t.entry.Rule.DefaultValue)
		if err != nil {
			return nil, err
		}
		if !hasDefault {
			return nil, metricNotFound(t.gr(), t.metric, name.Name,
				fmt.Sprintf("Prometheus returned no sample with a finite value for it (%s)", t.entry.Rule.Path()))
		}
		// The default stands in for a missing sample of an object that
		// exists, never for a name nothing carries (a typo in an HPA's
		// Object target must not read as a value).
		exists, err := p.objectExists(ctx, t, name)
		if err != nil {
			return nil, err
		}
		if !exists {
			return nil, metricNotFound(t.gr(), t.metric, name.Name,
				fmt.Sprintf("no such object, and Prometheus returned no sample for it; the defaultValue of %s is given only to existing objects", t.entry.Rule.Path()))
		}
		s = sampleValue{value: q, ts: p.now()}
	}
	v := t.value(name.Namespace, name.Name, sel, s)
	return &v, nil
}

// objectExists reports whether the object is in the object cache.
func (p *Provider) objectExists(ctx context.Context, t *customTarget, name types.NamespacedName) (bool, error) {
	names, err := p.cfg.Objects.ListObjects(ctx, t.gvr, name.Namespace, labels.Everything())
	if err != nil {
		return false, listError(ctx, t, name.Namespace, err)
	}
	return slices.Contains(names, name.Name), nil
}

// GetMetricBySelector implements CustomMetricsProvider: the values of a
// metric for the objects matching selector, listed from the object cache.
// Objects without a sample are left out (or given the rule's defaultValue);
// when objects match but none has a value, the answer is an empty list.
func (p *Provider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	if err := limits.CheckSelector("labelSelector", selector); err != nil {
		return nil, err
	}
	if err := limits.CheckMetricSelector("metricLabelSelector", metricSelector); err != nil {
		return nil, err
	}
	if err := limits.CheckNamespace(namespace); err != nil {
		return nil, err
	}
	t, err := p.resolveCustom(ctx, info, namespace)
	if err != nil {
		return nil, err
	}
	names, index, err := p.listObjects(ctx, t.gvr, namespace, selector)
	if err != nil {
		return nil, listError(ctx, t, namespace, err)
	}
	list := &custom_metrics.MetricValueList{}
	if len(names) == 0 {
		list.Items = []custom_metrics.MetricValue{}
		return list, nil
	}
	values, err := p.queryCustom(ctx, t, namespace, names, index, metricSelector)
	if err != nil {
		return nil, err
	}
	sel, err := apiSelector(metricSelector)
	if err != nil {
		return nil, err
	}
	q, hasDefault, err := defaultValue(t.entry.Rule.Path(), t.entry.Rule.DefaultValue)
	if err != nil {
		return nil, err
	}
	def := sampleValue{value: q, ts: p.now()}
	// Filled in place: appending built values copies each (with write
	// barriers while the GC runs).
	list.Items = make([]custom_metrics.MetricValue, len(names))
	k := 0
	for i, n := range names {
		s, ok := sampleValueOf(values[i])
		if !ok {
			if !hasDefault {
				continue
			}
			s = def
		}
		t.fill(&list.Items[k], namespace, n, sel, s)
		k++
	}
	// Objects whose samples all lack a value answer an empty list, as
	// prometheus-adapter does: the metric exists, no object has a value.
	list.Items = list.Items[:k]
	return list, nil
}

// ListAllMetrics implements CustomMetricsProvider: every custom metric of
// the current index (none before the first discovery), after
// Config.RefreshList.
func (p *Provider) ListAllMetrics() []cmprovider.CustomMetricInfo {
	x := p.listIndex()
	if x == nil {
		return nil
	}
	return slices.Clone(x.CustomMetrics())
}

// sampleValue is one object's converted value.
type sampleValue struct {
	value resource.Quantity
	ts    time.Time
}

// value builds the API object for one object's value.
func (t *customTarget) value(namespace, name string, sel *metav1.LabelSelector, s sampleValue) custom_metrics.MetricValue {
	var v custom_metrics.MetricValue
	t.fill(&v, namespace, name, sel, s)
	return v
}

// fill sets the zero *v to the API object for one object's value.
func (t *customTarget) fill(v *custom_metrics.MetricValue, namespace, name string, sel *metav1.LabelSelector, s sampleValue) {
	v.DescribedObject.Kind = t.gvk.Kind
	v.DescribedObject.APIVersion = t.apiVersion
	v.DescribedObject.Namespace = namespace
	v.DescribedObject.Name = name
	v.Metric.Name = t.metric
	v.Metric.Selector = sel
	v.Timestamp = metav1.NewTime(s.ts)
	v.Value = s.value
}

// queryCustom renders and runs the rule's query for names (sorted and
// unique) and returns, at each name's index, its first sample with a finite
// value (NaN and ±Inf are not values, see Quantity), in Prometheus' answer
// order, if any. With more names than MaxNamesInQuery, or when naming them
// would render a query longer than MaxQueryBytes, the query asks for every
// object of the resource in the namespace, so its length does not depend on
// the names; the caller keeps the names it wants. index, when not nil,
// returns the index of the names (kept with them by the object cache).
// When the rule's requests are shared (see SharedConfig), the values come
// from the request's slice of a shared evaluation instead.
func (p *Provider) queryCustom(ctx context.Context, t *customTarget, namespace string, names []string, index func() map[string]int, metricSelector labels.Selector) ([]point, error) {
	if pts, ok, err := p.queryShared(ctx, t, namespace, names, metricSelector); ok {
		return pts, err
	}
	return p.queryPerRequest(ctx, t, namespace, names, index, metricSelector)
}

// queryPerRequest is queryCustom's per-request query.
func (p *Provider) queryPerRequest(ctx context.Context, t *customTarget, namespace string, names []string, index func() map[string]int, metricSelector labels.Selector) ([]point, error) {
	start := time.Now()
	// A team rule's queries are its namespace's (WithTenant): bounded and
	// counted apart from everybody else's.
	q, smps, err := p.query(promclient.WithTenant(ctx, t.entry.Rule.Tenant()), t.what(), t.entry.Rule.Backend(), func() (rules.Query, error) {
		return t.entry.Rule.QueryForSeries(rules.CustomRequest{
			Series:         t.entry.SeriesName,
			Resource:       t.gr(),
			Namespace:      namespace,
			Names:          names,
			MetricSelector: metricSelector,
			AllObjects:     len(names) > p.cfg.MaxNamesInQuery,
			MaxBytes:       p.cfg.MaxQueryBytes,
		})
	})
	if err != nil {
		return nil, err
	}
	m := sampleMatcher{rule: t.entry.Rule.Path(), metric: t.metric, namespace: namespace, names: names, sharedIndex: index,
		nanAsZero: t.entry.Rule.NaNAsZero(), found: make([]point, len(names))}
	for i := range smps {
		s := &smps[i]
		name, _ := s.Labels.Get(q.ResourceLabel)
		m.add(name, s.Value, s.Timestamp)
	}
	klog.V(4).InfoS("Custom metrics query", "metric", t.metric, "resource", t.gr(), "namespace", namespace,
		"objects", len(names), "allObjects", q.AllObjects, "rule", t.entry.Rule.Path(),
		"queryBytes", len(q.Expr), "samples", len(smps), "duration", time.Since(start))
	return m.found, nil
}

// point is an object's sample: its value and timestamp, if ok.
type point struct {
	value model.SampleValue
	ts    model.Time
	ok    bool
}

// sampleMatcher keeps, for each of names (sorted and unique), the first
// sample with a value it is given for that name: a finite value, or NaN
// read as 0 when nanAsZero (see sampleFloat). No sample of an object not
// asked for is kept (an all-objects query returns every object of the
// namespace).
//
// Samples may come in the order of the names, or in a few ascending runs
// (an answer can follow the order in which Prometheus created the series,
// which for pods named in sequence may be theirs): a sample is first
// matched with the name after the previous sample's, else found by a binary
// search. Past maxSearches searches the order is taken as random and the
// names are indexed in a map, cheaper than searching for every sample (the
// index kept with the names by the object cache, when there is one).
type sampleMatcher struct {
	rule, metric, namespace string // for logs
	names                   []string
	sharedIndex             func() map[string]int // nil when not kept
	nanAsZero               bool
	found                   []point

	next     int // the index of the name after the previous sample's
	searches int
	index    map[string]int
}

// maxSearches is the number of binary searches after which sampleMatcher
// indexes the names in a map instead.
const maxSearches = 64

// add considers one sample of the object name ("" for none).
func (m *sampleMatcher) add(name string, v model.SampleValue, ts model.Time) {
	if name == "" {
		return
	}
	i, ok := m.lookup(name)
	if !ok {
		return
	}
	f, ok := sampleFloat(float64(v), m.nanAsZero)
	if !ok {
		klog.V(4).InfoS("Skipping a sample without a finite value", "rule", m.rule,
			"metric", m.metric, "namespace", m.namespace, "object", name, "value", v)
		return
	}
	v = model.SampleValue(f)
	if m.found[i].ok {
		// The query did not aggregate to one sample per object:
		// keep the first, in Prometheus' answer order.
		klog.V(4).InfoS("Several samples for one object; keeping the first", "rule", m.rule, "object", name)
		return
	}
	m.found[i] = point{value: v, ts: ts, ok: true}
}

// sampleFloat is the value a sample answers: v when finite, 0 for NaN when
// nanAsZero (prometheus-adapter's answer for a 0/0 ratio or the quantile
// of an empty summary, on which an idle workload scales down); ok is false
// for ±Inf, and for NaN otherwise (no value).
func sampleFloat(v float64, nanAsZero bool) (float64, bool) {
	switch {
	case math.IsNaN(v):
		return 0, nanAsZero
	case math.IsInf(v, 0):
		return 0, false
	}
	return v, true
}

// lookup returns the index of name in m.names.
func (m *sampleMatcher) lookup(name string) (int, bool) {
	if m.next < len(m.names) && m.names[m.next] == name {
		m.next++
		return m.next - 1, true
	}
	if m.index != nil {
		i, ok := m.index[name]
		return i, ok
	}
	if m.searches++; m.searches > maxSearches {
		if m.sharedIndex != nil {
			m.index = m.sharedIndex()
		} else {
			m.index = make(map[string]int, len(m.names))
			for i, n := range m.names {
				m.index[n] = i
			}
		}
		i, ok := m.index[name]
		return i, ok
	}
	i, ok := slices.BinarySearch(m.names, name)
	// The next name is the likely next sample's, found or not.
	m.next = i
	if ok {
		m.next++
	}
	return i, ok
}

// sampleValueOf converts an object's sample; ok is false when it has none
// (or, which queryCustom already leaves out, when its value is NaN or ±Inf).
func sampleValueOf(pt point) (sampleValue, bool) {
	if !pt.ok {
		return sampleValue{}, false
	}
	v, err := Quantity(float64(pt.value))
	if err != nil {
		return sampleValue{}, false
	}
	return sampleValue{value: v, ts: pt.ts.Time()}, true
}

// apiSelector is the metric selector as the API reports it (nil when it
// selects everything), as prometheus-adapter does.
func apiSelector(sel labels.Selector) (*metav1.LabelSelector, error) {
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	ls, err := metav1.ParseToLabelSelector(sel.String())
	if err != nil {
		return nil, badRequest("metric label selector %q: %v", sel.String(), err)
	}
	return ls, nil
}

// renderError maps a rendering failure: a selector that has no PromQL
// form is the client's mistake (400); anything else is the rule's (500,
// the details in the log only: they may hold the query).
func renderError(ctx context.Context, what string, err error) error {
	switch {
	case errors.Is(err, rules.ErrUnsupportedOperator), errors.Is(err, rules.ErrUnsupportedSelector),
		errors.Is(err, rules.ErrInvalidLabelName), errors.Is(err, rules.ErrInvalidLabelValue):
		return badRequest("%s: %v", what, err)
	case errors.Is(err, tenancy.ErrNotConfinable):
		// The details (the query) stay in the log.
		klog.InfoS("Refused a query that cannot be confined to its team rule's namespace", "what", what, "err", err)
		return forbidden("%s: the request cannot be confined to the namespace of the team rule serving it", what)
	default:
		return apistatus.FromError(ctx, what+": rendering the query", err)
	}
}

// listError maps an object listing failure.
func listError(ctx context.Context, t *customTarget, namespace string, err error) error {
	where := t.gr().String()
	if namespace != "" {
		where += " in namespace " + namespace
	}
	return apistatus.Unavailable(ctx, "listing "+where+" from the object cache", err)
}
