package promclient

import (
	"context"
	"errors"
	"sync"
	"time"
	"unsafe"

	"github.com/prometheus/common/model"
	"k8s.io/utils/clock"
)

// landedRetention is how long the last successful result of a "now" query
// is kept for callers whose request arrived before it landed. It has to
// cover the time a request may spend between reaching the server and
// reaching the client (TLS, authentication, authorization, queueing behind
// other requests): a minute, the generic API server's default request
// timeout, past which the request is answered with a timeout anyway. A
// caller whose request is older queries afresh, which is always correct;
// no caller that arrived after a result landed ever takes it (beyond the
// window, within a burst), however long it is kept, so the retention costs memory
// (one result per distinct query of the last minute, within
// maxCacheEntries and maxKeptBytes), never freshness. Five seconds were
// too short: 1,000 concurrent requests over 5,000 pods kept 2 cores busy
// for 5-30 s, and the requests served after 5 s queried again.
const landedRetention = time.Minute

// flight is one request in progress, shared by every caller asking the same
// thing while it runs.
type flight struct {
	done    chan struct{}
	val     any
	err     error
	waiters int
	cancel  context.CancelFunc
	// keep says to remember a successful result in group.landed.
	keep bool
	// joined: a caller joined the flight (landed.shared).
	joined bool
	// started is when the call was sent (on the group's clock).
	started time.Time
	// mark is the backend guard's count of calls sent when the flight
	// started (group.mark): its own call is numbered above it.
	mark uint64
}

// landed is the last successful result of a key, when it was sent and when
// it landed, and its size (resultBytes). shared says it answered more
// than the caller that sent its query: another joined its flight or took
// it (serves).
type landed struct {
	val     any
	started time.Time
	at      time.Time
	shared  bool
	size    int
}

// maxKeptBytes bounds the estimated memory (resultBytes) of all the landed
// results kept: results that would go past it are not kept (their callers
// coalesce only while in flight) until a sweep makes room. With
// maxCacheEntries it bounds the memory the retention costs whatever the
// answers' sizes. It counts bytes, not samples: a bound of 2^20 samples let
// a few answers of long label values (50 MB answers) hold 1,446 MiB for a
// minute.
const maxKeptBytes = 64 << 20

// The estimated memory of a result's parts (resultBytes): a sample and a
// label without their strings, a label set's map entry, a string header, a
// native histogram and one of its buckets, and any result.
const (
	sampleBytes    = int(unsafe.Sizeof(Sample{}))
	labelBytes     = int(unsafe.Sizeof(Label{}))
	mapEntryBytes  = 48
	stringBytes    = int(unsafe.Sizeof(""))
	histogramBytes = int(unsafe.Sizeof(model.SampleHistogram{}))
	bucketBytes    = int(unsafe.Sizeof(model.HistogramBucket{})) + 8
	resultMinBytes = 64
)

// resultBytes estimates the memory a result holds: its samples, labels and
// strings (a vector), label sets (series) or strings (label names and
// values). The label strings of an answer share chunks (samples.go): their
// lengths are what they cost.
func resultBytes(val any) int {
	n := resultMinBytes
	switch v := val.(type) {
	case Samples:
		for i := range v {
			n += sampleBytes + len(v[i].Labels)*labelBytes
			for _, l := range v[i].Labels {
				n += len(l.Name) + len(l.Value)
			}
			if h := v[i].Histogram; h != nil {
				n += histogramBytes + len(h.Buckets)*bucketBytes
			}
		}
	case []model.LabelSet:
		for _, ls := range v {
			n += mapEntryBytes
			for k, x := range ls {
				n += mapEntryBytes + len(k) + len(x)
			}
		}
	case []string:
		for _, x := range v {
			n += stringBytes + len(x)
		}
	}
	return n
}

// serves says whether the result answers a request that arrived at
// arrived: one that arrived no later than it landed (the freshness rule),
// or, in a burst, one that arrived within window of when its query was
// sent. A burst is identical requests that overlap: the result already
// answered more than the request that sent its query (l.shared), and the
// later requests of the burst reach the client over more time than a fast
// query takes, as a busy handler chain takes them in one after another. A
// client asking one request at a time never overlaps itself: each of its
// results answers only it, so it is never answered from a result that
// landed before its request arrived, whatever the window.
func (l landed) serves(arrived time.Time, window time.Duration) bool {
	if !arrived.After(l.at) {
		return true
	}
	return l.shared && !arrived.After(l.started.Add(window))
}

// share says how a call may share results beyond joining a flight.
type share struct {
	// keep remembers the key's successful results (when they land) for
	// later callers that arrived before then. Only for calls whose answer
	// depends on when they run ("now" queries).
	keep bool
	// arrived is when the caller's request reached the server; zero when
	// unknown. A caller whose request arrived no later than the key's last
	// result landed takes that result: it is what the caller would have got
	// by joining the flight that was running (or not yet started) when it
	// arrived, so it is at least as fresh as the request. Joining a flight
	// already lets a caller take an answer Prometheus evaluated up to the
	// flight's duration before the caller arrived; in a burst, group.window
	// raises that bound to a fixed floor (see landed.serves and
	// Config.CoalesceWindow).
	arrived time.Time
	// onFlight, when not nil, is told the mark of the flight the caller
	// starts or joins (flight.mark), before it waits: the backend guard's
	// waiting bound asks whether the backend answered that flight's call
	// or a later one (waiter.flight).
	onFlight func(mark uint64)
}

// group coalesces identical calls: the first caller does the work on its
// own goroutine, later callers with the same key wait for its result. Each
// caller still honours its own context; when the last waiter leaves, the
// shared work is cancelled.
//
// With share.keep, the group also remembers a key's last successful result
// with the time it landed (on clock), for landedRetention, and answers a
// caller that arrived no later than that from it. Errors are never kept.
// Results older than landedRetention are dropped lazily: at most once per
// landedRetention, a call sweeps them all.
//
// window, when positive, also lets a caller that arrived up to window after
// a kept result's call was sent take it, even if it arrived after the
// result landed, when that result already answered another caller
// (landed.serves): the requests of a burst are stamped one after another as
// the server's handler chain takes them in, over more time than a fast
// query takes.
type group struct {
	clock  clock.PassiveClock
	window time.Duration
	// mark, when not nil, is the backend guard's count of calls sent
	// (Guard.sentMark), taken when a flight starts.
	mark func() uint64

	mu        sync.Mutex
	flights   map[string]*flight
	landed    map[string]landed
	keptSize  int // sum of the landed results' sizes (resultBytes)
	lastSweep time.Time
}

// do returns the result of fn for key, running fn at most once for all the
// callers that arrive while it runs, and not at all for a caller that sh
// lets use a result that landed after it arrived. onShare, when not nil, is
// called as soon as a caller joins a call already in flight or takes a
// landed result. fn runs under a context detached from the caller's
// cancellation (but keeping its values), cancelled when no caller waits any
// more.
func (g *group) do(ctx context.Context, key string, sh share, fn func(context.Context) (any, error), onShare func()) (any, error) {
	g.mu.Lock()
	if g.flights == nil {
		g.flights = make(map[string]*flight)
	}
	if len(g.landed) > 0 {
		now := g.clock.Now()
		g.sweepLocked(now)
		if l, ok := g.landed[key]; ok && !sh.arrived.IsZero() && l.serves(sh.arrived, g.window) && now.Sub(l.at) < landedRetention {
			if !l.shared {
				l.shared = true
				g.landed[key] = l
			}
			g.mu.Unlock()
			if onShare != nil {
				onShare()
			}
			return l.val, nil
		}
	}
	f, joined := g.flights[key]
	if !joined {
		if err := ctx.Err(); err != nil {
			// Nobody to answer: start nothing.
			g.mu.Unlock()
			return nil, err
		}
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), waiters: 1, cancel: cancel, keep: sh.keep, started: g.clock.Now()}
		if g.mark != nil {
			f.mark = g.mark()
		}
		g.flights[key] = f
		g.mu.Unlock()
		if sh.onFlight != nil {
			sh.onFlight(f.mark)
		}
		// The first caller runs fn on its own goroutine: no goroutine to
		// start and no hand-off to wait for on every query. It stays one of
		// the flight's waiters until its context ends (the AfterFunc),
		// exactly as a joined caller does; if that leaves nobody waiting,
		// fn's context is cancelled and fn returns early. If others still
		// wait, the first caller waits for fn too (within the query
		// timeout) and then returns its own context's error.
		stop := context.AfterFunc(ctx, func() { g.leave(key, f) })
		g.run(key, f, fctx, fn)
		if !stop() {
			return nil, ctx.Err()
		}
		return f.val, f.err
	}
	f.waiters++
	f.joined = true
	g.mu.Unlock()
	if sh.onFlight != nil {
		sh.onFlight(f.mark)
	}
	if onShare != nil {
		onShare()
	}
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		g.leave(key, f)
		return nil, ctx.Err()
	}
}

// errAbandoned is a flight's error when fn panicked.
var errAbandoned = errors.New("query abandoned: its caller panicked")

// run runs fn for flight f and lands it: the flight leaves the map and its
// successful result is kept (when f.keep) in one critical section, so a
// caller always finds one or the other; then its waiters are released. A
// panic in fn still lands the flight (with errAbandoned) before it goes on
// up the stack, so nobody waits for a flight that will never land.
func (g *group) run(key string, f *flight, fctx context.Context, fn func(context.Context) (any, error)) {
	returned := false
	defer func() {
		if !returned {
			f.val, f.err = nil, errAbandoned
		}
		g.mu.Lock()
		if g.flights[key] == f {
			delete(g.flights, key)
		}
		if f.keep && f.err == nil {
			g.keepLocked(key, f.val, f.started, f.joined)
		}
		g.mu.Unlock()
		f.cancel()
		close(f.done)
	}()
	f.val, f.err = fn(fctx)
	returned = true
}

// leave counts a caller out of flight f. When nobody waits any more, the
// call is cancelled and leaves the map, so the next caller starts afresh
// rather than join a dying call.
func (g *group) leave(key string, f *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f.waiters--
	if f.waiters == 0 {
		f.cancel()
		if g.flights[key] == f {
			delete(g.flights, key)
		}
	}
}

// keepLocked remembers val as key's result, sent at started and landed now,
// shared when another caller joined its flight. Beyond
// maxCacheEntries results, results of new keys are not kept until a sweep
// makes room (their callers coalesce only while in flight). g.mu must be
// held.
func (g *group) keepLocked(key string, val any, started time.Time, shared bool) {
	now := g.clock.Now()
	g.sweepLocked(now)
	if g.landed == nil {
		g.landed = make(map[string]landed)
	}
	old, replacing := g.landed[key]
	if !replacing && len(g.landed) >= maxCacheEntries {
		return
	}
	size := resultBytes(val)
	if g.keptSize-old.size+size > maxKeptBytes {
		// Too big to keep with the others: drop the key's older result too,
		// it is no use to anyone who could take the new one.
		if replacing {
			g.keptSize -= old.size
			delete(g.landed, key)
		}
		return
	}
	g.keptSize += size - old.size
	g.landed[key] = landed{val: val, started: started, at: now, shared: shared, size: size}
}

// sweepLocked drops the results older than landedRetention, at most once
// per landedRetention, so that a call costs O(1) amortized. g.mu must be
// held.
func (g *group) sweepLocked(now time.Time) {
	if now.Sub(g.lastSweep) < landedRetention {
		return
	}
	g.lastSweep = now
	for k, l := range g.landed {
		if now.Sub(l.at) >= landedRetention {
			g.keptSize -= l.size
			delete(g.landed, k)
		}
	}
}

// maxCacheEntries and maxCacheBytes bound the result cache (the estimated
// memory of its results, resultBytes); beyond them new results are not
// cached until expired entries are swept.
const (
	maxCacheEntries = 4096
	maxCacheBytes   = 64 << 20
)

type cacheEntry struct {
	val     any
	expires time.Time
	size    int
}

// resultCache keeps successful results for a short TTL. A zero TTL disables it.
type resultCache struct {
	ttl   time.Duration
	clock clock.PassiveClock

	mu      sync.Mutex
	entries map[string]cacheEntry
	size    int // sum of the entries' sizes
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
		c.size -= e.size
		delete(c.entries, key)
		return nil, false
	}
	return e.val, true
}

func (c *resultCache) put(key string, val any) {
	if c.ttl <= 0 {
		return
	}
	size := resultBytes(val)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if c.entries == nil {
		c.entries = make(map[string]cacheEntry)
	}
	old := c.entries[key]
	if len(c.entries) >= maxCacheEntries || c.size-old.size+size > maxCacheBytes {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				c.size -= e.size
				delete(c.entries, k)
			}
		}
		old = c.entries[key]
		if len(c.entries) >= maxCacheEntries || c.size-old.size+size > maxCacheBytes {
			return
		}
	}
	c.size += size - old.size
	c.entries[key] = cacheEntry{val: val, expires: now.Add(c.ttl), size: size}
}
