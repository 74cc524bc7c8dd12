package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/responsewriter"
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

// authorizationUnavailable wraps the handler chain: a request whose
// authorization failed with an error (recorded by recordingAuthorizer) and
// was answered 500 for it is answered 503 instead, with a message naming
// the request id under which the error is logged, never the error.
func authorizationUnavailable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := &authzFailure{}
		aw := &authzWriter{ResponseWriter: w, failure: f}
		next.ServeHTTP(responsewriter.WrapForHTTP1Or2(aw), r.WithContext(context.WithValue(r.Context(), authzFailureKey{}, f)))
	})
}

// authzWriter turns the library's 500 for a failed authorization into a
// 503 Status and drops the library's body.
type authzWriter struct {
	http.ResponseWriter
	failure   *authzFailure
	rewritten bool
}

var _ responsewriter.UserProvidedDecorator = (*authzWriter)(nil)

// Unwrap implements responsewriter.UserProvidedDecorator.
func (w *authzWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// WriteHeader implements http.ResponseWriter.
func (w *authzWriter) WriteHeader(code int) {
	if w.rewritten {
		return
	}
	fe := w.failure.failed.Load()
	if code != http.StatusInternalServerError || fe == nil {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.rewritten = true
	status := unavailableStatus(fe.ctx, fe.err)
	body, err := json.Marshal(status)
	if err != nil {
		// A metav1.Status always encodes.
		w.ResponseWriter.WriteHeader(code)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	h.Set("Retry-After", "1")
	w.ResponseWriter.WriteHeader(int(status.Code))
	_, _ = w.ResponseWriter.Write(body)
}

// Write implements http.ResponseWriter.
func (w *authzWriter) Write(b []byte) (int, error) {
	if w.rewritten {
		// The library's text, which names the API server: dropped.
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
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
