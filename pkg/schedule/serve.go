package schedule

import (
	"context"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/clock"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// External serves the schedules of a Set as external metrics in front of
// another external metrics provider: a request for a schedule's name is
// answered here (one item, the floor now, labelled schedule=NAME), every
// other request goes to Next.
type External struct {
	Next  cmprovider.ExternalMetricsProvider
	Set   *Set
	Clock clock.PassiveClock
}

var _ cmprovider.ExternalMetricsProvider = (*External)(nil)

// GetExternalMetric implements cmprovider.ExternalMetricsProvider. The
// selector is not used: a schedule has one value.
func (e *External) GetExternalMetric(ctx context.Context, namespace string, sel labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	s := e.Set.Get(info.Metric)
	if s == nil {
		return e.Next.GetExternalMetric(ctx, namespace, sel, info)
	}
	if !s.Allows(namespace) {
		return nil, apierrors.NewNotFound(external_metrics.Resource(info.Metric), "schedule "+info.Metric+" is not served to namespace "+namespace)
	}
	now := e.Clock.Now()
	return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{{
		MetricName:   s.Name,
		MetricLabels: map[string]string{"schedule": s.Name},
		Timestamp:    metav1.NewTime(now),
		Value:        *resource.NewQuantity(int64(s.Value(now)), resource.DecimalSI),
	}}}, nil
}

// ListAllExternalMetrics implements cmprovider.ExternalMetricsProvider:
// Next's metrics and the schedules, sorted.
func (e *External) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo {
	out := e.Next.ListAllExternalMetrics()
	for _, n := range e.Set.Names() {
		out = append(out, cmprovider.ExternalMetricInfo{Metric: n})
	}
	slices.SortFunc(out, func(a, b cmprovider.ExternalMetricInfo) int { return strings.Compare(a.Metric, b.Metric) })
	return slices.CompactFunc(out, func(a, b cmprovider.ExternalMetricInfo) bool { return a.Metric == b.Metric })
}
