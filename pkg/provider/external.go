package provider

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/limits"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
)

// externalTarget is a resolved external metrics request: how to render its
// query and its default.
type externalTarget struct {
	metric string
	path   string // rule or externalQueries entry, for context
	render func(rules.ExternalRequest) (rules.Query, error)
	series string
	def    func() (string, bool)
	// nanAsZero: a NaN sample answers 0 (see sampleFloat).
	nanAsZero bool
	backend   string // the rule's or entry's backend
	tenant    string // a team rule's namespace (rules.Rule.Tenant)
}

func (t *externalTarget) what() string {
	return fmt.Sprintf("external metric %s (%s)", t.metric, t.path)
}

// resolveExternal finds what serves an external metric: an externalQueries
// entry of that name first (explicit configuration wins over discovery),
// else the discovered external rule (looked up again after a refresh
// when the index lacks it, see Config.Refresh).
func (p *Provider) resolveExternal(ctx context.Context, namespace, metric string) (*externalTarget, error) {
	if rs := p.cfg.Rules(); rs != nil {
		if q, ok := rs.ExternalQuery(metric); ok {
			return &externalTarget{metric: metric, path: q.Path(), render: q.Query, def: q.DefaultValue, nanAsZero: q.NaNAsZero(), backend: q.Backend()}, nil
		}
	}
	e, x, ok, err := p.lookup(ctx, "external "+metric, "external metric "+metric,
		func(x MetricIndex) (discovery.Entry, bool) { return x.External(namespace, metric) })
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, externalNotFound(metric, namespace, whyNoExternal(x, metric))
	}
	return &externalTarget{metric: metric, path: e.Rule.Path(), render: e.Rule.QueryForExternalSeries, series: e.SeriesName,
		def: e.Rule.DefaultValue, nanAsZero: e.Rule.NaNAsZero(), backend: e.Rule.Backend(), tenant: e.Rule.Tenant()}, nil
}

// whyNoExternal explains a missing external metric from the index. (A
// metric some external rule serves in a namespace is served in every
// namespace: see discovery.Index.External.)
func whyNoExternal(x MetricIndex, metric string) string {
	if es := x.ExternalUnscoped(metric); len(es) > 0 {
		r := es[0].Rule
		if _, err := r.Resources().LabelForResource(rules.NamespaceResource); err != nil {
			return fmt.Sprintf("%s discovers it but is namespaced (resources.namespaced defaults to true) and maps no label to namespaces, so it serves no namespace: "+
				"map the namespace label in its resources, or set resources.namespaced: false", r.Path())
		}
		return fmt.Sprintf("%s discovers it but none of its series carries the namespace label, so it serves no namespace: "+
			"set resources.namespaced: false to serve it in every namespace", r.Path())
	}
	return "no external rule discovered it and no externalQueries entry serves it"
}

// externalNotFound is a 404 for an external metric, saying why.
func externalNotFound(metric, namespace, why string) *apierrors.StatusError {
	msg := fmt.Sprintf("the server could not find the external metric %s", metric)
	if namespace != "" {
		msg += " in namespace " + namespace
	}
	if why != "" {
		msg += ": " + why
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: msg,
		Details: &metav1.StatusDetails{Group: external_metrics.GroupName, Name: metric},
	}}
}

// GetExternalMetric implements ExternalMetricsProvider. The request's label
// selector becomes PromQL matchers; namespaced rules (the default) and
// namespaced externalQueries add the namespace matcher. Every series of the
// answer with a finite value becomes an item carrying its labels (without
// __name__); a NaN sample is 0 unless the rule's nanAsZero is false. When
// there is none, the answer is the rule's defaultValue if set, else an
// empty list.
func (p *Provider) GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	if err := limits.CheckSelector("labelSelector", metricSelector); err != nil {
		return nil, err
	}
	if err := limits.CheckNamespace(namespace); err != nil {
		return nil, err
	}
	t, err := p.resolveExternal(ctx, namespace, info.Metric)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	q, smps, err := p.query(promclient.WithTenant(ctx, t.tenant), t.what(), t.backend, func() (rules.Query, error) {
		return t.render(rules.ExternalRequest{Series: t.series, Namespace: namespace, MetricSelector: metricSelector})
	})
	if err != nil {
		return nil, err
	}
	klog.V(4).InfoS("External metrics query", "metric", t.metric, "namespace", namespace, "source", t.path,
		"queryBytes", len(q.Expr), "samples", len(smps), "duration", time.Since(start))

	list := &external_metrics.ExternalMetricValueList{Items: make([]external_metrics.ExternalMetricValue, 0, len(smps))}
	// Each sample becomes a model.Sample with its labels as a map (external answers
	// are small), and, for stable answers, they are ordered by labels.
	samples := smps.Vector()
	if len(samples) > 1 {
		keys := make(map[*model.Sample]string, len(samples))
		for _, s := range samples {
			keys[s] = s.Metric.String()
		}
		slices.SortFunc(samples, func(a, b *model.Sample) int { return strings.Compare(keys[a], keys[b]) })
	}
	for _, s := range samples {
		f, ok := sampleFloat(float64(s.Value), t.nanAsZero)
		if !ok {
			klog.V(2).InfoS("Skipping a sample without a finite value", "source", t.path,
				"metric", t.metric, "namespace", namespace, "labels", s.Metric.String(), "value", s.Value)
			continue
		}
		v, err := Quantity(f)
		if err != nil {
			klog.V(2).InfoS("Skipping a sample that is not a quantity", "source", t.path, "err", err,
				"metric", t.metric, "namespace", namespace, "labels", s.Metric.String(), "value", s.Value)
			continue
		}
		list.Items = append(list.Items, external_metrics.ExternalMetricValue{
			MetricName:   t.metric,
			MetricLabels: itemLabels(s.Metric),
			Timestamp:    metav1.NewTime(s.Timestamp.Time()),
			Value:        v,
		})
	}
	if len(list.Items) > 0 {
		return list, nil
	}
	// Without a defaultValue, as prometheus-adapter: the metric is
	// served, nothing has a value; the HPA reads an empty list as no metric.
	v, ok, err := defaultValue(t.path, t.def)
	if err != nil || !ok {
		return list, err
	}
	list.Items = append(list.Items, external_metrics.ExternalMetricValue{
		MetricName:   t.metric,
		MetricLabels: map[string]string{},
		Timestamp:    metav1.NewTime(p.now()),
		Value:        v,
	})
	return list, nil
}

// ListAllExternalMetrics implements ExternalMetricsProvider: the external
// metrics of the current index (after Config.RefreshList) and every
// externalQueries entry, sorted.
func (p *Provider) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo {
	var out []cmprovider.ExternalMetricInfo
	if x := p.listIndex(); x != nil {
		out = append(out, x.ExternalMetrics()...)
	}
	if rs := p.cfg.Rules(); rs != nil {
		for _, q := range rs.ExternalQueries() {
			out = append(out, cmprovider.ExternalMetricInfo{Metric: q.Name()})
		}
	}
	slices.SortFunc(out, func(a, b cmprovider.ExternalMetricInfo) int { return strings.Compare(a.Metric, b.Metric) })
	return slices.CompactFunc(out, func(a, b cmprovider.ExternalMetricInfo) bool { return a.Metric == b.Metric })
}

// itemLabels are a series' labels without its name.
func itemLabels(m model.Metric) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k == model.MetricNameLabel {
			continue
		}
		out[string(k)] = string(v)
	}
	return out
}
