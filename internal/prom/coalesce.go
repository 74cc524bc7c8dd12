package prom

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// flight is one request in progress, shared by every caller asking the same
// thing while it runs.
type flight struct {
	done    chan struct{}
	val     any
	err     error
	waiters int
	cancel  context.CancelFunc
}

// group coalesces concurrent identical calls: the first caller starts the
// work in its own goroutine, later callers with the same key wait for its
// result. Each caller still honours its own context; when the last waiter
// leaves, the shared work is cancelled.
type group struct {
	mu      sync.Mutex
	flights map[string]*flight
}

// do returns the result of fn for key, running fn at most once for all the
// callers that arrive while it runs. onJoin, when not nil, is called as soon
// as a caller joins a call already in flight. fn runs under a context detached from the
// caller's cancellation (but keeping its values), cancelled when no caller
// waits any more.
func (g *group) do(ctx context.Context, key string, fn func(context.Context) (any, error), onJoin func()) (any, error) {
	g.mu.Lock()
	if g.flights == nil {
		g.flights = make(map[string]*flight)
	}
	f, joined := g.flights[key]
	if joined {
		f.waiters++
		g.mu.Unlock()
		if onJoin != nil {
			onJoin()
		}
	} else {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), waiters: 1, cancel: cancel}
		g.flights[key] = f
		g.mu.Unlock()
		go func() {
			f.val, f.err = fn(fctx)
			g.mu.Lock()
			if g.flights[key] == f {
				delete(g.flights, key)
			}
			g.mu.Unlock()
			cancel()
			close(f.done)
		}()
	}

	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		g.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			// Nobody wants the answer any more: stop the request and let
			// the next caller start afresh rather than join a dying call.
			f.cancel()
			if g.flights[key] == f {
				delete(g.flights, key)
			}
		}
		g.mu.Unlock()
		return nil, ctx.Err()
	}
}

// maxCacheEntries bounds the result cache; beyond it new results are not
// cached until expired entries are swept.
const maxCacheEntries = 4096

type cacheEntry struct {
	val     any
	expires time.Time
}

// resultCache keeps successful results for a short TTL. A zero TTL disables it.
type resultCache struct {
	ttl   time.Duration
	clock clock.PassiveClock

	mu      sync.Mutex
	entries map[string]cacheEntry
}

func (c *resultCache) get(key string) (any, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	if !c.clock.Now().Before(e.expires) {
		delete(c.entries, key)
		return nil, false
	}
	return e.val, true
}

func (c *resultCache) put(key string, val any) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if c.entries == nil {
		c.entries = make(map[string]cacheEntry)
	}
	if len(c.entries) >= maxCacheEntries {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCacheEntries {
			return
		}
	}
	c.entries[key] = cacheEntry{val: val, expires: now.Add(c.ttl)}
}
