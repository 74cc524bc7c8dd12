// Package turns bounds how many requests build their answers at once: the
// CPU-heavy part of a request once its data is in hand (the provider
// turning Prometheus's samples into metric values, then the list encoded).
//
// The server gives each request a Turn (Turns.Begin) and ends it at the
// answer's first write or when the handler returns (Turn.End); the
// Prometheus client takes it (Take) as soon as a call has its answer, so
// that a request waiting on a slow or stalled backend holds none, and
// neither does one writing to a slow client.
package turns

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Default is the default bound: twice the cores the Go runtime schedules
// on (GOMAXPROCS, which follows the container's CPU limit), enough to keep
// every core busy while an answer's goroutine waits for memory or the
// collector, few enough that a request arriving during a burst is taken in
// without waiting behind hundreds of answers being built.
func Default() int { return 2 * runtime.GOMAXPROCS(0) }

// Observer receives how long a request waited for its turn, in seconds.
type Observer interface{ Observe(float64) }

// Turns is a bound on the answers built at once. A nil *Turns is no bound.
type Turns struct {
	slots  chan struct{}
	waited Observer
}

// New returns turns for at most n answers at once; nil (no bound) when n
// is 0 or less. waited may be nil.
func New(n int, waited Observer) *Turns {
	if n <= 0 {
		return nil
	}
	return &Turns{slots: make(chan struct{}, n), waited: waited}
}

// Held is how many turns are held now.
func (t *Turns) Held() int {
	if t == nil {
		return 0
	}
	return len(t.slots)
}

type key struct{}

// Turn is one request's claim on Turns.
type Turn struct {
	turns *Turns
	mu    sync.Mutex
	held  bool
	done  bool // ended for good: the answer is being written or the handler returned
}

// Begin gives the request of ctx its turn (nil Turns: none, the request
// never waits).
func (t *Turns) Begin(ctx context.Context) (context.Context, *Turn) {
	if t == nil {
		return ctx, nil
	}
	tn := &Turn{turns: t}
	return context.WithValue(ctx, key{}, tn), tn
}

// Take waits for the turn of ctx's request, within ctx. A request without
// one (no bound, or a call outside a request, such as discovery) goes on at
// once; so does one that already holds it or whose turn ended.
func Take(ctx context.Context) error {
	tn, _ := ctx.Value(key{}).(*Turn)
	if tn == nil {
		return nil
	}
	tn.mu.Lock()
	if tn.held || tn.done {
		tn.mu.Unlock()
		return nil
	}
	tn.mu.Unlock()
	start := time.Now()
	select {
	case tn.turns.slots <- struct{}{}:
	default:
		select {
		case tn.turns.slots <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if tn.turns.waited != nil {
		tn.turns.waited.Observe(time.Since(start).Seconds())
	}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if tn.done || tn.held {
		// Ended meanwhile (the handler's timeout), or taken by another
		// call of the same request: give this slot back.
		<-tn.turns.slots
		return nil
	}
	tn.held = true
	return nil
}

// End gives the turn back for good; later Take calls go on at once.
func (tn *Turn) End() {
	if tn == nil {
		return
	}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if tn.held {
		<-tn.turns.slots
		tn.held = false
	}
	tn.done = true
}
