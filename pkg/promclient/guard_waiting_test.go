package promclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/metrics"
)

const emptyVector = `{"status":"success","data":{"resultType":"vector","result":[]}}`

// gatedTransport answers every instant query with an empty vector: at once,
// or, for a query given a gate, its headers once the gate's headers channel
// is closed and its body once the body channel is.
type gatedTransport struct {
	mu    sync.Mutex
	gates map[string]*queryGate
	sent  map[string]int
	// answered counts the answers whose headers went back.
	answered map[string]int
}

// queryGate holds a query's answers until its methods send them.
type queryGate struct {
	headers, body         chan struct{}
	headersOnce, bodyOnce sync.Once
}

// sendHeaders lets the query's answers send their headers.
func (g *queryGate) sendHeaders() { g.headersOnce.Do(func() { close(g.headers) }) }

// answer lets the query's answers be sent whole.
func (g *queryGate) answer() {
	g.sendHeaders()
	g.bodyOnce.Do(func() { close(g.body) })
}

func newGatedTransport() *gatedTransport {
	return &gatedTransport{gates: map[string]*queryGate{}, sent: map[string]int{}, answered: map[string]int{}}
}

// gate holds query's answers until the returned gate sends them.
func (t *gatedTransport) gate(query string) *queryGate {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := &queryGate{headers: make(chan struct{}), body: make(chan struct{})}
	t.gates[query] = g
	return g
}

func (t *gatedTransport) count(m map[string]int, query string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return m[query]
}

func (t *gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	query := req.URL.Query().Get("query")
	if req.Body != nil {
		if err := req.ParseForm(); err == nil && req.PostForm.Get("query") != "" {
			query = req.PostForm.Get("query")
		}
	}
	t.mu.Lock()
	t.sent[query]++
	g, gated := t.gates[query]
	t.mu.Unlock()
	var body io.Reader = strings.NewReader(emptyVector)
	if gated {
		select {
		case <-g.headers:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		body = &gatedBody{ctx: req.Context(), open: g.body, r: strings.NewReader(emptyVector)}
	}
	t.mu.Lock()
	t.answered[query]++
	t.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(body), Request: req}, nil
}

// gatedBody is an answer's body that reads nothing until open is closed.
type gatedBody struct {
	ctx  context.Context
	open chan struct{}
	r    io.Reader
}

func (b *gatedBody) Read(p []byte) (int, error) {
	select {
	case <-b.open:
		return b.r.Read(p)
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	}
}

// waitingFixture is a Client whose guard bounds the waiting requests at 2
// (team rules: 2 per namespace) with a grace of a second on a fake clock.
type waitingFixture struct {
	c     *Client
	guard *Guard
	clk   *clocktesting.FakeClock
	rt    *gatedTransport
	m     *metrics.Metrics
}

const testGrace = time.Second

func newWaitingFixture(t *testing.T, cfg GuardConfig) *waitingFixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	m := metrics.New()
	cfg.WaitGrace = testGrace
	guard, err := NewGuard("main", cfg, m, clk)
	if err != nil {
		t.Fatal(err)
	}
	// The verdicts are judged as on an idle adapter, whatever else the
	// machine runs (TestWaitingBoundAdapterBusy sets it busy).
	guard.cpuBusy = func(int64) bool { return false }
	rt := newGatedTransport()
	c, err := New(Config{Backend: "main", Address: "http://prometheus.invalid", HTTPClient: &http.Client{Transport: rt},
		Metrics: m, Guard: guard, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return &waitingFixture{c: c, guard: guard, clk: clk, rt: rt, m: m}
}

// burst sends n identical queries in ctx, the first alone (so that it
// waits within the bound) until its query is sent, and returns their
// errors' channel once the others have joined its flight.
func (f *waitingFixture) burst(t *testing.T, ctx context.Context, query string, n int) <-chan error {
	t.Helper()
	coalesced := f.m.CoalescedQueries.WithLabelValues("main", metrics.EndpointQuery)
	before := testutil.ToFloat64(coalesced)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := f.c.QuerySamples(ctx, query, time.Time{})
			errs <- err
		}()
		if i == 0 {
			waitFor(t, func() bool { return f.rt.count(f.rt.sent, query) == 1 })
		}
	}
	waitFor(t, func() bool { return testutil.ToFloat64(coalesced)-before == float64(n-1) })
	return errs
}

// judged waits until every request beyond the bounds has had its grace
// judged: n waited on past it, or failed (into failed, read from errs).
func (f *waitingFixture) judged(t *testing.T, errs <-chan error, n int) (pastGrace int, failed []error) {
	t.Helper()
	w := &f.guard.waiters
	waitFor(t, func() bool {
		for len(errs) > 0 {
			failed = append(failed, <-errs)
		}
		w.mu.Lock()
		pastGrace = w.pastGrace
		w.mu.Unlock()
		return pastGrace+len(failed) >= n
	})
	return pastGrace, failed
}

func collect(errs <-chan error, n int) []error {
	var out []error
	for range n {
		out = append(out, <-errs)
	}
	return out
}

// first is errs' first error, nil when none.
func first(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

func tooManyWaiting(errs []error) (n int, namespaces []string) {
	for _, err := range errs {
		var w *TooManyWaitingError
		if errors.As(err, &w) && IsUnavailable(err) {
			n++
			namespaces = append(namespaces, w.Namespace)
		}
	}
	return n, namespaces
}

// TestWaitingBoundAnsweringBackend: requests beyond the waiting bound that
// wait past their grace on a backend that is answering wait on and are
// served: the answer of their own flight came and the adapter is still
// reading it (what its own CPU does in a burst of large answers), or the
// backend answered a call sent after their flight. Before, every one of
// them failed with a *TooManyWaitingError and saturated the bound.
func TestWaitingBoundAnsweringBackend(t *testing.T) {
	const n = 10 // 8 beyond the bound of 2
	for _, tc := range []struct {
		name string
		// answer makes the backend answer while the burst waits on "slow"
		// (held by g), before the grace runs out.
		answer func(t *testing.T, f *waitingFixture, g *queryGate)
	}{{
		name: "the flight's answer came, its body is still being read",
		answer: func(t *testing.T, f *waitingFixture, g *queryGate) {
			g.sendHeaders()
			waitFor(t, func() bool { return f.rt.count(f.rt.answered, "slow") == 1 })
		},
	}, {
		name: "a call sent after the flight was answered",
		answer: func(t *testing.T, f *waitingFixture, _ *queryGate) {
			if _, err := f.c.QuerySamples(context.Background(), "fast", time.Time{}); err != nil {
				t.Fatalf("a query of the answering backend: %v", err)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newWaitingFixture(t, GuardConfig{MaxWaiting: 2})
			g := f.rt.gate("slow")
			defer g.answer()
			errs := f.burst(t, context.Background(), "slow", n)
			tc.answer(t, f, g)
			f.clk.Step(testGrace)
			pastGrace, failed := f.judged(t, errs, n-2)
			if pastGrace != n-2 || len(failed) > 0 {
				t.Fatalf("after the grace: %d requests wait on, %d failed (first: %v); want %d waiting on, none failed", pastGrace, len(failed), first(failed), n-2)
			}
			// Not saturated: a request beyond the bound is served.
			if _, err := f.c.QuerySamples(context.Background(), "fast 2", time.Time{}); err != nil {
				t.Errorf("a request beyond the bound after the grace: %v", err)
			}
			g.answer()
			if diff := cmp.Diff(make([]error, n), collect(errs, n)); diff != "" {
				t.Errorf("the burst's errors (-want +got):\n%s", diff)
			}
			if got := f.rt.count(f.rt.sent, "slow"); got != 1 {
				t.Errorf("%d queries for the burst, want 1", got)
			}
			if got := testutil.ToFloat64(f.m.PrometheusRejected.WithLabelValues("main", rejectedWaiting)); got != 0 {
				t.Errorf("rejected{too_many_waiting} = %v, want 0", got)
			}
		})
	}
}

// TestWaitingBoundStalledBackend: a backend that answers nothing sent since
// a flight started fails the flight's requests beyond the bound once their
// grace runs out, and the next ones beyond it at once, without a query; an
// answer to a call sent before the flight does not count (a backend that
// answers every call 15 s late lands answers all the time). Within the
// bound, requests wait for the answer.
func TestWaitingBoundStalledBackend(t *testing.T) {
	const n = 10
	for _, tc := range []struct {
		name string
		// earlier: a call sent before the burst, answered after its flight
		// started.
		earlier bool
		beyond  int
	}{
		{name: "nothing answers", beyond: n - 2},
		{name: "only a call sent before the flight is answered", earlier: true, beyond: n - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newWaitingFixture(t, GuardConfig{MaxWaiting: 2})
			eg := f.rt.gate("earlier")
			defer eg.answer()
			earlier := make(chan error, 1)
			if tc.earlier {
				go func() {
					_, err := f.c.QuerySamples(context.Background(), "earlier", time.Time{})
					earlier <- err
				}()
				waitFor(t, func() bool { return f.rt.count(f.rt.sent, "earlier") == 1 })
			}
			g := f.rt.gate("slow")
			defer g.answer()
			errs := f.burst(t, context.Background(), "slow", n)
			if tc.earlier {
				eg.sendHeaders()
				waitFor(t, func() bool { return f.rt.count(f.rt.answered, "earlier") == 1 })
			}
			f.clk.Step(testGrace)
			pastGrace, failed := f.judged(t, errs, tc.beyond)
			if refused, _ := tooManyWaiting(failed); pastGrace != 0 || refused != tc.beyond {
				t.Fatalf("after the grace: %d requests wait on, %d refused of %d failed (first: %v); want %d refused", pastGrace, refused, len(failed), first(failed), tc.beyond)
			}
			_, err := f.c.QuerySamples(context.Background(), "other", time.Time{})
			if refused, _ := tooManyWaiting([]error{err}); refused != 1 || f.rt.count(f.rt.sent, "other") != 0 {
				t.Errorf("a request beyond the saturated bound: %v (%d queries sent), want refused at once", err, f.rt.count(f.rt.sent, "other"))
			}
			g.answer()
			if diff := cmp.Diff(make([]error, n-tc.beyond), collect(errs, n-tc.beyond)); diff != "" {
				t.Errorf("the requests within the bound (-want +got):\n%s", diff)
			}
			if tc.earlier {
				eg.answer()
				if err := <-earlier; err != nil {
					t.Errorf("the earlier call: %v", err)
				}
			}
		})
	}
}

// TestWaitingBoundTeams: for a namespace's team rules (WithTenant), only
// that namespace's answers say its backend answers: the cluster's answers
// do not keep team-a's requests beyond its bound waiting, an answer to
// another of team-a's calls does.
func TestWaitingBoundTeams(t *testing.T) {
	const n = 6 // 4 beyond team-a's bound of 2
	for _, tc := range []struct {
		name        string
		answeredFor string // the namespace of the call answered during the grace; "" the cluster
		wantRefused int
	}{
		{name: "the cluster's call answered", answeredFor: "", wantRefused: n - 2},
		{name: "another of the team's calls answered", answeredFor: "team-a", wantRefused: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newWaitingFixture(t, GuardConfig{MaxWaiting: 40, MaxWaitingPerTeam: 2})
			g := f.rt.gate("team_slow")
			defer g.answer()
			teamA := WithTenant(context.Background(), "team-a")
			errs := f.burst(t, teamA, "team_slow", n)
			if _, err := f.c.QuerySamples(WithTenant(context.Background(), tc.answeredFor), "fast", time.Time{}); err != nil {
				t.Fatalf("a query of the answering backend: %v", err)
			}
			f.clk.Step(testGrace)
			pastGrace, failed := f.judged(t, errs, n-2)
			refused, namespaces := tooManyWaiting(failed)
			if refused != tc.wantRefused || pastGrace != n-2-tc.wantRefused {
				t.Fatalf("after the grace: %d wait on, %d refused (first: %v); want %d refused", pastGrace, refused, first(failed), tc.wantRefused)
			}
			for _, ns := range namespaces {
				if ns != "team-a" {
					t.Errorf("refused for namespace %q, want team-a", ns)
				}
			}
			g.answer()
			if diff := cmp.Diff(make([]error, n-refused), collect(errs, n-refused)); diff != "" {
				t.Errorf("the requests waiting on (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWaitingBoundCallNotSentYet: a request beyond the bound whose grace
// runs out while the backend holds no call (the adapter has not sent its
// flight's call yet: its own CPU, in a burst of 1,000 requests on two
// cores) waits on and is judged again; once a call has been held for the
// grace with nothing answered, it fails and saturates the bound. Before,
// the first verdict refused it (516 of a 1,000-request burst answered 503
// with one query sent and answered within milliseconds, 5 Dec).
func TestWaitingBoundCallNotSentYet(t *testing.T) {
	f := newWaitingFixture(t, GuardConfig{MaxWaiting: 1})
	g := f.guard
	ctx := context.Background()
	within, err := g.wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	beyond, err := g.wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	beyond.flight(g.sentMark())
	f.clk.Step(testGrace)
	waitFor(t, pastGraceIs(g, 1))
	if err := context.Cause(beyond.ctx); err != nil {
		t.Fatalf("grace ran out with no call held: the wait ended (%v), want it to go on", err)
	}
	// The flight's call is sent half a grace later; when the grace runs
	// out again it has been held half of it: the wait goes on, for the
	// other half.
	waitFor(t, f.clk.HasWaiters)
	f.clk.Step(testGrace / 2)
	seq := g.sends.Add(1)
	g.held.add(seq, f.clk.Now(), "")
	f.clk.Step(testGrace / 2)
	waitFor(t, pastGraceIs(g, 2))
	if err := context.Cause(beyond.ctx); err != nil {
		t.Fatalf("the call held half the grace: the wait ended (%v), want it to go on", err)
	}
	waitFor(t, f.clk.HasWaiters)
	f.clk.Step(testGrace / 2)
	<-beyond.ctx.Done()
	var stall *graceStall
	if !errors.As(context.Cause(beyond.ctx), &stall) || !stall.backend {
		t.Fatalf("the call held the grace: cause %v, want a backend stall", context.Cause(beyond.ctx))
	}
	var waiting *TooManyWaitingError
	if err := beyond.done(beyond.ctx.Err()); !errors.As(err, &waiting) {
		t.Errorf("the request beyond the bound: %v, want a *TooManyWaitingError", err)
	}
	if _, err := g.wait(ctx); err == nil {
		t.Errorf("a request beyond the saturated bound: admitted, want refused at once")
	}
	g.held.remove(seq)
	_ = within.done(nil)
}

// pastGraceIs says whether n requests beyond g's bounds have waited on past
// their grace.
func pastGraceIs(g *Guard, n int) func() bool {
	return func() bool {
		g.waiters.mu.Lock()
		defer g.waiters.mu.Unlock()
		return g.waiters.pastGrace == n
	}
}

// TestWaitingBoundAdapterBusy: when the grace of requests beyond the bound
// runs out while the adapter's own goroutines wait for a CPU (a burst of
// 1,000 requests on 2 cores: Guard.cpuBusy), the verdict is put off until
// they have run, since the one that would read the flight's answer may be
// among them. If the answer had come, the requests wait on and none is
// refused; before, the flight's call counted as held for the grace and
// every request beyond the bound was answered 503 (22 and 121 of 1,000
// over 5,000 pods on 38e68b1). If the backend has still sent nothing once
// the adapter is idle, they are refused as from a stalled backend.
func TestWaitingBoundAdapterBusy(t *testing.T) {
	const n = 10 // 8 beyond the bound of 2
	for _, tc := range []struct {
		name string
		// answered: the backend's answer is read once the adapter is idle.
		answered    bool
		wantRefused int
	}{
		{name: "the answer had come", answered: true},
		{name: "the backend sent nothing", wantRefused: n - 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newWaitingFixture(t, GuardConfig{MaxWaiting: 2})
			g := f.rt.gate("slow")
			defer g.answer()
			var busy atomic.Bool
			busy.Store(true)
			f.guard.cpuBusy = func(int64) bool { return busy.Load() }
			errs := f.burst(t, context.Background(), "slow", n)
			f.clk.Step(testGrace)
			if pastGrace, failed := f.judged(t, errs, n-2); pastGrace != n-2 || len(failed) > 0 {
				t.Fatalf("after the grace, the adapter busy: %d requests wait on, %d failed (first: %v); want %d waiting on, none failed", pastGrace, len(failed), first(failed), n-2)
			}
			// The adapter catches up: it reads the answer if there is one.
			if tc.answered {
				g.sendHeaders()
				waitFor(t, func() bool { return f.guard.answered.Load() > 0 })
			}
			busy.Store(false)
			waitFor(t, f.clk.HasWaiters)
			f.clk.Step(busyRecheck)
			var failed []error
			if tc.wantRefused > 0 {
				failed = collect(errs, tc.wantRefused)
			} else {
				waitFor(t, pastGraceIs(f.guard, 2*(n-2)))
			}
			if refused, _ := tooManyWaiting(failed); refused != tc.wantRefused {
				t.Fatalf("judged again with the adapter idle: %d refused (first error: %v), want %d", refused, first(failed), tc.wantRefused)
			}
			g.answer()
			if diff := cmp.Diff(make([]error, n-tc.wantRefused), collect(errs, n-tc.wantRefused)); diff != "" {
				t.Errorf("the other requests' errors (-want +got):\n%s", diff)
			}
			if got := testutil.ToFloat64(f.m.PrometheusRejected.WithLabelValues("main", rejectedWaiting)); got != float64(tc.wantRefused) {
				t.Errorf("rejected{too_many_waiting} = %v, want %d", got, tc.wantRefused)
			}
		})
	}
}
