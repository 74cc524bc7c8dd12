package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/scale"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/pkg/autoscaler"
)

// The reads of one reconcile, exported so that other tools (autoscaler
// explain) fetch exactly what the controller fetches.

// GetScale resolves hpa's scale target through mapper and reads its /scale,
// each request bounded by timeout, trying every mapping of the kind as
// upstream does. On failure it returns the error the core's FailedGetScale
// reports (upstream's event text) and the wrapped error a reconcile
// returns.
func GetScale(ctx context.Context, scales scale.ScalesGetter, mapper RESTMapper, timeout time.Duration, hpa *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.Scale, schema.GroupResource, error, error) {
	ref := hpa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, schema.GroupResource{}, err, fmt.Errorf("invalid API version in scale target reference: %w", err)
	}
	mappings, err := mapper.RESTMappings(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	if err != nil {
		return nil, schema.GroupResource{}, err, fmt.Errorf("unable to determine resource for scale target reference: %w", err)
	}
	var firstErr error
	for i, m := range mappings {
		gr := m.Resource.GroupResource()
		rctx, cancel := context.WithTimeout(ctx, timeout)
		sc, err := scales.Scales(hpa.Namespace).Get(rctx, gr, ref.Name, metav1.GetOptions{})
		cancel()
		if err == nil {
			return sc, gr, nil, nil
		}
		if i == 0 {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = errors.New("unrecognized resource")
	}
	return nil, schema.GroupResource{}, firstErr, fmt.Errorf("failed to query scale subresource for %s/%s/%s: %w", ref.Kind, hpa.Namespace, ref.Name, firstErr)
}

// MetricsReader reads the values of an HPA's metric specs through a
// MetricsClient and converts them with the core's From* helpers.
type MetricsReader struct {
	// Client reads the metrics APIs.
	Client MetricsClient
	// Timeout bounds each metrics API read.
	Timeout time.Duration
	// Clock times the reads; nil means the real clock.
	Clock clock.PassiveClock
	// Observed, if set, is called after each API read with the metric
	// source type and how long the read took.
	Observed func(source string, d time.Duration)
	// Failed, if set, is called for each spec whose values could not be
	// read (an API error or an empty answer).
	Failed func(source autoscalingv2.MetricSourceType)
}

// Read returns one MetricValues per spec, in order, for the pods selector
// matches in namespace. The resource metrics of those pods are listed once
// however many Resource and ContainerResource specs there are. Specs the
// core rejects before reading (missing source, invalid metric selector,
// unknown type) are not read; the core reports them.
func (r *MetricsReader) Read(ctx context.Context, namespace string, selector labels.Selector, specs []autoscalingv2.MetricSpec) []autoscaler.MetricValues {
	f := fetcher{r: r, ctx: ctx, namespace: namespace, selector: selector}
	out := make([]autoscaler.MetricValues, len(specs))
	for i := range specs {
		out[i] = f.fetch(&specs[i])
	}
	return out
}

// fetcher reads the metrics of one reconcile.
type fetcher struct {
	r         *MetricsReader
	ctx       context.Context
	namespace string
	selector  labels.Selector

	podMetricsDone bool
	podMetrics     []metricsapi.PodMetrics
	podMetricsErr  error
}

func (f *fetcher) resourceMetrics() ([]metricsapi.PodMetrics, error) {
	if !f.podMetricsDone {
		f.podMetricsDone = true
		f.podMetrics, f.podMetricsErr = timed(f, string(autoscalingv2.ResourceMetricSourceType), func(ctx context.Context) ([]metricsapi.PodMetrics, error) {
			return f.r.Client.PodResourceMetrics(ctx, f.namespace, f.selector)
		})
	}
	return f.podMetrics, f.podMetricsErr
}

// fetch reads the values of one metric spec.
func (f *fetcher) fetch(spec *autoscalingv2.MetricSpec) autoscaler.MetricValues {
	ns := f.namespace
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			return autoscaler.MetricValues{}
		}
		items, err := f.resourceMetrics()
		return f.count(spec.Type, autoscaler.FromPodMetrics(items, err, spec.Resource.Name, ""))
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource == nil {
			return autoscaler.MetricValues{}
		}
		items, err := f.resourceMetrics()
		return f.count(spec.Type, autoscaler.FromPodMetrics(items, err, spec.ContainerResource.Name, spec.ContainerResource.Container))
	}
	var id *autoscalingv2.MetricIdentifier
	switch {
	case spec.Type == autoscalingv2.PodsMetricSourceType && spec.Pods != nil:
		id = &spec.Pods.Metric
	case spec.Type == autoscalingv2.ObjectMetricSourceType && spec.Object != nil:
		id = &spec.Object.Metric
	case spec.Type == autoscalingv2.ExternalMetricSourceType && spec.External != nil:
		id = &spec.External.Metric
	default:
		return autoscaler.MetricValues{}
	}
	msel, err := metav1.LabelSelectorAsSelector(id.Selector)
	if err != nil {
		return autoscaler.MetricValues{Err: err}
	}
	switch spec.Type {
	case autoscalingv2.PodsMetricSourceType:
		items, err := timed(f, string(spec.Type), func(ctx context.Context) ([]customapi.MetricValue, error) {
			return f.r.Client.PodsCustomMetric(ctx, ns, id.Name, f.selector, msel)
		})
		return f.count(spec.Type, autoscaler.FromPodsCustomMetrics(items, err))
	case autoscalingv2.ObjectMetricSourceType:
		v, err := timed(f, string(spec.Type), func(ctx context.Context) (*customapi.MetricValue, error) {
			return f.r.Client.ObjectCustomMetric(ctx, ns, id.Name, spec.Object.DescribedObject, msel)
		})
		return f.count(spec.Type, autoscaler.FromObjectCustomMetric(v, err))
	}
	items, err := timed(f, string(spec.Type), func(ctx context.Context) ([]externalapi.ExternalMetricValue, error) {
		return f.r.Client.ExternalMetric(ctx, ns, id.Name, msel)
	})
	return f.count(spec.Type, autoscaler.FromExternalMetrics(items, err))
}

// count reports a failed read (an API error or an empty answer).
func (f *fetcher) count(source autoscalingv2.MetricSourceType, v autoscaler.MetricValues) autoscaler.MetricValues {
	if v.Err != nil && f.r.Failed != nil {
		f.r.Failed(source)
	}
	return v
}

// timed runs one metrics API read under the timeout and reports its
// duration.
func timed[T any](f *fetcher, source string, read func(context.Context) (T, error)) (T, error) {
	timeout := f.r.Timeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	clk := f.r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	ctx, cancel := context.WithTimeout(f.ctx, timeout)
	defer cancel()
	start := clk.Now()
	v, err := read(ctx)
	if f.r.Observed != nil {
		f.r.Observed(source, clk.Since(start))
	}
	return v, err
}
