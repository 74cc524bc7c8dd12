package promclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
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
	// (500 req/s answered in 50 ms is 25), and a burst beyond it that one
	// query answers within WaitGrace is served whole. The transport's
	// bound (DefaultMaxConcurrent) counts a coalesced query once, so it
	// alone let the joiners of stalled queries fill every slot.
	DefaultMaxWaiting = 40
	// DefaultWaitGrace is how long a request beyond MaxWaiting may wait
	// before its backend counts as saturated: a burst of identical
	// requests that one fast query answers (1,000 at once, bench suite)
	// still shares that query, while a backend that answers none of them
	// within it fails the requests beyond the bound at once.
	DefaultWaitGrace = time.Second
)

// rejectedWaiting is the reason label of the requests refused by the
// waiting bound.
const rejectedWaiting = "too_many_waiting"

// TooManyWaitingError is the error of a request refused because Limit
// requests already wait on Backend's answers (of the team rules of
// Namespace, when set) and the backend is saturated (a request beyond the
// limit waited WaitGrace without an answer). It is an ErrBackendBusy.
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

// errWaitGrace is the cause of the context of a request beyond the bound
// whose WaitGrace ran out.
var errWaitGrace = errors.New("waited past the grace of a request beyond the waiting bound")

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
// for one namespace's team rules): see Guard.wait.
type waitBound struct {
	limit     int
	waiting   int
	saturated bool
}

// enter counts a caller in unless refused (beyond the limit while
// saturated); over says it is beyond the limit. The guard's wmu is held.
func (b *waitBound) enter() (over, refused bool) {
	over = b.waiting >= b.limit
	if over && b.saturated {
		return true, true
	}
	b.waiting++
	return over, false
}

// leave counts a caller out; graceOut says its grace ran out beyond the
// limit, which saturates the bound while the waiting stay at it. The
// guard's wmu is held.
func (b *waitBound) leave(graceOut bool) {
	b.waiting--
	switch {
	case b.waiting < b.limit:
		b.saturated = false
	case graceOut:
		b.saturated = true
	}
}

// waiters is a guard's waiting bounds: the backend's and, for callers of
// team rules, one per namespace (dropped when none of its callers waits).
type waiters struct {
	mu      sync.Mutex
	backend waitBound
	teams   map[string]*waitBound
}

// wait counts a caller in among the backend's waiting requests (and its
// namespace's, for a team rule's call: WithTenant) until the returned done
// is called with the error its wait ended with (nil: an answer). A caller
// beyond a bound gets a context that ends after WaitGrace; when that is
// what ended its wait, done saturates the bounds it was beyond and returns
// a *TooManyWaitingError to return instead. While a bound is saturated
// (until its waiting requests fall below it), a caller beyond it is
// refused at once. A nil guard, or no bound, counts nothing.
func (g *Guard) wait(ctx context.Context) (context.Context, func(error) error, error) {
	if g == nil || g.cfg.MaxWaiting < 0 {
		return ctx, func(err error) error { return err }, nil
	}
	tenant := tenantOf(ctx)
	w := &g.waiters
	w.mu.Lock()
	team := w.team(tenant, g.cfg.MaxWaitingPerTeam)
	teamOver, refused := false, false
	if team != nil {
		teamOver, refused = team.enter()
	}
	if refused {
		w.drop(tenant, team)
		w.mu.Unlock()
		g.waitRefused.Inc()
		return nil, nil, &TooManyWaitingError{Backend: g.name, Limit: team.limit, Namespace: tenant}
	}
	backendOver, refused := w.backend.enter()
	if refused {
		if team != nil {
			team.leave(false)
			w.drop(tenant, team)
		}
		w.mu.Unlock()
		g.waitRefused.Inc()
		return nil, nil, &TooManyWaitingError{Backend: g.name, Limit: w.backend.limit}
	}
	w.mu.Unlock()
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if teamOver || backendOver {
		wctx, cancel = context.WithTimeoutCause(ctx, g.cfg.WaitGrace, errWaitGrace)
	}
	return wctx, func(err error) error {
		graceOut := err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), errWaitGrace)
		cancel()
		w.mu.Lock()
		w.backend.leave(graceOut && backendOver)
		if team != nil {
			team.leave(graceOut && teamOver)
			w.drop(tenant, team)
		}
		w.mu.Unlock()
		if !graceOut {
			return err
		}
		g.waitRefused.Inc()
		if teamOver {
			return &TooManyWaitingError{Backend: g.name, Limit: team.limit, Namespace: tenant}
		}
		return &TooManyWaitingError{Backend: g.name, Limit: w.backend.limit}
	}, nil
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
