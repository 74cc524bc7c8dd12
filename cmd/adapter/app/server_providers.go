package app

import (
	"context"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/responsewriter"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/config"
)

// defaultProviders is the providers factory the server uses.
//
// TODO(provider): replace with pkg/provider's factory once it exists; until
// then the server starts, serves the API discovery documents, and answers
// every metric request with the library's "not found".
func defaultProviders(ProviderDeps) (*Providers, error) {
	p := placeholderProvider{}
	return &Providers{
		Custom:      p,
		External:    p,
		ApplyConfig: func(*config.Config) error { return nil },
	}, nil
}

// placeholderProvider serves no metric: lists are empty, lookups are 404s.
type placeholderProvider struct{}

var (
	_ provider.CustomMetricsProvider   = placeholderProvider{}
	_ provider.ExternalMetricsProvider = placeholderProvider{}
)

// GetMetricByName implements provider.CustomMetricsProvider.
func (placeholderProvider) GetMetricByName(_ context.Context, name types.NamespacedName, info provider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValue, error) {
	return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
}

// GetMetricBySelector implements provider.CustomMetricsProvider.
func (placeholderProvider) GetMetricBySelector(_ context.Context, _ string, _ labels.Selector, info provider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValueList, error) {
	return nil, provider.NewMetricNotFoundError(info.GroupResource, info.Metric)
}

// ListAllMetrics implements provider.CustomMetricsProvider.
func (placeholderProvider) ListAllMetrics() []provider.CustomMetricInfo { return nil }

// GetExternalMetric implements provider.ExternalMetricsProvider.
func (placeholderProvider) GetExternalMetric(_ context.Context, _ string, _ labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	return nil, provider.NewMetricNotFoundError(schema.GroupResource{Group: "external.metrics.k8s.io"}, info.Metric)
}

// ListAllExternalMetrics implements provider.ExternalMetricsProvider.
func (placeholderProvider) ListAllExternalMetrics() []provider.ExternalMetricInfo { return nil }

// statusClientClosedRequest is the (nginx-style) code answered when the
// client hung up before the answer; nobody reads it, but it keeps such
// requests apart from server errors in the request metrics.
const statusClientClosedRequest = 499

// quietError turns the error of a request whose client went away into a
// typed API status. A plain error would be logged by the API server as an
// internal error at default verbosity; a client hanging up is not one
// (prometheus-adapter#292). Other errors pass through unchanged.
func quietError(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return apierrors.NewTimeoutError("the metrics backend did not answer before the request deadline", 0)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    statusClientClosedRequest,
		Reason:  metav1.StatusReasonUnknown,
		Message: "the client closed the request",
	}}
}

// quietCustomProvider applies quietError to a custom metrics provider.
type quietCustomProvider struct{ provider.CustomMetricsProvider }

// GetMetricByName implements provider.CustomMetricsProvider.
func (q quietCustomProvider) GetMetricByName(ctx context.Context, name types.NamespacedName, info provider.CustomMetricInfo, sel labels.Selector) (*custom_metrics.MetricValue, error) {
	v, err := q.CustomMetricsProvider.GetMetricByName(ctx, name, info, sel)
	return v, quietError(ctx, err)
}

// GetMetricBySelector implements provider.CustomMetricsProvider.
func (q quietCustomProvider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info provider.CustomMetricInfo, sel labels.Selector) (*custom_metrics.MetricValueList, error) {
	v, err := q.CustomMetricsProvider.GetMetricBySelector(ctx, namespace, selector, info, sel)
	return v, quietError(ctx, err)
}

// quietExternalProvider applies quietError to an external metrics provider.
type quietExternalProvider struct {
	provider.ExternalMetricsProvider
}

// GetExternalMetric implements provider.ExternalMetricsProvider.
func (q quietExternalProvider) GetExternalMetric(ctx context.Context, namespace string, sel labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	v, err := q.ExternalMetricsProvider.GetExternalMetric(ctx, namespace, sel, info)
	return v, quietError(ctx, err)
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

// WriteHeader implements http.ResponseWriter.
func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap implements responsewriter.UserProvidedDecorator.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// wrapResponseWriter keeps the optional interfaces (Flusher, Hijacker,
// CloseNotifier) the API server's handlers rely on.
func wrapResponseWriter(rec *statusRecorder) http.ResponseWriter {
	return responsewriter.WrapForHTTP1Or2(rec)
}
