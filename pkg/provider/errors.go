package provider

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/apistatus"
)

// metricNotFound is the library's "metric not found" error (for the object
// name, when not "") with the reason appended, so that `kubectl get --raw`
// says why: the message keeps the library's wording as its prefix for
// tools that match it.
func metricNotFound(gr schema.GroupResource, metric, name, why string) *apierrors.StatusError {
	e := cmprovider.NewMetricNotFoundError(gr, metric)
	if name != "" {
		e = cmprovider.NewMetricNotFoundForError(gr, metric, name)
	}
	if why != "" {
		e.ErrStatus.Message += ": " + why
	}
	return e
}

// unavailable is a 503 saying what could not be answered and why.
func unavailable(format string, args ...any) *apierrors.StatusError {
	return apierrors.NewServiceUnavailable(fmt.Sprintf(format, args...))
}

// badRequest is a 400 with a message.
func badRequest(format string, args ...any) *apierrors.StatusError {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}

// forbidden is a 403 with a message.
func forbidden(format string, args ...any) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: fmt.Sprintf(format, args...),
	}}
}

// internal is a 500 with context and no stack trace.
func internal(format string, args ...any) *apierrors.StatusError {
	return apistatus.Internal(format, args...)
}
