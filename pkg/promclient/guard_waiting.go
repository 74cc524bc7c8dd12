package promclient

import (
	"context"
	"errors"
	"fmt"
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
// requests already wait on Backend's answers and the backend is saturated
// (a request beyond the limit waited WaitGrace without an answer). It is
// an ErrBackendBusy.
type TooManyWaitingError struct {
	Backend string
	Limit   int
}

// Error implements error.
func (e *TooManyWaitingError) Error() string {
	return fmt.Sprintf("request refused: %d requests already wait on backend %q, which is not answering them (--prometheus-max-waiting or the backend's max_waiting)",
		e.Limit, e.Backend)
}

// Unwrap makes it an ErrBackendBusy.
func (e *TooManyWaitingError) Unwrap() error { return ErrBackendBusy }

// errWaitGrace is the cause of the context of a request beyond the bound
// whose WaitGrace ran out.
var errWaitGrace = errors.New("waited past the grace of a request beyond the waiting bound")

// wait counts a caller in among the backend's waiting requests until the
// returned done is called with the error its wait ended with (nil: an
// answer). A caller beyond MaxWaiting gets a context that ends after
// WaitGrace; when that is what ended its wait, done marks the backend
// saturated and returns a *TooManyWaitingError to return instead. While the
// backend is saturated (until its waiting requests fall below the bound),
// a caller beyond the bound is refused at once. A nil guard, or no bound,
// counts nothing.
func (g *Guard) wait(ctx context.Context) (context.Context, func(error) error, error) {
	if g == nil || g.cfg.MaxWaiting < 0 {
		return ctx, func(err error) error { return err }, nil
	}
	g.wmu.Lock()
	over := g.waiting >= g.cfg.MaxWaiting
	if over && g.saturated {
		g.wmu.Unlock()
		g.waitRefused.Inc()
		return nil, nil, &TooManyWaitingError{Backend: g.name, Limit: g.cfg.MaxWaiting}
	}
	g.waiting++
	g.wmu.Unlock()
	if !over {
		return ctx, func(err error) error { g.leaveWaiting(false); return err }, nil
	}
	wctx, cancel := context.WithTimeoutCause(ctx, g.cfg.WaitGrace, errWaitGrace)
	return wctx, func(err error) error {
		graceOut := err != nil && ctx.Err() == nil && errors.Is(context.Cause(wctx), errWaitGrace)
		cancel()
		g.leaveWaiting(graceOut)
		if graceOut {
			g.waitRefused.Inc()
			return &TooManyWaitingError{Backend: g.name, Limit: g.cfg.MaxWaiting}
		}
		return err
	}, nil
}

// leaveWaiting counts a caller out; saturated says its grace ran out.
func (g *Guard) leaveWaiting(saturated bool) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	g.waiting--
	switch {
	case g.waiting < g.cfg.MaxWaiting:
		g.saturated = false
	case saturated:
		g.saturated = true
	}
}
