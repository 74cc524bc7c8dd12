package apistatus

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/audit"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/promclient"
)

const secretQuery = `sum(secret_series{namespace="other-tenant"})`

func promErr(outcome string, status int, cause error) error {
	return &promclient.Error{Endpoint: "http://prometheus.internal:9090/api/v1/query", Query: secretQuery, Outcome: outcome, StatusCode: status, Err: cause}
}

func TestFromError(t *testing.T) {
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancelExpired()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	gone, goneCancel := context.WithCancelCause(context.Background())
	goneCancel(ErrClientGone)
	audited := audit.WithAuditContext(context.Background())
	audit.WithAuditID(audited, "8d3c1f7e-audit")

	for _, tc := range []struct {
		name     string
		ctx      context.Context
		err      error
		wantCode int32
		wantMsg  []string
	}{
		{"already a status", context.Background(), apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "m"), http.StatusNotFound, []string{"not found"}},
		{"Prometheus unreachable", context.Background(), promErr(metrics.PromOutcomeNetwork, 0, errors.New("dial tcp 10.1.2.3:9090: connection refused")),
			http.StatusServiceUnavailable, []string{"metric m: Prometheus did not answer (network_error; request id "}},
		{"Prometheus 5xx", context.Background(), promErr(metrics.PromOutcomeServerError, 502, errors.New("<html>bad gateway</html>")),
			http.StatusServiceUnavailable, []string{"Prometheus did not answer (server_error, HTTP 502; request id "}},
		{"Prometheus' own timeout", context.Background(), promErr(metrics.PromOutcomeTimeout, 0, context.DeadlineExceeded),
			http.StatusServiceUnavailable, []string{"Prometheus did not answer (timeout; request id "}},
		{"answer too large", context.Background(), promErr(metrics.PromOutcomeAnswerTooLarge, 200, &promclient.AnswerTooLargeError{Backend: "default", Limit: 16 << 20}),
			http.StatusServiceUnavailable, []string{"metric m: Prometheus' answer refused: longer than the 16777216-byte answer limit", "--prometheus-max-answer-bytes", "request id "}},
		{"too many waiting on a backend", context.Background(), promErr(metrics.PromOutcomeBusy, 0, &promclient.TooManyWaitingError{Backend: "thanos", Limit: 200}),
			http.StatusServiceUnavailable, []string{"metric m: request refused: 200 requests already wait on backend \"thanos\"", "--prometheus-max-waiting", "request id "}},
		{"query rejected", context.Background(), promErr(metrics.PromOutcomeBadQuery, 400, errors.New("parse error at "+secretQuery)),
			http.StatusInternalServerError, []string{"metric m: Prometheus rejected the query (check the rule's query; request id "}},
		{"anything else", context.Background(), errors.New("rendering " + secretQuery), http.StatusInternalServerError, []string{"metric m: internal error (request id "}},
		{"request deadline", expired, promErr(metrics.PromOutcomeTimeout, 0, context.DeadlineExceeded), http.StatusGatewayTimeout, []string{"no answer before the request deadline"}},
		{"client went away", canceled, promErr(metrics.PromOutcomeCanceled, 0, context.Canceled), StatusClientClosedRequest, []string{"the client closed the request"}},
		{"client went away (cause)", gone, errors.New("anything"), StatusClientClosedRequest, []string{"the client closed the request"}},
		{"audit ID is the request id", audited, promErr(metrics.PromOutcomeNetwork, 0, errors.New("refused")), http.StatusServiceUnavailable, []string{"request id 8d3c1f7e-audit,"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := FromError(tc.ctx, "metric m", tc.err)
			var se *apierrors.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("FromError = %v (%T), want an API status", err, err)
			}
			if se.ErrStatus.Code != tc.wantCode {
				t.Errorf("code = %d, want %d (%q)", se.ErrStatus.Code, tc.wantCode, se.ErrStatus.Message)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(se.ErrStatus.Message, m) {
					t.Errorf("message %q lacks %q", se.ErrStatus.Message, m)
				}
			}
			for _, leak := range []string{"prometheus.internal", "10.1.2.3", "secret_series", "other-tenant", "bad gateway"} {
				if strings.Contains(se.ErrStatus.Message, leak) {
					t.Errorf("message %q shows %q", se.ErrStatus.Message, leak)
				}
			}
		})
	}
	if FromError(context.Background(), "x", nil) != nil {
		t.Error("FromError(nil) is not nil")
	}
}

func TestUnavailable(t *testing.T) {
	err := Unavailable(context.Background(), "listing pods in namespace shop", errors.New("watch of https://10.0.0.1:6443 failed"))
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusServiceUnavailable {
		t.Fatalf("Unavailable = %v, want a 503", err)
	}
	if msg := se.ErrStatus.Message; !strings.Contains(msg, "listing pods in namespace shop: not available (request id ") || strings.Contains(msg, "10.0.0.1") {
		t.Errorf("message %q", msg)
	}
}

func TestRequestIDUnique(t *testing.T) {
	a, b := RequestID(context.Background()), RequestID(context.Background())
	if a == "" || a == b {
		t.Errorf("request ids %q and %q: want two different, non-empty", a, b)
	}
}
