package promclient

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of a backend's bound on waiting requests (GuardConfig.MaxWaiting,
// GuardConfig.WaitGrace).
const (
	// DefaultMaxWaiting bounds the requests waiting on one backend's
	// answers, each caller counted (a coalesced query's joiners too). A
	// request through kube-apiserver's aggregator holds a seat of its
	// client's priority level there as long as it waits here, and a
	// priority level has few: of kube-apiserver's 600 by default, about 98
	// for kube-controller-manager's (workload-high, the HPA's) and 49 for
	// an ordinary user's (global-default). A stalled backend's requests,
	// each held up to --prometheus-timeout, must leave most of them to the
	// other backends' metrics and to discovery: with 200, 27 % of a
	// healthy backend's requests and of the discovery polls were refused
	// (429) while the other backend was stalled, with 40 none
	// (docs/reliability.md). A healthy backend rarely has more waiting
	// (500 req/s answered in 50 ms is 25), and a burst beyond it is served
	// whole as long as the backend answers (see DefaultWaitGrace). The
	// transport's bound (DefaultMaxConcurrent) counts a coalesced query
	// once, so it alone let the joiners of stalled queries fill every slot.
	DefaultMaxWaiting = 40
	// DefaultWaitGrace is how long a request beyond MaxWaiting waits before
	// the guard asks whether the backend is answering: whether it has
	// answered the call the request waits on, or any call sent after that
	// one. If not, the backend has held that call at least this long while
	// answering nothing newer, which is what a stalled backend does: the
	// request fails, and so do the next ones beyond the bound at once. If
	// it has, the request waits on (up to the call's timeout): what keeps it
	// is the adapter's own work (reading and decoding the answer, on a CPU
	// busy with 1,000 other requests in a burst) or one slow query of a
	// backend that answers the others, not a stall.
	DefaultWaitGrace = time.Second
)

// rejectedWaiting is the reason label of the requests refused by the
// waiting bound.
const rejectedWaiting = "too_many_waiting"

// TooManyWaitingError is the error of a request refused because Limit
// requests already wait on Backend's answers (of the team rules of
// Namespace, when set) and the backend is not answering them (a request
// beyond the limit waited WaitGrace while the backend answered neither its
// call nor any sent after it). It is an ErrBackendBusy.
type TooManyWaitingError struct {
	Backend   string
	Limit     int
	Namespace string
}

// Error implements error.
func (e *TooManyWaitingError) Error() string {
	if e.Namespace != "" {
		return fmt.Sprintf("request refused: %d requests of the team rules of namespace %q already wait on backend %q, which is not answering them (the bound of one namespace's team rules, a quarter of --prometheus-max-waiting or the backend's max_waiting)",
			e.Limit, e.Namespace, e.Backend)
	}
	return fmt.Sprintf("request refused: %d requests already wait on backend %q, which is not answering them (--prometheus-max-waiting or the backend's max_waiting)",
		e.Limit, e.Backend)
}

// Unwrap makes it an ErrBackendBusy.
func (e *TooManyWaitingError) Unwrap() error { return ErrBackendBusy }

// tenantKey is the context key of WithTenant.
type tenantKey struct{}

// WithTenant marks the calls made with the returned context as made for
// the team rules of namespace ns (pkg/teamrules); "" marks nothing. Such
// calls are bounded per namespace as well as per backend (one team's slow
// queries hold at most a quarter of the backend's waiting bound), never
// coalesce with another namespace's or the cluster's, and their timeouts
// and stalls do not count toward the backend's breaker: one team's slow
// queries never mark the backend down for everybody.
func WithTenant(ctx context.Context, ns string) context.Context {
	if ns == "" {
		return ctx
	}
	return context.WithValue(ctx, tenantKey{}, ns)
}

// tenantOf is the namespace WithTenant set on ctx, "" when none.
func tenantOf(ctx context.Context) string {
	ns, _ := ctx.Value(tenantKey{}).(string)
	return ns
}

// waitBound counts the requests waiting on one backend (or on one backend
// for one namespace's team rules): see Guard.wait. The guard's waiters.mu
// is held to use it.
type waitBound struct {
	limit   int
	waiting int
	// saturated: a request beyond the limit found the backend not
	// answering (waiter.graceOut); stalledAt is the guard's count of calls
	// sent (Guard.sends) then. It lasts until the waiting fall below the
	// limit or the backend answers a call sent after it.
	saturated bool
	stalledAt uint64
	// answered is the sequence number (Guard.sends) of the latest call of a
	// team's requests that the backend answered (for the backend's own
	// bound, Guard.answered is used instead).
	answered uint64
}

// enter counts a caller in unless refused (beyond the limit while
// saturated); over says it is beyond the limit. answered is the sequence
// number of the latest call of the bound's requests that was answered.
func (b *waitBound) enter(answered uint64) (over, refused bool) {
	if b.saturated && answered > b.stalledAt {
		b.saturated = false
	}
	over = b.waiting >= b.limit
	if over && b.saturated {
		return true, true
	}
	b.waiting++
	return over, false
}

// leave counts a caller out; stalled says it waited past its grace beyond
// the limit with the backend not answering (sent calls so far: sends),
// which saturates the bound while the waiting stay at it.
func (b *waitBound) leave(stalled bool, sends uint64) {
	b.waiting--
	switch {
	case b.waiting < b.limit:
		b.saturated = false
	case stalled:
		b.saturated, b.stalledAt = true, sends
	}
}

// waiters is a guard's waiting bounds: the backend's and, for callers of
// team rules, one per namespace (dropped when none of its callers waits).
type waiters struct {
	mu      sync.Mutex
	backend waitBound
	teams   map[string]*waitBound
	// pastGrace counts the requests beyond a bound whose grace ran out
	// while the backend was answering, and that waited on (for tests and
	// the V(4) log).
	pastGrace int
}

// waiter is one caller counted among a backend's waiting requests, from
// Guard.wait until done.
type waiter struct {
	// g is nil for a caller not counted (no guard, or no bound).
	g      *Guard
	parent context.Context
	// ctx is what the caller waits under: parent, ended by graceOut (cause
	// *graceStall) for a caller beyond a bound.
	ctx                   context.Context
	cancel                context.CancelCauseFunc
	tenant                string
	team                  *waitBound // nil: not a team rule's caller
	teamOver, backendOver bool
	// mark is the guard's count of calls sent (Guard.sends) when the
	// flight the caller waits on started (flight): that flight's call, and
	// every call sent after it, has a higher sequence number. Until the
	// caller reaches its flight, the count when it entered.
	mark atomic.Uint64
	// beyond: the caller is beyond a bound (teamOver or backendOver) and
	// has a grace timer.
	beyond bool
	// mu guards timer (re-armed by graceOut's rearm) and finished (done).
	mu       sync.Mutex
	timer    clock.Timer
	finished bool
}

// graceStall is the cause ending the wait of a caller whose grace ran out
// while the backend answered no call sent since the caller's flight
// started; team and backend say which bounds it saturates.
type graceStall struct{ team, backend bool }

func (*graceStall) Error() string {
	return "waited past the grace of a request beyond the waiting bound with the backend not answering"
}

// wait counts a caller in among the backend's waiting requests (and its
// namespace's, for a team rule's call: WithTenant) until the returned
// waiter's done is called with the error its wait ended with (nil: an
// answer); the caller waits under the waiter's ctx and tells it the flight
// it waits on (flight). A caller beyond a bound gets WaitGrace: when it runs
// out, graceOut decides whether the backend is answering. While a bound is
// saturated, a caller beyond it is refused at once. A nil guard, or no
// bound, counts nothing.
func (g *Guard) wait(ctx context.Context) (*waiter, error) {
	if g == nil || g.cfg.MaxWaiting < 0 {
		return &waiter{ctx: ctx}, nil
	}
	tenant := tenantOf(ctx)
	w := &g.waiters
	w.mu.Lock()
	team := w.team(tenant, g.cfg.MaxWaitingPerTeam)
	teamOver, refused := false, false
	if team != nil {
		teamOver, refused = team.enter(team.answered)
	}
	if refused {
		w.drop(tenant, team)
		w.mu.Unlock()
		g.waitRefused.Inc()
		return nil, &TooManyWaitingError{Backend: g.name, Limit: team.limit, Namespace: tenant}
	}
	backendOver, refused := w.backend.enter(g.answered.Load())
	if refused {
		if team != nil {
			team.leave(false, 0)
			w.drop(tenant, team)
		}
		w.mu.Unlock()
		g.waitRefused.Inc()
		return nil, &TooManyWaitingError{Backend: g.name, Limit: w.backend.limit}
	}
	w.mu.Unlock()
	wt := &waiter{g: g, parent: ctx, ctx: ctx, tenant: tenant, team: team, teamOver: teamOver, backendOver: backendOver}
	if teamOver || backendOver {
		wt.beyond = true
		wt.mark.Store(g.sends.Load())
		wt.ctx, wt.cancel = context.WithCancelCause(ctx)
		wt.mu.Lock()
		wt.timer = g.graceClock.AfterFunc(g.cfg.WaitGrace, wt.graceRanOut)
		wt.mu.Unlock()
	}
	return wt, nil
}

// flight tells the waiter the mark of the flight it created or joined
// (flight.mark).
func (wt *waiter) flight(mark uint64) {
	if wt.beyond {
		wt.mark.Store(mark)
	}
}

// graceOut runs when the grace of a caller beyond a bound runs out. The
// backend counts as answering the caller when it has answered (any status
// but 504, headers received) a call whose sequence number is above the
// caller's mark: the caller's own flight's call, or one sent after it. Then
// the caller waits on. Otherwise the backend has held the caller's call at
// least WaitGrace (the flight started no later than the caller joined it)
// and answered nothing sent since: a stall, and the caller's wait ends
// (done saturates the bounds it was beyond). For a bound of a namespace's
// team rules, only that namespace's calls count: another team's or the
// cluster's answers say nothing of its queries.
//
// Why not "the backend answered anything lately": a backend answering
// every call after 15 s, under steady load, lands answers all the time,
// each for a call sent 15 s before; its waiting requests are exactly what
// the bound is for. And why not the caller's own wait: in a burst of 1,000
// requests of 1 MB answers on two cores, the adapter's own CPU holds a
// flight whose answer Prometheus gave within milliseconds for seconds
// (267-333 of the 1,000 were refused that way with a healthy Prometheus).
// For the same reason the verdict waits while the adapter's goroutines wait
// for a CPU (Guard.cpuBusy): the transport's reader of an answer already
// received can be one of them, so "held" says nothing of the backend then
// (22 and 121 of 1,000 were refused over 5,000 pods until it did).
func (wt *waiter) graceOut() {
	g := wt.g
	stall, again := wt.judge()
	if stall != nil && g.cpuBusy(g.judging.Load()) {
		// The adapter's own goroutines are waiting for a CPU (1,000
		// requests on 2 cores): the one that would read an answer the
		// backend sent within milliseconds may be among them, and the call
		// looks held all that time. Judge again once they have run.
		stall, again = nil, busyRecheck
	}
	if stall == nil {
		w := &g.waiters
		w.mu.Lock()
		w.pastGrace++
		w.mu.Unlock()
		if again > 0 {
			wt.rearm(again)
		}
		klog.V(4).InfoS("Request beyond the waiting bound waits past its grace: the backend answers, or the adapter is busy", "backend", g.name, "namespace", wt.tenant)
		return
	}
	wt.cancel(stall)
}

// judge is graceOut's verdict: the bounds the backend stalls for the
// caller (nil when none), or, when it does not only because no call has
// been held for the grace yet, how long until the oldest will have been
// (again; 0 when the backend answers).
func (wt *waiter) judge() (stall *graceStall, again time.Duration) {
	g, w := wt.g, &wt.g.waiters
	mark := wt.mark.Load()
	w.mu.Lock()
	team := wt.teamOver && wt.team.answered <= mark
	w.mu.Unlock()
	backend := wt.backendOver && g.answered.Load() <= mark
	if !team && !backend {
		return nil, 0
	}
	// The backend must also be holding a call (of the namespace, for a
	// team's bound) it was sent at least the grace ago: a flight whose
	// call the adapter has not sent yet, or sent late (its own CPU, in a
	// burst), says nothing of the backend.
	now, grace := g.clock.Now(), g.cfg.WaitGrace
	if team {
		team, again = g.held.heldFor(wt.tenant, now, grace)
	}
	if backend {
		var d time.Duration
		backend, d = g.held.heldFor("", now, grace)
		if again == 0 || (d > 0 && d < again) {
			again = d
		}
	}
	if !team && !backend {
		return nil, again
	}
	return &graceStall{team: team, backend: backend}, 0
}

// busyRecheck is how soon a stall verdict put off because the adapter was
// busy (Guard.cpuBusy) is judged again.
const busyRecheck = 100 * time.Millisecond

// runnableBusy is a Guard's default cpuBusy: more goroutines are ready to
// run (runtime/metrics) than twice GOMAXPROCS plus the verdicts being
// judged (judging: their own goroutines, started together when many
// graces run out at once), so a goroutine made ready now, such as the
// transport's reader of an answer that just came, waits for a CPU. An idle
// or steadily loaded adapter has about none waiting; a burst of 1,000
// requests on 2 cores, hundreds.
func runnableBusy(judging int64) bool {
	s := []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return false
	}
	return s[0].Value.Uint64() > uint64(2*runtime.GOMAXPROCS(0))+uint64(max(judging, 0))
}

// heldFor says whether the backend has held a call (of namespace ns's team
// rules when ns is not "") for grace by now; if not, again is how long
// until the oldest will have been (grace when none is held).
func (h *heldCalls) heldFor(ns string, now time.Time, grace time.Duration) (held bool, again time.Duration) {
	sent, ok := h.oldest(ns)
	if !ok {
		return false, grace
	}
	if d := now.Sub(sent); d < grace {
		return false, grace - d
	}
	return true, 0
}

// graceRanOut is the grace timer's function: it judges on another
// goroutine (graceOut reads the clock and may arm the timer again, and a
// fake clock runs a timer's function holding its lock).
func (wt *waiter) graceRanOut() {
	wt.g.judging.Add(1)
	go func() {
		defer wt.g.judging.Add(-1)
		wt.graceOut()
	}()
}

// rearm judges the caller's grace again after d, unless it is done by
// then.
func (wt *waiter) rearm(d time.Duration) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	if !wt.finished {
		wt.timer = wt.g.graceClock.AfterFunc(d, wt.graceRanOut)
	}
}

// done counts the caller out, given the error its wait ended with. When
// graceOut ended it, done saturates the bounds graceOut found stalled and
// returns a *TooManyWaitingError instead.
func (wt *waiter) done(err error) error {
	g := wt.g
	if g == nil {
		return err
	}
	var stall *graceStall
	if wt.beyond {
		wt.mu.Lock()
		wt.finished = true
		wt.timer.Stop()
		wt.mu.Unlock()
		if err != nil && wt.parent.Err() == nil {
			errors.As(context.Cause(wt.ctx), &stall)
		}
		wt.cancel(nil)
	}
	w := &g.waiters
	sends := g.sends.Load()
	w.mu.Lock()
	w.backend.leave(stall != nil && stall.backend, sends)
	if wt.team != nil {
		wt.team.leave(stall != nil && stall.team, sends)
		w.drop(wt.tenant, wt.team)
	}
	w.mu.Unlock()
	switch {
	case stall == nil:
		return err
	case stall.team:
		g.waitRefused.Inc()
		return &TooManyWaitingError{Backend: g.name, Limit: wt.team.limit, Namespace: wt.tenant}
	default:
		g.waitRefused.Inc()
		return &TooManyWaitingError{Backend: g.name, Limit: w.backend.limit}
	}
}

// noteAnswered records that the backend answered the call of sequence
// number seq (Guard.sends), made for namespace ns's team rules when ns is
// not "".
func (g *Guard) noteAnswered(seq uint64, ns string) {
	for {
		cur := g.answered.Load()
		if seq <= cur || g.answered.CompareAndSwap(cur, seq) {
			break
		}
	}
	if ns == "" {
		return
	}
	w := &g.waiters
	w.mu.Lock()
	if b := w.teams[ns]; b != nil && seq > b.answered {
		b.answered = seq
	}
	w.mu.Unlock()
}

// sentMark is the count of calls sent so far (Guard.sends): a flight's
// mark. 0 for a nil guard.
func (g *Guard) sentMark() uint64 {
	if g == nil {
		return 0
	}
	return g.sends.Load()
}

// team returns the bound of namespace ns's team rules (nil for "" or no
// bound), made when none of its callers waits. w.mu is held.
func (w *waiters) team(ns string, limit int) *waitBound {
	if ns == "" || limit < 0 {
		return nil
	}
	b := w.teams[ns]
	if b == nil {
		if w.teams == nil {
			w.teams = map[string]*waitBound{}
		}
		b = &waitBound{limit: limit}
		w.teams[ns] = b
	}
	return b
}

// drop forgets namespace ns's bound b once none of its callers waits.
// w.mu is held.
func (w *waiters) drop(ns string, b *waitBound) {
	if b.waiting == 0 && w.teams[ns] == b {
		delete(w.teams, ns)
	}
}

// heldCalls is a backend's calls sent and not yet answered or failed, by
// sequence number (Guard.sends), with when each was sent and for which
// namespace's team rules ("" the cluster's). At most the in-flight bound
// of them are held at once.
type heldCalls struct {
	mu    sync.Mutex
	calls map[uint64]heldCall
}

type heldCall struct {
	sent time.Time
	ns   string
}

func (h *heldCalls) add(seq uint64, sent time.Time, ns string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[uint64]heldCall{}
	}
	h.calls[seq] = heldCall{sent: sent, ns: ns}
}

func (h *heldCalls) remove(seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.calls, seq)
}

// oldest is when the earliest held call was sent, of namespace ns's team
// rules when ns is not "" (any call when it is); ok is false when none is
// held.
func (h *heldCalls) oldest(ns string) (sent time.Time, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.calls {
		if ns != "" && c.ns != ns {
			continue
		}
		if !ok || c.sent.Before(sent) {
			sent, ok = c.sent, true
		}
	}
	return sent, ok
}
