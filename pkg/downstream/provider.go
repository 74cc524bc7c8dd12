package downstream

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// ServedByHeader is the response header naming who answered a metric
// request: "promscaler", or the downstream's name.
const ServedByHeader = "X-Promscaler-Served-By"

// ServedByPromscaler is ServedByHeader's value for promscaler's own answers.
const ServedByPromscaler = "promscaler"

// CustomProvider serves promscaler's custom metrics from ours and forwards
// the others to the downstream listing them. The library calls it after
// the caller is authorized, so a forwarded request is one the caller may
// make (see docs/downstream.md).
type CustomProvider struct {
	ours cmprovider.CustomMetricsProvider
	set  *Set
}

var _ cmprovider.CustomMetricsProvider = (*CustomProvider)(nil)

// ExternalProvider is CustomProvider's external metrics twin.
type ExternalProvider struct {
	ours cmprovider.ExternalMetricsProvider
	set  *Set
}

var _ cmprovider.ExternalMetricsProvider = (*ExternalProvider)(nil)

// WrapCustom returns ours with the set's downstreams behind it.
func (s *Set) WrapCustom(ours cmprovider.CustomMetricsProvider) *CustomProvider {
	return &CustomProvider{ours: ours, set: s}
}

// WrapExternal returns ours with the set's downstreams behind it.
func (s *Set) WrapExternal(ours cmprovider.ExternalMetricsProvider) *ExternalProvider {
	return &ExternalProvider{ours: ours, set: s}
}

// GetMetricByName implements CustomMetricsProvider.
func (p *CustomProvider) GetMetricByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	m := p.set.table.Load().customRoute(info, name.Namespace, p.set.opts.Ours)
	if m == nil {
		servedBy(ctx, ServedByPromscaler)
		return p.ours.GetMetricByName(ctx, name, info, metricSelector)
	}
	list, err := p.set.forwardCustom(ctx, m, name.Namespace, name.Name, info, nil, metricSelector)
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, apierrors.NewNotFound(info.GroupResource, objectName(name))
	}
	return &list.Items[0], nil
}

// GetMetricBySelector implements CustomMetricsProvider.
func (p *CustomProvider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	m := p.set.table.Load().customRoute(info, namespace, p.set.opts.Ours)
	if m == nil {
		servedBy(ctx, ServedByPromscaler)
		return p.ours.GetMetricBySelector(ctx, namespace, selector, info, metricSelector)
	}
	return p.set.forwardCustom(ctx, m, namespace, "", info, selector, metricSelector)
}

// ListAllMetrics implements CustomMetricsProvider: ours and, from memory,
// the downstreams'.
func (p *CustomProvider) ListAllMetrics() []cmprovider.CustomMetricInfo {
	return p.set.table.Load().unionCustom(p.ours.ListAllMetrics())
}

// GetExternalMetric implements ExternalMetricsProvider.
func (p *ExternalProvider) GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	m := p.set.table.Load().externalRoute(namespace, info.Metric, p.set.opts.Ours)
	if m == nil {
		servedBy(ctx, ServedByPromscaler)
		return p.ours.GetExternalMetric(ctx, namespace, metricSelector, info)
	}
	servedBy(ctx, m.cfg.Name)
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	list, err := m.client.GetExternal(ctx, namespace, info.Metric, metricSelector)
	p.set.metrics.observe(m.cfg.Name, External, err)
	return list, err
}

// ListAllExternalMetrics implements ExternalMetricsProvider: ours and, from
// memory, the downstreams'.
func (p *ExternalProvider) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo {
	return p.set.table.Load().unionExternal(p.ours.ListAllExternalMetrics())
}

// forwardCustom asks m for a custom metric within its timeout.
func (s *Set) forwardCustom(ctx context.Context, m *member, namespace, name string, info cmprovider.CustomMetricInfo, selector, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	servedBy(ctx, m.cfg.Name)
	version := customVersions[len(customVersions)-1]
	if d := m.discovered(); d != nil && d.CustomVersion != "" {
		version = d.CustomVersion
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	list, err := m.client.GetCustom(ctx, version, namespace, name, info, selector, metricSelector)
	s.metrics.observe(m.cfg.Name, Custom, err)
	return list, err
}

// codeOf is the HTTP status a forwarded request's error becomes.
func codeOf(err error) string {
	if err == nil {
		return "200"
	}
	if st, ok := err.(apierrors.APIStatus); ok && st.Status().Code != 0 {
		return strconv.Itoa(int(st.Status().Code))
	}
	return "500"
}

type servedByKey struct{}

// servedBy records who answers the request, for WithServedBy.
func servedBy(ctx context.Context, who string) {
	if p, ok := ctx.Value(servedByKey{}).(*atomic.Pointer[string]); ok {
		p.Store(&who)
	}
}

// WithServedBy sets ServedByHeader on the answers of the metric requests
// next serves through a CustomProvider or ExternalProvider.
func WithServedBy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := new(atomic.Pointer[string])
		ctx := context.WithValue(r.Context(), servedByKey{}, who)
		next.ServeHTTP(&servedByWriter{ResponseWriter: w, who: who}, r.WithContext(ctx))
	})
}

// servedByWriter adds the header before the status line is written.
type servedByWriter struct {
	http.ResponseWriter
	who   *atomic.Pointer[string]
	wrote bool
}

func (w *servedByWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if who := w.who.Load(); who != nil {
			w.Header().Set(ServedByHeader, *who)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *servedByWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the wrapped writer.
func (w *servedByWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
