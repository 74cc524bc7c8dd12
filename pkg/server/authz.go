package server

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/promscaler/promscaler/pkg/apistatus"
)

// The adapter asks the API server whether a client may read a metric
// (delegated authorization: a SubjectAccessReview per request not already
// decided recently). When the API server cannot answer, the library's
// authorization filter answers 500 with the error's text, which holds the
// API server's address. An outage of the API server is a 503 for the
// client: authorizationUnavailable rewrites that answer, and only that one.

// authzFailure is where the authorizer leaves the error of a request it
// could not decide; it travels in the request's context.
type authzFailure struct {
	failed atomic.Pointer[authzError]
}

type authzError struct {
	ctx context.Context
	err error
}

type authzFailureKey struct{}

// recordingAuthorizer is an Authorizer that remembers, in the request's
// authzFailure, the error of a request it did not allow. The library's
// authorization filter calls Authorize; the other methods pass through.
type recordingAuthorizer struct {
	authorizer.Authorizer
}

var _ authorizer.Authorizer = recordingAuthorizer{}

// Authorize implements authorizer.Authorizer.
func (a recordingAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	d, reason, err := a.Authorizer.Authorize(ctx, attrs)
	if err != nil && d != authorizer.DecisionAllow {
		if f, ok := ctx.Value(authzFailureKey{}).(*authzFailure); ok {
			f.failed.Store(&authzError{ctx: ctx, err: err})
		}
	}
	return d, reason, err
}

// recordAuthorizationFailures makes gc's authorizer record its errors for
// authorizationUnavailable.
func recordAuthorizationFailures(gc *genericapiserver.Config) {
	if gc.Authorization.Authorizer != nil {
		gc.Authorization.Authorizer = recordingAuthorizer{gc.Authorization.Authorizer}
	}
}

// unavailableStatus is the Status of a request whose authorization failed
// with err: a 503 (or what apistatus says when the request ran out of time
// or its client went away), the error in the log only.
func unavailableStatus(ctx context.Context, err error) *metav1.Status {
	serr := apistatus.Unavailable(ctx, "authorizing the request with the Kubernetes API server", err)
	var se *apierrors.StatusError
	if !errors.As(serr, &se) {
		return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
			Message: "authorizing the request with the Kubernetes API server: not available"}
	}
	s := se.ErrStatus
	s.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if s.Code == 0 {
		s.Code = http.StatusServiceUnavailable
	}
	if s.Details == nil && s.Code == http.StatusServiceUnavailable {
		s.Details = &metav1.StatusDetails{RetryAfterSeconds: 1}
	}
	return &s
}
