package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/promclient"
)

// notFound is the library's "metric not found" error with the reason
// appended, so that `kubectl get --raw` says why: the message keeps the
// library's wording as its prefix for tools that match it.
func notFound(gr schema.GroupResource, metric, why string) *apierrors.StatusError {
	e := cmprovider.NewMetricNotFoundError(gr, metric)
	if why != "" {
		e.ErrStatus.Message += ": " + why
	}
	return e
}

// notFoundFor is notFound for one named object.
func notFoundFor(gr schema.GroupResource, metric, name, why string) *apierrors.StatusError {
	e := cmprovider.NewMetricNotFoundForError(gr, metric, name)
	if why != "" {
		e.ErrStatus.Message += ": " + why
	}
	return e
}

// unavailable is a 503 saying what could not be answered and why.
func unavailable(format string, args ...any) *apierrors.StatusError {
	return apierrors.NewServiceUnavailable(fmt.Sprintf(format, args...))
}

// queryError turns a failed Prometheus query into the API error the client
// sees: never a value, never a stack trace. what names the request (metric
// and rule) for context; the *promclient.Error message holds the endpoint, a
// truncated query and the cause, and no credentials.
//
//   - Prometheus unreachable, timing out, answering 5xx or garbage: 503, so
//     the HPA keeps its current scale and retries;
//   - Prometheus rejecting the query (a configuration error): 500;
//   - the client went away: 499-style cancellation is reported as a 503
//     "request canceled" (nobody reads it).
func queryError(what string, err error) *apierrors.StatusError {
	switch {
	case errors.Is(err, context.Canceled):
		return unavailable("%s: request canceled", what)
	case promclient.IsUnavailable(err):
		return unavailable("%s: Prometheus did not answer: %v", what, err)
	case promclient.IsBadQuery(err):
		return apierrors.NewInternalError(fmt.Errorf("%s: Prometheus rejected the query (check the rule's metricsQuery): %w", what, err))
	default:
		return apierrors.NewInternalError(fmt.Errorf("%s: %w", what, err))
	}
}

// badRequest is a 400 with a message.
func badRequest(format string, args ...any) *apierrors.StatusError {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}

// internal is a 500 with context and no stack trace.
func internal(format string, args ...any) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonInternalError,
		Message: fmt.Sprintf(format, args...),
	}}
}
