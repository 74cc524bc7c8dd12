package promclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/truncate"
)

// maxQueryInError bounds how much of a query or matcher list an error
// message repeats: enough to recognise the rule, never a 40 KB regex.
const maxQueryInError = 160

// maxDetailInError bounds how much of a non-Prometheus error body (a proxy's
// HTML page, say) an error message repeats.
const maxDetailInError = 200

// Error is returned by every Client call that fails. It says which endpoint
// and which query failed and how (Outcome, one of the metrics.PromOutcome*
// values), and wraps the cause. Its message never holds credentials: request
// URLs are reduced to scheme, host and path.
type Error struct {
	// Endpoint is the Prometheus API endpoint (metrics.Endpoint*).
	Endpoint string
	// Query is the PromQL query, or the series matchers joined by ", ",
	// truncated for display.
	Query string
	// Outcome classifies the failure (metrics.PromOutcome*).
	Outcome string
	// StatusCode is the HTTP status Prometheus answered, 0 when none.
	StatusCode int
	// Err is the underlying cause.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("prometheus %s %q: %v", e.Endpoint, e.Query, e.Err)
}

// Unwrap returns the cause, so errors.Is(err, context.DeadlineExceeded) works.
func (e *Error) Unwrap() error { return e.Err }

// IsBadQuery reports whether err is Prometheus rejecting the query itself
// (HTTP 400/422: a PromQL or matcher error, usually in the configuration).
// Such errors do not go away by retrying.
func IsBadQuery(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Outcome == metrics.PromOutcomeBadQuery
}

// IsUnavailable reports whether err means Prometheus could not answer
// (unreachable, 5xx, timeout, unreadable or oversized answer): the backend is at fault,
// not the query. API errors for such failures are 503s.
func IsUnavailable(err error) bool {
	var pe *Error
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Outcome {
	case metrics.PromOutcomeServerError, metrics.PromOutcomeBadResponse,
		metrics.PromOutcomeTimeout, metrics.PromOutcomeNetwork,
		metrics.PromOutcomeBackendDown, metrics.PromOutcomeBusy,
		metrics.PromOutcomeAnswerTooLarge:
		return true
	}
	return false
}

// classify turns a client_golang or transport error into an *Error with an
// outcome, stripping anything that might carry credentials or a huge URL.
// ctxErr is the error of the context the request ran under and status the
// HTTP status of the last answer (0 when none arrived).
func classify(endpoint, query string, err error, ctxErr error, status int) *Error {
	e := &Error{Endpoint: endpoint, Query: truncate.String(query, maxQueryInError), StatusCode: status}
	var (
		apiErr   *v1.Error
		tooLarge *AnswerTooLargeError
		waiting  *TooManyWaitingError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctxErr, context.DeadlineExceeded):
		e.Outcome = metrics.PromOutcomeTimeout
		e.Err = fmt.Errorf("no answer within the timeout: %w", context.DeadlineExceeded)
	case errors.Is(err, context.Canceled) || errors.Is(ctxErr, context.Canceled):
		e.Outcome = metrics.PromOutcomeCanceled
		e.Err = context.Canceled
	case errors.Is(err, ErrBackendDown):
		e.Outcome = metrics.PromOutcomeBackendDown
		e.Err = ErrBackendDown
	case errors.As(err, &waiting):
		e.Outcome = metrics.PromOutcomeBusy
		e.Err = waiting
	case errors.Is(err, ErrBackendBusy):
		e.Outcome = metrics.PromOutcomeBusy
		e.Err = ErrBackendBusy
	case errors.As(err, &tooLarge):
		e.Outcome = metrics.PromOutcomeAnswerTooLarge
		e.Err = tooLarge
	case errors.As(err, &apiErr):
		apiErr = withBodyError(apiErr)
		e.Err = describeAPIError(apiErr)
		switch {
		case apiErr.Type == v1.ErrTimeout || apiErr.Type == v1.ErrCanceled:
			// Prometheus gave up evaluating within the timeout= sent.
			e.Outcome = metrics.PromOutcomeTimeout
		case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
			e.Outcome = metrics.PromOutcomeBadQuery
		case status >= 200 && status < 300:
			// A success code with a body that does not decode (truncated
			// JSON, unexpected shape) or a body saying "error".
			if apiErr.Type == v1.ErrBadData || apiErr.Type == v1.ErrExec {
				e.Outcome = metrics.PromOutcomeBadQuery
			} else {
				e.Outcome = metrics.PromOutcomeBadResponse
			}
		default:
			// 5xx, and 4xx other than 400/422: 401/403 (credentials),
			// 404 (wrong URL), 414/431 from a proxy.
			e.Outcome = metrics.PromOutcomeServerError
		}
	default:
		e.Outcome = metrics.PromOutcomeNetwork
		e.Err = redactURLError(err)
	}
	return e
}

// withBodyError recovers Prometheus' own error envelope from the body of an
// answer client_golang did not decode (it only decodes 400 and 422), so a
// 503 {"errorType":"timeout"} is known as a timeout, not a generic 503.
func withBodyError(err *v1.Error) *v1.Error {
	if err.Detail == "" || err.Detail[0] != '{' {
		return err
	}
	var env struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	if json.Unmarshal([]byte(err.Detail), &env) != nil || env.Status != "error" || env.ErrorType == "" {
		return err
	}
	return &v1.Error{Type: v1.ErrorType(env.ErrorType), Msg: env.Error}
}

// describeAPIError renders a client_golang API error with a bounded, single
// line detail (the body of a non-Prometheus answer, e.g. a proxy page).
func describeAPIError(err *v1.Error) error {
	msg := fmt.Sprintf("%s: %s", err.Type, err.Msg)
	if d := strings.Join(strings.Fields(err.Detail), " "); d != "" {
		msg += ": " + truncate.String(d, maxDetailInError)
	}
	return errors.New(msg)
}

// redactURLError replaces a *url.Error's URL (which carries the query string,
// and possibly user info) by scheme://host/path, keeping the cause.
func redactURLError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	u, perr := url.Parse(ue.URL)
	where := "prometheus"
	if perr == nil {
		where = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	}
	return fmt.Errorf("%s %s: %w", ue.Op, where, ue.Err)
}
