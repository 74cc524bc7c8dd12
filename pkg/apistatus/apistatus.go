// Package apistatus turns the failure of a metrics request into the API
// status its client sees. It is the one place that decides the HTTP code
// of a failed read (503 when Prometheus or a cache cannot answer, 500 when
// Prometheus rejects a configured query, 504 when the request ran out of
// time, 499 when its client went away) and what the message may say.
//
// A message names only what the caller may see: the metric, the resource
// and the rule's place in the configuration. The Prometheus URL, the
// rendered PromQL and Prometheus' own error text go to the log, under a
// request id that the message carries: the request's audit ID (the
// Audit-ID header the API server answers with) when it has one.
package apistatus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/audit"

	"github.com/promscaler/promscaler/pkg/promclient"
)

// StatusClientClosedRequest is the (nginx-style) code answered when the
// client hung up before the answer; nobody reads it, but it keeps such
// requests apart from server errors in the request metrics.
const StatusClientClosedRequest = 499

// ErrClientGone is the cancellation cause when the client hung up.
var ErrClientGone = errors.New("the client closed the request")

// RequestID returns the id under which a request's failure is logged: its
// audit ID when the API server's handler chain gave it one, else a fresh
// random id.
func RequestID(ctx context.Context) string {
	if id, ok := audit.AuditIDFrom(ctx); ok && id != "" {
		return string(id)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// FromError returns the API status for err, a failure while answering the
// request described by what (e.g. "metric x for pods (rules[0])"): err
// itself when it already is an API status, else a typed status whose
// message holds what, the class of the failure and a request id, and never
// err's text. err is logged with the request id, unless the client went
// away (not worth a log line, prometheus-adapter#292).
func FromError(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	if Gone(ctx, err) {
		return ClientGone()
	}
	id := RequestID(ctx)
	logFailure(err, id, what)
	ref := fmt.Sprintf("request id %s, details in the adapter's log", id)
	var (
		pe       *promclient.Error
		tooLarge *promclient.AnswerTooLargeError
		waiting  *promclient.TooManyWaitingError
	)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return apierrors.NewTimeoutError(fmt.Sprintf("%s: no answer before the request deadline (%s)", what, ref), 0)
	case errors.As(err, &tooLarge):
		// The limit and its flag, so that the operator knows what to raise.
		return apierrors.NewServiceUnavailable(fmt.Sprintf("%s: Prometheus' %s (%s)", what, tooLarge, ref))
	case errors.As(err, &waiting):
		// The backend and the bound: the other backends' metrics still answer.
		return apierrors.NewServiceUnavailable(fmt.Sprintf("%s: %s (%s)", what, waiting, ref))
	case promclient.IsUnavailable(err) && errors.As(err, &pe):
		how := pe.Outcome
		if pe.StatusCode != 0 {
			how = fmt.Sprintf("%s, HTTP %d", how, pe.StatusCode)
		}
		return apierrors.NewServiceUnavailable(fmt.Sprintf("%s: Prometheus did not answer (%s; %s)", what, how, ref))
	case promclient.IsBadQuery(err):
		return internal(fmt.Sprintf("%s: Prometheus rejected the query (check the rule's query; %s)", what, ref))
	default:
		return internal(fmt.Sprintf("%s: internal error (%s)", what, ref))
	}
}

// Gone reports whether err, or ctx, says that the client went away.
func Gone(ctx context.Context, err error) bool {
	if errors.Is(context.Cause(ctx), ErrClientGone) || errors.Is(err, ErrClientGone) {
		return true
	}
	return errors.Is(ctx.Err(), context.Canceled) || (ctx.Err() == nil && errors.Is(err, context.Canceled))
}

// ClientGone is the status of a request whose client hung up.
func ClientGone() *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    StatusClientClosedRequest,
		Reason:  metav1.StatusReasonUnknown,
		Message: ErrClientGone.Error(),
	}}
}

// internal is a 500 with the message as given: apierrors.NewInternalError
// would prefix it with "Internal error occurred: " and carry it as a cause.
func internal(msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonInternalError,
		Message: msg,
	}}
}

// Internal is a 500 with a formatted message (no stack trace, no cause).
func Internal(format string, args ...any) *apierrors.StatusError {
	return internal(fmt.Sprintf(format, args...))
}

// Unavailable is FromError for a failure that is the backend's or a
// cache's whatever its type: a 503 (unless the client went away or the
// request ran out of time), with err in the log only.
func Unavailable(ctx context.Context, what string, err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	if Gone(ctx, err) {
		return ClientGone()
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return FromError(ctx, what, err)
	}
	id := RequestID(ctx)
	logFailure(err, id, what)
	return apierrors.NewServiceUnavailable(fmt.Sprintf("%s: not available (request id %s, details in the adapter's log)", what, id))
}
