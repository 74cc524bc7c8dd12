package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/endpoints/responsewriter"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/servertiming"
	"github.com/promscaler/promscaler/internal/turns"
	"github.com/promscaler/promscaler/pkg/apistatus"
)

// The wrappers a request passes, outermost first. Everything between
// withReadyzDetails and servertiming.Handler is the generic API server's
// own chain (genericapiserver.DefaultBuildHandlerChain: panic recovery,
// request info, the in-flight limit, authentication, authorization, audit,
// the request timeout...).
//
//  1. instrumentRequests: counts and times every request by metrics API
//     and code, stamps when it entered the chain (arrivalTime: the time a
//     "now" query's shared answer must not be older than), gives it its
//     claim on the answer turns (internal/turns) and detaches the client's
//     cancellation from the chain (detachClientCancel).
//  2. authorizationUnavailable: a request the API server could not
//     authorize is a 503, not the library's 500 naming its address.
//  3. withReadyzDetails: /readyz?verbose also lists states that are not
//     readiness failures.
//  4. the generic API server's chain.
//  5. servertiming.Handler: the Prometheus wait announced in Server-Timing.
//  6. badMetricLabelSelector: a 400 for an unparsable metricLabelSelector.
//  7. the metrics APIs (installMetricsAPIs), whose provider calls run
//     quietly (quietCustomProvider, quietExternalProvider): the client's
//     cancellation restored, the answer built in its turn (internal/turns), and
//     a hang-up or deadline a typed status.

// buildHandlerChain is the generic server's BuildHandlerChainFunc: the
// wrappers above around the API handler. details is read per request.
func buildHandlerChain(m *metrics.Metrics, turns *turns.Turns, details func() []string) func(http.Handler, *genericapiserver.Config) http.Handler {
	return func(h http.Handler, gc *genericapiserver.Config) http.Handler {
		chain := genericapiserver.DefaultBuildHandlerChain(servertiming.Handler(badMetricLabelSelector(h)), gc)
		chain = withReadyzDetails(chain, details)
		return instrumentRequests(authorizationUnavailable(chain), m, turns)
	}
}

// instrumentRequests counts and times every request by metrics API and
// code. It also records when the request entered the chain (arrivalTime),
// gives it its claim on turns (internal/turns: given back at the answer's first
// write or when the handler returns) and keeps a client hanging up from
// reaching the chain as a cancellation (see detachClientCancel).
func instrumentRequests(next http.Handler, m *metrics.Metrics, turns *turns.Turns) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		ctx, t := turns.Begin(context.WithValue(r.Context(), arrivalKey{}, start))
		r = r.WithContext(ctx)
		var out responsewriter.UserProvidedDecorator = rec
		if t != nil {
			defer t.End()
			out = &turnWriter{ResponseWriter: rec, t: t}
		}
		// WrapForHTTP1Or2 keeps the optional interfaces (Flusher, Hijacker,
		// CloseNotifier) the API server's handlers rely on.
		next.ServeHTTP(responsewriter.WrapForHTTP1Or2(out), detachClientCancel(r))
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		api := apiOf(r.URL.Path)
		m.APIRequests.WithLabelValues(api, strconv.Itoa(code)).Inc()
		m.APIRequestDuration.WithLabelValues(api).Observe(time.Since(start).Seconds())
	})
}

// apiOf classifies a request path by metrics API for the request metrics.
func apiOf(path string) string {
	switch {
	case strings.HasPrefix(path, "/apis/custom.metrics.k8s.io/"), path == "/apis/custom.metrics.k8s.io":
		return metrics.APICustom
	case strings.HasPrefix(path, "/apis/external.metrics.k8s.io/"), path == "/apis/external.metrics.k8s.io":
		return metrics.APIExternal
	case strings.HasPrefix(path, "/apis/metrics.k8s.io/"), path == "/apis/metrics.k8s.io":
		return metrics.APIResource
	}
	return metrics.APIOther
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

// arrivalKey is the context key of the time a request entered the handler
// chain (instrumentRequests).
type arrivalKey struct{}

// arrivalTime is the Prometheus clients' ArrivalFunc: when the request
// entered the handler chain, or else the API server's received timestamp
// (requests that did not come through instrumentRequests, e.g. tests of the
// inner chain). Both are no earlier than the request's bytes reached the
// server, so a "now" query's answer shared by that rule (pkg/promclient:
// one that landed after the request arrived) is never older than the
// request.
func arrivalTime(ctx context.Context) (time.Time, bool) {
	if t, ok := ctx.Value(arrivalKey{}).(time.Time); ok {
		return t, true
	}
	return request.ReceivedTimestampFrom(ctx)
}

// clientContextKey carries the request's original context (cancelled when
// the client hangs up) past the API server's handler chain.
type clientContextKey struct{}

// detachClientCancel hands the API server's handler chain a context that a
// client hanging up does not cancel (its own request timeout still
// applies): otherwise the chain's timeout filter treats the hang-up as a
// timeout, aborts the handler and logs two errors per request
// (prometheus-adapter#292). The providers still stop at once: withClient
// restores the client's cancellation for them.
func detachClientCancel(r *http.Request) *http.Request {
	orig := r.Context()
	return r.WithContext(context.WithValue(context.WithoutCancel(orig), clientContextKey{}, orig))
}

// withClient returns ctx, also cancelled (with cause apistatus.ErrClientGone) when the
// request's client hangs up.
func withClient(ctx context.Context) (context.Context, context.CancelFunc) {
	client, ok := ctx.Value(clientContextKey{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(client, func() { cancel(apistatus.ErrClientGone) })
	return ctx, func() {
		stop()
		cancel(nil)
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

// withReadyzDetails appends lines to the verbose readiness answer
// (/readyz?verbose): states an operator should see that are not readiness
// failures (a Prometheus backend down, a configuration file rejected).
// Each line starts with "[i]"; the status code is the checks' own.
func withReadyzDetails(next http.Handler, details func() []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || !r.URL.Query().Has("verbose") {
			next.ServeHTTP(w, r)
			return
		}
		lines := details()
		if len(lines) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		buf := &bufferedResponse{header: w.Header()}
		next.ServeHTTP(buf, r)
		if buf.code == 0 {
			buf.code = http.StatusOK
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(buf.code)
		_, _ = w.Write(buf.body.Bytes())
		var b strings.Builder
		b.WriteString("\nnot readiness failures:\n")
		for _, l := range lines {
			b.WriteString("[i]" + l + "\n")
		}
		_, _ = io.WriteString(w, b.String())
	})
}

// bufferedResponse holds an answer so that lines can be added to it.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.body.Write(p)
}

// customMetricsPrefix is the path prefix of every custom metrics request.
const customMetricsPrefix = "/apis/" + "custom.metrics.k8s.io" + "/"

// badMetricLabelSelector answers a custom metrics request whose
// metricLabelSelector does not parse with a 400 naming it, before
// custom-metrics-apiserver's storage, which passes the parser's error on
// as a 500 (the upstream change to propose is in docs/performance.md). It
// runs after authentication and authorization: an unauthorized caller
// learns nothing from it.
func badMetricLabelSelector(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, customMetricsPrefix) {
			if sel := r.URL.Query().Get("metricLabelSelector"); sel != "" {
				if _, err := labels.Parse(sel); err != nil {
					writeBadRequest(w, fmt.Sprintf("invalid metricLabelSelector %q: %v", sel, err))
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// writeBadRequest writes a 400 Status with msg.
func writeBadRequest(w http.ResponseWriter, msg string) {
	body, err := json.Marshal(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: http.StatusBadRequest,
		Reason: metav1.StatusReasonBadRequest, Message: msg,
	})
	if err != nil { // a Status always encodes
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
}

// quietly runs a provider call with withClient's context, then waits for
// the request's turn to build its answer (internal/turns), and turns the error of
// a request whose client went away, or that ran out of time, into a typed
// API status: a plain error would be logged by the API server as an
// internal error, and a client hanging up is not one (apistatus.FromError:
// 499, or 504 for the deadline). Other errors pass through unchanged.
func quietly[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := withClient(ctx)
	defer cancel()
	v, err := call(ctx)
	if err == nil {
		// The Prometheus client took the turn when the data came in; a
		// provider that called none takes it here.
		if err = turns.Take(ctx); err != nil {
			var zero T
			v = zero
		}
	}
	if err != nil && ctx.Err() != nil {
		err = apistatus.FromError(ctx, "metrics request", err)
	}
	return v, err
}

// quietCustomProvider runs a custom metrics provider's calls quietly.
type quietCustomProvider struct {
	cmprovider.CustomMetricsProvider
}

// GetMetricByName implements cmprovider.CustomMetricsProvider.
func (q quietCustomProvider) GetMetricByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, sel labels.Selector) (*custom_metrics.MetricValue, error) {
	return quietly(ctx, func(ctx context.Context) (*custom_metrics.MetricValue, error) {
		return q.CustomMetricsProvider.GetMetricByName(ctx, name, info, sel)
	})
}

// GetMetricBySelector implements cmprovider.CustomMetricsProvider.
func (q quietCustomProvider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, sel labels.Selector) (*custom_metrics.MetricValueList, error) {
	return quietly(ctx, func(ctx context.Context) (*custom_metrics.MetricValueList, error) {
		return q.CustomMetricsProvider.GetMetricBySelector(ctx, namespace, selector, info, sel)
	})
}

// quietExternalProvider runs an external metrics provider's calls quietly.
type quietExternalProvider struct {
	cmprovider.ExternalMetricsProvider
}

// GetExternalMetric implements cmprovider.ExternalMetricsProvider.
func (q quietExternalProvider) GetExternalMetric(ctx context.Context, namespace string, sel labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	return quietly(ctx, func(ctx context.Context) (*external_metrics.ExternalMetricValueList, error) {
		return q.ExternalMetricsProvider.GetExternalMetric(ctx, namespace, sel, info)
	})
}
