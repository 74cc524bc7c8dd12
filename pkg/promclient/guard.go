package promclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/truncate"
)

// Defaults of a backend's Guard (GuardConfig's zero values).
const (
	// DefaultMaxConcurrent bounds the requests in flight to one backend:
	// five times Prometheus' own --query.max-concurrency (20), far below
	// the API server's in-flight limit (400), so a stalled backend cannot
	// take every slot of the adapter.
	DefaultMaxConcurrent = 100
	// DefaultBreakerFailures consecutive timeouts or connection errors mark
	// a backend down.
	DefaultBreakerFailures = 5
	// DefaultBreakerOpen is how long a backend marked down is not asked
	// (its requests fail at once) before one probe request goes through,
	// and again after each failed probe, however long the outage: the
	// backend is asked again at most this long after it is back. A probe
	// costs one request at a time (a refused connection costs nothing; a
	// stalled backend holds one slot until the probe's timeout), so there is
	// nothing to gain by backing off further. (A backoff doubling up to 30 s
	// kept the adapter answering 503 for up to 21 s after Prometheus was
	// ready again: docs/reliability.md.)
	DefaultBreakerOpen = time.Second
	// DefaultMaxAnswerBytes bounds the bytes of one answer (after
	// decompression): 8 MiB holds a query's answer over ~30,000 series of
	// 250-byte label sets (a custom metric over 5,000 pods is about
	// 1.3 MB), or a series listing of as many. A hostile or runaway answer
	// is refused after that many bytes, not read to its end (one 50 MB
	// answer at a time took the adapter to 843 MiB of RSS).
	DefaultMaxAnswerBytes = 8 << 20
	// AnswerBudgetAnswers bounds the bytes of all the answers being read
	// (and, for instant queries, decoded) from one backend at once to this
	// many times its MaxAnswerBytes: an answer that would go past it is
	// refused, so that 30 concurrent large answers cost what four do.
	AnswerBudgetAnswers = 4
)

// ErrBackendDown is the error of a request not sent because its backend is
// known down (recent requests timed out or could not connect).
var ErrBackendDown = errors.New("backend known down: recent requests timed out or could not connect, not asking it until the next probe")

// ErrBackendBusy is the error of a request not sent because its backend
// already has its maximum of requests in flight.
var ErrBackendBusy = errors.New("backend busy: its maximum of requests in flight is reached")

// StallAfter is how long a request must have waited for the backend's
// first answer byte for its cancellation by its callers to count as a
// failure of the backend (a stall) rather than as neither: a query
// timeout longer than the requests' own deadline (the API server's, the
// HPA's) would otherwise never be counted, and a stalled backend would
// never be marked down.
const StallAfter = 5 * time.Second

// errStalled is the failure of a request its callers gave up on after
// StallAfter without an answer.
var errStalled = errors.New("no answer before its callers gave up")

// errGatewayTimeout is the failure of a 504 answer.
var errGatewayTimeout = errors.New("gateway timeout (HTTP 504)")

// GuardConfig bounds the requests to one backend. Zero values are the
// defaults.
type GuardConfig struct {
	// MaxConcurrent is how many requests may be in flight to the backend;
	// more fail at once with ErrBackendBusy. 0: DefaultMaxConcurrent;
	// negative: no bound.
	MaxConcurrent int
	// BreakerFailures is how many consecutive timeouts or connection errors
	// mark the backend down. 0: DefaultBreakerFailures; negative: never.
	BreakerFailures int
	// BreakerOpen is how long a backend marked down is not asked before a
	// probe, and again after each failed probe. 0: DefaultBreakerOpen.
	BreakerOpen time.Duration
	// MaxAnswerBytes bounds the bytes of one answer; a longer one fails
	// with an *AnswerTooLargeError, and so does one that would take the
	// answers being read from the backend at once past
	// AnswerBudgetAnswers*MaxAnswerBytes. 0: DefaultMaxAnswerBytes;
	// negative: no bound.
	MaxAnswerBytes int64
	// MaxWaiting is how many requests may wait on the backend's answers,
	// every caller counted (a coalesced query's joiners too). A request
	// beyond it that has waited WaitGrace fails with a
	// *TooManyWaitingError if the backend has answered neither its call
	// nor any call sent after it (see DefaultWaitGrace), and so do the next
	// ones beyond it at once, until the requests waiting fall below the
	// bound or the backend answers a call sent after that; if the backend
	// has, it waits on. 0: DefaultMaxWaiting; negative: no bound.
	MaxWaiting int
	// WaitGrace is how long a request beyond MaxWaiting waits before the
	// backend must have answered its call or a later one. 0:
	// DefaultWaitGrace.
	WaitGrace time.Duration
	// MaxWaitingPerTeam is MaxWaiting for the requests of one namespace's
	// team rules (WithTenant). 0: MaxWaiting/4 (at least 1), so that one
	// team's slow queries leave most of the backend's bound to the
	// cluster's rules and the other teams; negative: no bound.
	MaxWaitingPerTeam int
	// MaxConcurrentPerTeam is how many requests of one namespace's team
	// rules (WithTenant) may be in flight to the backend at once, that is
	// how many of that team's queries the backend evaluates at a time;
	// more wait for one of them to finish, within their own deadline and
	// counted in the team's waiting bound. It bounds what one team's heavy
	// queries take of the backend's capacity: with 12 distinct heavy team
	// queries in flight at once on a 2-core Prometheus, 10-28 % of the
	// cluster's and another team's requests failed (docs/reliability.md).
	// 0: DefaultMaxConcurrentPerTeam; negative: no bound.
	MaxConcurrentPerTeam int
}

// DefaultMaxConcurrentPerTeam is GuardConfig.MaxConcurrentPerTeam's
// default: two queries of one team at a time, a tenth of Prometheus's own
// default --query.max-concurrency (20).
const DefaultMaxConcurrentPerTeam = 2

// guardLimits is the GuardConfig of the flags' values, where 0 means no
// bound (maxInFlight, maxWaiting, maxAnswerBytes) and never marked down (failures).
func guardLimits(maxInFlight, maxWaiting, failures int, open time.Duration, maxAnswerBytes int64) GuardConfig {
	return GuardConfig{MaxConcurrent: noneIfZero(maxInFlight), MaxWaiting: noneIfZero(maxWaiting), BreakerFailures: noneIfZero(failures), BreakerOpen: open,
		MaxAnswerBytes: noneIfZero(maxAnswerBytes)}
}

// WithTeamLimits is c with the per-team bounds of the team rule flags,
// where 0 means no bound as in guardLimits: maxInFlight is
// --team-rules-max-in-flight (MaxConcurrentPerTeam); maxWaiting is
// --team-rules-max-waiting (MaxWaitingPerTeam), nil when the flag is not
// given, which keeps c's (0: a quarter of each backend's own MaxWaiting).
// Negative values are the callers' to refuse.
func (c GuardConfig) WithTeamLimits(maxInFlight int, maxWaiting *int) GuardConfig {
	c.MaxConcurrentPerTeam = noneIfZero(maxInFlight)
	if maxWaiting != nil {
		c.MaxWaitingPerTeam = noneIfZero(*maxWaiting)
	}
	return c
}

// noneIfZero maps a flag's or a file's 0 (no bound) to GuardConfig's.
func noneIfZero[N int | int64](n N) N {
	if n == 0 {
		return -1
	}
	return n
}

// withDefaults fills the zero values.
func (c GuardConfig) withDefaults() GuardConfig {
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = DefaultBreakerFailures
	}
	if c.BreakerOpen <= 0 {
		c.BreakerOpen = DefaultBreakerOpen
	}
	if c.MaxAnswerBytes == 0 {
		c.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	if c.WaitGrace <= 0 {
		c.WaitGrace = DefaultWaitGrace
	}
	if c.MaxWaitingPerTeam == 0 {
		c.MaxWaitingPerTeam = max(c.MaxWaiting/4, 1)
	}
	if c.MaxConcurrentPerTeam == 0 {
		c.MaxConcurrentPerTeam = DefaultMaxConcurrentPerTeam
	}
	return c
}

// Validate reports the configuration's errors.
func (c GuardConfig) Validate() error {
	if c.BreakerOpen < 0 {
		return errors.New("the breaker's open period must not be negative")
	}
	if c.WaitGrace < 0 {
		return errors.New("the waiting bound's grace must not be negative")
	}
	return nil
}

// Guard keeps one backend's requests bounded, so that a stalled backend
// costs the adapter neither its request slots nor its health: at most
// MaxConcurrent requests in flight (more fail at once), and a breaker that,
// after BreakerFailures consecutive timeouts or connection errors, fails
// every request at once for BreakerOpen, then lets one probe request
// through; a probe that fails opens it for BreakerOpen again (never longer,
// so the backend is asked again within BreakerOpen of its return however
// long it was down), one that gets an answer closes the breaker. Any answer from the backend,
// error statuses included (Prometheus answering 503 is answering), counts as
// success except 504 (a proxy that gave up waiting); a request its caller
// cancels counts as neither, unless it had waited StallAfter or more without
// an answer (a stall: a failure).
//
// It works on the transport (RoundTripper), so coalesced calls share one
// slot, and keeps a request's slot until its answer's body is read or
// closed. Its state is on /metrics (promscaler_prometheus_up{backend} and
// the rejected and in-flight series) and in Status.
type Guard struct {
	name  string
	cfg   GuardConfig
	clock clock.PassiveClock
	slots chan struct{} // nil: no bound

	up       prometheus.Gauge
	inFlight prometheus.Gauge
	down     prometheus.Counter
	busy     prometheus.Counter

	// waiters counts the requests waiting on the backend's answers
	// (guard_waiting.go); graceClock times the grace of those beyond the
	// bound (clock when it can, else the real clock).
	waiters     waiters
	waitRefused prometheus.Counter
	// teams bounds each namespace's team rule requests in flight
	// (cfg.MaxConcurrentPerTeam; guard_team.go).
	teams      teamSlots
	graceClock clock.WithDelayedExecution
	// sends counts the calls sent (a call's sequence number); answered is
	// the highest sequence number of a call the backend answered (headers,
	// any status but 504): what tells a backend that answers from a
	// stalled one (waiter.graceOut).
	sends, answered atomic.Uint64
	// held is the calls sent and not yet answered (nor failed), with when
	// they were sent: what the waiting bound's stall verdict times
	// (waiter.graceOut).
	held heldCalls
	// cpuBusy says whether the adapter's goroutines wait for a CPU, which
	// puts off a stall verdict (graceOut), given how many verdicts are
	// being judged (judging): runnableBusy.
	cpuBusy func(judging int64) bool
	judging atomic.Int64

	// answerBytes is the bytes of the answers being read (until their body
	// is closed): bounded by AnswerBudgetAnswers*cfg.MaxAnswerBytes.
	answerBytes atomic.Int64

	mu        sync.Mutex
	state     breakerState
	failures  int // consecutive
	openUntil time.Time
	probing   bool
	downSince time.Time
	lastErr   string
}

type breakerState int

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerHalfOpen
)

// Values of the reason label of promscaler_prometheus_rejected_requests_total.
const (
	rejectedBackendDown = "backend_down"
	rejectedBusy        = "busy"
)

// NewGuard returns the guard of the backend name (its label on /metrics),
// recording its state in m's series (nil: a private set) and clk
// timing the breaker (nil: the real clock) and, when it can run functions
// later (clock.WithDelayedExecution, e.g. a fake clock), the grace of the
// requests beyond the waiting bound.
func NewGuard(name string, cfg GuardConfig, m *metrics.Metrics, clk clock.PassiveClock) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("backend %s: %w", name, err)
	}
	if m == nil {
		m = metrics.New()
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if name == "" {
		name = DefaultBackendName
	}
	cfg = cfg.withDefaults()
	g := &Guard{
		name: name, cfg: cfg, clock: clk,
		up:       m.PrometheusUp.WithLabelValues(name),
		inFlight: m.PrometheusInFlight.WithLabelValues(name),
		down:     m.PrometheusRejected.WithLabelValues(name, rejectedBackendDown),
		busy:     m.PrometheusRejected.WithLabelValues(name, rejectedBusy),

		waitRefused: m.PrometheusRejected.WithLabelValues(name, rejectedWaiting),
		cpuBusy:     runnableBusy,
	}
	if cfg.MaxConcurrent > 0 {
		g.slots = make(chan struct{}, cfg.MaxConcurrent)
	}
	g.graceClock = clock.RealClock{}
	if d, ok := clk.(clock.WithDelayedExecution); ok {
		g.graceClock = d
	}
	g.waiters.backend.limit = cfg.MaxWaiting
	g.up.Set(1)
	return g, nil
}

// GuardStatus is a guard's state, for readiness details and logs.
type GuardStatus struct {
	// Backend is the backend's name.
	Backend string
	// Up is false while the backend is known down.
	Up bool
	// DownSince is when it was marked down; RetryAt when the next probe
	// may go (zero while a probe is in flight or when up).
	DownSince, RetryAt time.Time
	// ConsecutiveFailures counts the timeouts and connection errors since
	// the last answer; LastError is the last one.
	ConsecutiveFailures int
	LastError           string
}

// String renders the status on one line.
func (s GuardStatus) String() string {
	if s.Up {
		if s.ConsecutiveFailures > 0 {
			return fmt.Sprintf("prometheus backend %q: up (%d consecutive failures, last: %s)", s.Backend, s.ConsecutiveFailures, s.LastError)
		}
		return fmt.Sprintf("prometheus backend %q: up", s.Backend)
	}
	next := "a probe request is in flight"
	if !s.RetryAt.IsZero() {
		next = "next probe at " + s.RetryAt.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("prometheus backend %q: down since %s (%d consecutive failures, last: %s); metric requests answer 503; %s",
		s.Backend, s.DownSince.UTC().Format(time.RFC3339), s.ConsecutiveFailures, s.LastError, next)
}

// Status returns the guard's current state.
func (g *Guard) Status() GuardStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := GuardStatus{Backend: g.name, Up: g.state == breakerClosed, ConsecutiveFailures: g.failures, LastError: g.lastErr}
	if !s.Up {
		s.DownSince = g.downSince
		if !g.probing {
			s.RetryAt = g.openUntil
		}
	}
	return s
}

// outcome is what a request tells the breaker.
type outcome int

const (
	outcomeAnswered outcome = iota // the backend answered
	outcomeFailed                  // timeout or connection error
	outcomeNeutral                 // canceled by its caller
)

// admit decides whether a request may be sent; probe is true for the one
// request let through to a backend marked down.
func (g *Guard) admit() (ok, probe bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case breakerClosed:
		return true, false
	case breakerOpen:
		if g.clock.Now().Before(g.openUntil) {
			return false, false
		}
		g.state = breakerHalfOpen
	}
	if g.probing {
		return false, false
	}
	g.probing = true
	return true, true
}

// record takes a sent request's outcome.
func (g *Guard) record(o outcome, probe bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch o {
	case outcomeNeutral:
		if probe {
			g.probing = false
		}
	case outcomeAnswered:
		// Any answer, the probe's or a late one, closes the breaker.
		if g.state != breakerClosed {
			klog.InfoS("Prometheus backend answers again", "backend", g.name, "downFor", g.clock.Since(g.downSince))
		}
		g.failures, g.lastErr, g.probing = 0, "", false
		g.state = breakerClosed
		g.up.Set(1)
	case outcomeFailed:
		g.failures++
		g.lastErr = errorSummary(err)
		switch {
		case probe:
			g.probing = false
			g.open()
		case g.state == breakerClosed && g.cfg.BreakerFailures > 0 && g.failures >= g.cfg.BreakerFailures:
			g.downSince = g.clock.Now()
			g.open()
		}
	}
}

// open marks the backend down until the next probe; g.mu is held. Only
// the first marking is logged: a failed probe every BreakerOpen through a
// long outage would otherwise log once a second.
func (g *Guard) open() {
	first := g.state == breakerClosed
	g.state = breakerOpen
	g.openUntil = g.clock.Now().Add(g.cfg.BreakerOpen)
	g.up.Set(0)
	if first {
		klog.InfoS("Prometheus backend marked down: its requests fail at once until a probe gets an answer",
			"backend", g.name, "consecutiveFailures", g.failures, "lastError", g.lastErr, "probeEvery", g.cfg.BreakerOpen)
		return
	}
	klog.V(4).InfoS("Prometheus backend probe failed", "backend", g.name, "lastError", g.lastErr, "nextProbeIn", g.cfg.BreakerOpen)
}

// errorSummary is a short, credential-free description of a failure.
func errorSummary(err error) string {
	switch {
	case err == nil:
		return "unknown"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return truncate.String(redactURLError(err).Error(), maxDetailInError)
	}
}

// outcomeOf classifies a request's error under its context.
func outcomeOf(ctx context.Context, err error) outcome {
	switch {
	case err == nil:
		return outcomeAnswered
	case errors.Is(ctx.Err(), context.Canceled), errors.Is(err, context.Canceled) && ctx.Err() == nil:
		return outcomeNeutral
	default:
		return outcomeFailed
	}
}

// RoundTripper returns next guarded by g; nil next is what an
// http.Client with no Transport uses, http.DefaultTransport.
func (g *Guard) RoundTripper(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &guardedTransport{guard: g, next: next}
}

type guardedTransport struct {
	guard *Guard
	next  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	g := t.guard
	ns := tenantOf(req.Context())
	release, err := g.teams.acquire(req.Context(), g, ns)
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	resp, err := t.roundTrip(req, ns, release)
	if err != nil {
		release()
	}
	return resp, err
}

// roundTrip is RoundTrip once the request holds its team's slot (release
// frees it; the answer's body does when it is done).
func (t *guardedTransport) roundTrip(req *http.Request, ns string, release func()) (*http.Response, error) {
	g := t.guard
	team := ns != ""
	ok, probe := g.admit()
	if !ok {
		g.down.Inc()
		closeRequestBody(req)
		return nil, ErrBackendDown
	}
	if g.slots != nil {
		select {
		case g.slots <- struct{}{}:
		default:
			if probe {
				g.record(outcomeNeutral, true, nil)
			}
			g.busy.Inc()
			closeRequestBody(req)
			return nil, ErrBackendBusy
		}
	}
	g.inFlight.Inc()
	sent, seq := g.clock.Now(), g.sends.Add(1)
	g.held.add(seq, sent, ns)
	resp, err := t.next.RoundTrip(req)
	g.held.remove(seq)
	if err != nil {
		o, why := outcomeOf(req.Context(), err), err
		if o == outcomeNeutral && g.clock.Since(sent) >= StallAfter {
			// Its callers gave up before the backend sent even a header:
			// a stall, whatever deadline ended the wait first.
			o, why = outcomeFailed, fmt.Errorf("%w after %v", errStalled, g.clock.Since(sent).Round(time.Millisecond))
		}
		g.finish(teamOutcome(o, probe, team), probe, why)
		return nil, err
	}
	// A 504 is a proxy in front of the backend that gave up waiting.
	if resp.StatusCode != http.StatusGatewayTimeout {
		g.noteAnswered(seq, ns)
	}
	resp.Body = &guardedBody{ReadCloser: resp.Body, guard: g, ctx: req.Context(), probe: probe, team: team,
		gatewayTimeout: resp.StatusCode == http.StatusGatewayTimeout, release: release}
	return resp, nil
}

// CloseIdleConnections forwards to the wrapped transport.
func (t *guardedTransport) CloseIdleConnections() { closeIdle(t.next) }

// teamOutcome is what a request's outcome o tells the breaker: for a team
// rule's request (WithTenant), a failure counts as neither unless it was
// the probe of a backend already marked down, so that one team's slow
// queries never mark the backend down for everybody (their cost is bounded
// by the team's waiting bound instead).
func teamOutcome(o outcome, probe, team bool) outcome {
	if team && o == outcomeFailed && !probe {
		return outcomeNeutral
	}
	return o
}

// finish frees a request's slot and records its outcome.
func (g *Guard) finish(o outcome, probe bool, err error) {
	if g.slots != nil {
		<-g.slots
	}
	g.inFlight.Dec()
	g.record(o, probe, err)
}

// closeRequestBody closes the body of a request not sent, as a
// RoundTripper must.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// guardedBody keeps the request's slot until its answer is read to the end,
// fails, or is closed; a read failing with a timeout or a broken connection
// counts as a failure. It also bounds the answer's bytes (MaxAnswerBytes,
// and the backend's answer budget), counted until the body is closed.
type guardedBody struct {
	io.ReadCloser
	guard *Guard
	ctx   context.Context
	probe bool
	// team: a team rule's request (teamOutcome).
	team bool
	// gatewayTimeout: the answer is a 504, a failure however it is read.
	gatewayTimeout bool
	// release frees the request's team slot (guard_team.go).
	release func()
	once    sync.Once
	// read is the bytes read so far, counted in guard.answerBytes until
	// Close (released once).
	read, released int64
	tooLarge       error
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.tooLarge != nil {
		return 0, b.tooLarge
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if lerr := b.count(int64(n)); lerr != nil {
			// The backend answered; the answer is refused.
			b.tooLarge = lerr
			b.done(outcomeAnswered, nil)
			return n, lerr
		}
	}
	switch {
	case err == io.EOF:
		b.done(outcomeAnswered, nil)
	case err != nil:
		b.done(outcomeOf(b.ctx, err), err)
	}
	return n, err
}

// count adds n bytes read to the answer's and the backend's counts and
// reports an *AnswerTooLargeError past either bound.
func (b *guardedBody) count(n int64) error {
	g := b.guard
	b.read += n
	total := g.answerBytes.Add(n)
	limit := g.cfg.MaxAnswerBytes
	switch {
	case limit < 0:
		return nil
	case b.read > limit:
		return &AnswerTooLargeError{Backend: g.name, Limit: limit}
	case total > AnswerBudgetAnswers*limit:
		return &AnswerTooLargeError{Backend: g.name, Limit: limit, Budget: AnswerBudgetAnswers * limit}
	}
	return nil
}

func (b *guardedBody) Close() error {
	b.done(outcomeAnswered, nil)
	if b.released < b.read {
		b.guard.answerBytes.Add(b.released - b.read)
		b.released = b.read
	}
	return b.ReadCloser.Close()
}

func (b *guardedBody) done(o outcome, err error) {
	if b.gatewayTimeout && o == outcomeAnswered {
		o, err = outcomeFailed, errGatewayTimeout
	}
	b.once.Do(func() {
		b.guard.finish(teamOutcome(o, b.probe, b.team), b.probe, err)
		if b.release != nil {
			b.release()
		}
	})
}

// AnswerTooLargeError is the error of an answer refused for its size: longer
// than Limit (MaxAnswerBytes), or, when Budget is set, taking the answers
// being read from the backend at once past Budget.
type AnswerTooLargeError struct {
	Backend       string
	Limit, Budget int64
}

// Error implements error.
func (e *AnswerTooLargeError) Error() string {
	if e.Budget > 0 {
		return fmt.Sprintf("answer refused: the answers being read from backend %q at once would exceed %d bytes (%d times the %d-byte answer limit, --prometheus-max-answer-bytes or the backend's max_answer_bytes)",
			e.Backend, e.Budget, AnswerBudgetAnswers, e.Limit)
	}
	return fmt.Sprintf("answer refused: longer than the %d-byte answer limit of backend %q (--prometheus-max-answer-bytes or the backend's max_answer_bytes)", e.Limit, e.Backend)
}

// Guard returns the client's backend guard, nil when it has none.
func (c *Client) Guard() *Guard { return c.guard }
