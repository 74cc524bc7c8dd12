package promclient

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/metrics"
)

// scriptedTransport answers each request with the next of its results and
// counts the requests that reached it.
type scriptedTransport struct {
	calls  int
	result func(req *http.Request) (*http.Response, error)
}

func (t *scriptedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.calls++
	return t.result(req)
}

func answerWith(status int) (*http.Response, error) {
	return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(`{"status":"success"}`))}, nil
}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// send makes one request through rt and reads its answer to the end.
func send(t *testing.T, rt http.RoundTripper, ctx context.Context) error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://prometheus.invalid/api/v1/query", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

func newTestGuard(t *testing.T, cfg GuardConfig) (*Guard, *clocktesting.FakeClock, *metrics.Metrics) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	m := metrics.New()
	g, err := NewGuard("main", cfg, m, clk)
	if err != nil {
		t.Fatal(err)
	}
	return g, clk, m
}

func upGauge(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "promscaler_prometheus_up" {
			for _, s := range f.GetMetric() {
				if s.GetLabel()[0].GetValue() == "main" {
					return s.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatal("no promscaler_prometheus_up{backend=\"main\"}")
	return 0
}

func TestGuardBreaker(t *testing.T) {
	g, clk, m := newTestGuard(t, GuardConfig{BreakerFailures: 3, BreakerOpen: time.Second})
	failing := true
	next := &scriptedTransport{result: func(*http.Request) (*http.Response, error) {
		if failing {
			return nil, errRefused
		}
		return answerWith(http.StatusOK)
	}}
	rt := g.RoundTripper(next)
	ctx := context.Background()

	// Three connection errors reach the backend, then it is known down.
	for i := range 3 {
		if err := send(t, rt, ctx); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("request %d: %v, want the connection error", i, err)
		}
	}
	if err := send(t, rt, ctx); !errors.Is(err, ErrBackendDown) {
		t.Fatalf("after 3 failures: %v, want ErrBackendDown", err)
	}
	if next.calls != 3 {
		t.Errorf("the backend got %d requests, want 3 (none while down)", next.calls)
	}
	st := g.Status()
	if st.Up || st.ConsecutiveFailures != 3 || !st.RetryAt.Equal(clk.Now().Add(time.Second)) || !strings.Contains(st.LastError, "connection refused") {
		t.Errorf("status = %+v, want down, 3 failures, retry in 1s, last error connection refused", st)
	}
	if !strings.Contains(st.String(), "metric requests answer 503") {
		t.Errorf("status line %q does not say metric requests answer 503", st)
	}
	if got := upGauge(t, m); got != 0 {
		t.Errorf("promscaler_prometheus_up = %v while down, want 0", got)
	}
	if got := testutil.ToFloat64(g.down); got != 1 {
		t.Errorf("rejected{reason=backend_down} = %v, want 1", got)
	}

	// A failed probe opens the breaker for one period again, never longer,
	// however long the outage (here 45 probes: 45 s): the backend is asked
	// again within a period of its return. (A backoff doubling the period
	// kept a restarted Prometheus unasked for up to 30 s.)
	for i := range 45 {
		period := time.Second
		if i == 0 {
			st := g.Status()
			if !st.RetryAt.Equal(clk.Now().Add(period)) {
				t.Fatalf("retry at %v, want %v", st.RetryAt, clk.Now().Add(period))
			}
		}
		clk.Step(period - time.Millisecond)
		if err := send(t, rt, ctx); !errors.Is(err, ErrBackendDown) {
			t.Fatalf("before the %v period ended: %v, want ErrBackendDown", period, err)
		}
		clk.Step(time.Millisecond)
		calls := next.calls
		if err := send(t, rt, ctx); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("the probe after %v: %v, want it sent (and refused)", period, err)
		}
		if next.calls != calls+1 {
			t.Fatalf("the probe after %v did not reach the backend", period)
		}
	}

	// A probe that gets an answer closes the breaker.
	failing = false
	clk.Step(3 * time.Second)
	if err := send(t, rt, ctx); err != nil {
		t.Fatalf("the probe with the backend back: %v", err)
	}
	if err := send(t, rt, ctx); err != nil {
		t.Fatalf("after a successful probe: %v", err)
	}
	if st := g.Status(); !st.Up || st.ConsecutiveFailures != 0 {
		t.Errorf("status = %+v after an answer, want up and no failures", st)
	}
	if got := upGauge(t, m); got != 1 {
		t.Errorf("promscaler_prometheus_up = %v after an answer, want 1", got)
	}

	// Down again: the period starts from the first one.
	failing = true
	for range 3 {
		_ = send(t, rt, ctx)
	}
	if st := g.Status(); st.Up || !st.RetryAt.Equal(clk.Now().Add(time.Second)) {
		t.Errorf("status = %+v, want down with a 1s period again", st)
	}
}

func TestGuardCountsOnlyTimeoutsAndConnectionErrors(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	tests := []struct {
		name     string
		ctx      context.Context
		result   func(*http.Request) (*http.Response, error)
		wantDown bool
	}{
		{name: "connection refused", ctx: context.Background(), wantDown: true,
			result: func(*http.Request) (*http.Response, error) { return nil, errRefused }},
		{name: "timeout", ctx: expired, wantDown: true,
			result: func(r *http.Request) (*http.Response, error) { return nil, r.Context().Err() }},
		{name: "gateway timeout from a proxy", ctx: context.Background(), wantDown: true,
			result: func(*http.Request) (*http.Response, error) { return answerWith(http.StatusGatewayTimeout) }},
		{name: "timeout while reading the answer", ctx: context.Background(), wantDown: true,
			result: func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Body: io.NopCloser(&failingReader{err: context.DeadlineExceeded})}, nil
			}},
		{name: "caller canceled", ctx: canceled, wantDown: false,
			result: func(r *http.Request) (*http.Response, error) { return nil, r.Context().Err() }},
		{name: "Prometheus answers 503", ctx: context.Background(), wantDown: false,
			result: func(*http.Request) (*http.Response, error) { return answerWith(http.StatusServiceUnavailable) }},
		{name: "Prometheus answers 500", ctx: context.Background(), wantDown: false,
			result: func(*http.Request) (*http.Response, error) { return answerWith(http.StatusInternalServerError) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _, _ := newTestGuard(t, GuardConfig{BreakerFailures: 2})
			rt := g.RoundTripper(&scriptedTransport{result: tc.result})
			for range 2 {
				_ = send(t, rt, tc.ctx)
			}
			if got := !g.Status().Up; got != tc.wantDown {
				t.Errorf("down after 2 such requests = %v, want %v", got, tc.wantDown)
			}
		})
	}
}

type failingReader struct{ err error }

func (r *failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestGuardAnswerResetsFailures(t *testing.T) {
	g, _, _ := newTestGuard(t, GuardConfig{BreakerFailures: 3})
	fail := true
	rt := g.RoundTripper(&scriptedTransport{result: func(*http.Request) (*http.Response, error) {
		if fail {
			return nil, errRefused
		}
		return answerWith(http.StatusOK)
	}})
	for _, f := range []bool{true, true, false, true, true} {
		fail = f
		_ = send(t, rt, context.Background())
	}
	if st := g.Status(); !st.Up || st.ConsecutiveFailures != 2 {
		t.Errorf("status = %+v, want up with 2 consecutive failures (an answer between resets the count)", st)
	}
}

// TestGuardOneProbe: while the probe is in flight, the other requests fail
// at once; a probe its caller cancels lets the next request probe.
func TestGuardOneProbe(t *testing.T) {
	g, clk, _ := newTestGuard(t, GuardConfig{BreakerFailures: 1})
	var mode string
	next := &scriptedTransport{result: func(r *http.Request) (*http.Response, error) {
		switch mode {
		case "refuse":
			return nil, errRefused
		case "cancel":
			return nil, context.Canceled
		}
		return answerWith(http.StatusOK)
	}}
	rt := g.RoundTripper(next)
	mode = "refuse"
	_ = send(t, rt, context.Background())
	clk.Step(DefaultBreakerOpen)

	// The probe is admitted; until it ends no other request is.
	ok, probe := g.admit()
	if !ok || !probe {
		t.Fatalf("admit after the period = %v, %v; want the probe", ok, probe)
	}
	if err := send(t, rt, context.Background()); !errors.Is(err, ErrBackendDown) {
		t.Errorf("a request while the probe is in flight: %v, want ErrBackendDown", err)
	}
	if st := g.Status(); !st.RetryAt.IsZero() || !strings.Contains(st.String(), "a probe request is in flight") {
		t.Errorf("status while probing = %q", st)
	}
	g.record(outcomeNeutral, true, nil)

	// Canceled by its caller: neither an answer nor a failure; the next
	// request probes.
	mode = "cancel"
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	_ = send(t, rt, canceled)
	mode = "ok"
	if err := send(t, rt, context.Background()); err != nil {
		t.Errorf("the probe after a canceled one: %v", err)
	}
	if !g.Status().Up {
		t.Error("still down after a probe got an answer")
	}
}

func TestGuardConcurrencyBound(t *testing.T) {
	g, _, _ := newTestGuard(t, GuardConfig{MaxConcurrent: 2})
	next := &scriptedTransport{result: func(*http.Request) (*http.Response, error) { return answerWith(http.StatusOK) }}
	rt := g.RoundTripper(next)
	req, _ := http.NewRequest(http.MethodGet, "http://prometheus.invalid/", nil)
	// Two answers not yet read keep their slots.
	var open []*http.Response
	for range 2 {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, resp)
	}
	if _, err := rt.RoundTrip(req); !errors.Is(err, ErrBackendBusy) {
		t.Fatalf("third request with two in flight: %v, want ErrBackendBusy", err)
	}
	if next.calls != 2 {
		t.Errorf("the backend got %d requests, want 2", next.calls)
	}
	if got := testutil.ToFloat64(g.inFlight); got != 2 {
		t.Errorf("in flight = %v, want 2", got)
	}
	// Reading one to the end frees its slot (closing it after does not
	// free another); closing the other unread frees the second.
	_, _ = io.Copy(io.Discard, open[0].Body)
	open[0].Body.Close()
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatalf("after an answer was read: %v", err)
	}
	if _, err := rt.RoundTrip(req); !errors.Is(err, ErrBackendBusy) {
		t.Fatalf("with two in flight again: %v, want ErrBackendBusy", err)
	}
	open[1].Body.Close()
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatalf("after an answer was closed: %v", err)
	}
	if got := testutil.ToFloat64(g.busy); got != 2 {
		t.Errorf("rejected{reason=busy} = %v, want 2", got)
	}
	// Busy is not down.
	if !g.Status().Up {
		t.Error("a busy backend is marked down")
	}
}

// TestGuardAnswerBudget: the answers being read from one backend (until
// their bodies are closed) hold at most AnswerBudgetAnswers times
// MaxAnswerBytes together; one more is refused, and closing one makes room.
func TestGuardAnswerBudget(t *testing.T) {
	const limit = 1000
	g, _, _ := newTestGuard(t, GuardConfig{MaxAnswerBytes: limit})
	rt := g.RoundTripper(&scriptedTransport{result: func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(strings.Repeat("x", limit)))}, nil
	}})
	read := func() (*http.Response, error) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://prometheus.invalid/api/v1/query", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		return resp, err
	}
	var held []*http.Response
	for i := range AnswerBudgetAnswers {
		resp, err := read()
		if err != nil {
			t.Fatalf("answer %d of exactly the limit: %v", i, err)
		}
		held = append(held, resp)
	}
	resp, err := read()
	var tl *AnswerTooLargeError
	if !errors.As(err, &tl) || tl.Budget != AnswerBudgetAnswers*limit || !strings.Contains(err.Error(), "4000 bytes") {
		t.Fatalf("one more answer while %d are held: %v, want the budget's AnswerTooLargeError", AnswerBudgetAnswers, err)
	}
	resp.Body.Close()
	held[0].Body.Close()
	if resp, err = read(); err != nil {
		t.Fatalf("after one was closed: %v", err)
	}
	held[0] = resp
	for _, r := range held {
		r.Body.Close()
	}
	if got := g.answerBytes.Load(); got != 0 {
		t.Errorf("%d answer bytes counted after every body was closed, want 0", got)
	}
	if !g.Status().Up {
		t.Error("refused answers marked the backend down")
	}
}

// TestGuardStallCounts: a request its callers cancel after waiting
// StallAfter or more for an answer counts as a failure (five mark the
// backend down), one cancelled sooner as neither. A query timeout longer
// than the requests' own deadline left a stalled backend up for ever.
func TestGuardStallCounts(t *testing.T) {
	g, clk, _ := newTestGuard(t, GuardConfig{BreakerFailures: 2})
	wait := StallAfter
	rt := g.RoundTripper(&scriptedTransport{result: func(req *http.Request) (*http.Response, error) {
		clk.Step(wait)
		return nil, context.Canceled
	}})
	cancelled := func() error {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return send(t, rt, ctx)
	}
	wait = StallAfter - time.Millisecond
	for range 3 {
		if err := cancelled(); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled request: %v", err)
		}
	}
	if st := g.Status(); !st.Up || st.ConsecutiveFailures != 0 {
		t.Fatalf("after requests cancelled within StallAfter: %+v, want up with no failure", st)
	}
	wait = StallAfter
	for range 2 {
		if err := cancelled(); !errors.Is(err, context.Canceled) {
			t.Fatalf("stalled request: %v", err)
		}
	}
	st := g.Status()
	if st.Up || st.ConsecutiveFailures != 2 || !strings.Contains(st.LastError, "no answer before its callers gave up") {
		t.Errorf("after two stalls: %+v, want down after 2 failures, last error the stall", st)
	}
}
