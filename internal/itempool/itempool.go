// Package itempool reuses the item slices of custom metrics answers from one
// request to the next.
//
// A `pods/*` answer over 100 pods is a slice of 100 MetricValue structs,
// 25.6 KB, about a third of all the bytes a request allocates; over 5,000
// pods it is 1.3 MB. The slice is garbage as soon as the answer is written,
// and allocating it again on every request makes the collector run that
// much more often. The custom-metrics-apiserver interface returns the list
// to the library, which encodes it, so only the request's handler knows when
// nobody reads it any more: the server wraps the innermost handler (the API
// handler, below the timeout filter: it returns only once the answer is
// written, even when the client was already answered with a timeout) in a
// Scope, the provider takes its slices from the Scope, and the wrapper
// releases them when the handler returns. Without a Scope in the context
// the slices are plain allocations, never reused.
package itempool

import (
	"context"
	"math/bits"
	"sync"

	"k8s.io/metrics/pkg/apis/custom_metrics"
)

// Size classes: powers of two from 2^minShift to 2^maxShift items. Larger
// answers are allocated and left to the collector: a pooled slice stays
// reachable (and scanned by every collection) until two collections after
// its release, and a burst of 1,000 concurrent 5,000-pod answers kept 2 GB
// of pooled slices alive, tripling the adapter's CPU per request in that
// burst. Up to 1,024 items (256 KiB), a burst's pooled slices cost no more
// than the answers in flight.
const (
	minShift = 4  // 16 items
	maxShift = 10 // 1,024 items (256 KiB)
)

var pools [maxShift + 1]sync.Pool

// class returns the size class holding n items and whether there is one.
func class(n int) (int, bool) {
	if n <= 0 || n > 1<<maxShift {
		return 0, false
	}
	s := bits.Len(uint(n - 1))
	if s < minShift {
		s = minShift
	}
	return s, true
}

type scopeKey struct{}

// Scope holds the slices handed out during one request.
type Scope struct {
	mu    sync.Mutex
	held  []*[]custom_metrics.MetricValue
	ended bool
}

// WithScope returns a context carrying a new Scope and the function that
// releases its slices to the pools. Call release only when nothing reads
// the objects built from them any more; after it, MetricValues in that
// context allocates.
func WithScope(ctx context.Context) (context.Context, func()) {
	s := &Scope{}
	return context.WithValue(ctx, scopeKey{}, s), s.release
}

// MetricValues returns a slice of n zero MetricValues: from a pool when ctx
// carries a live Scope (the slice then belongs to the Scope and must not be
// used after its release), else a new one.
func MetricValues(ctx context.Context, n int) []custom_metrics.MetricValue {
	s, _ := ctx.Value(scopeKey{}).(*Scope)
	c, ok := class(n)
	if s == nil || !ok {
		return make([]custom_metrics.MetricValue, n)
	}
	var p *[]custom_metrics.MetricValue
	if v, _ := pools[c].Get().(*[]custom_metrics.MetricValue); v != nil {
		p = v
	} else {
		b := make([]custom_metrics.MetricValue, 1<<c)
		p = &b
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		pools[c].Put(p)
		return make([]custom_metrics.MetricValue, n)
	}
	s.held = append(s.held, p)
	s.mu.Unlock()
	return (*p)[:n]
}

// release zeroes the Scope's slices (so they hold no references) and puts
// them back in their pools. Idempotent.
func (s *Scope) release() {
	s.mu.Lock()
	held := s.held
	s.held, s.ended = nil, true
	s.mu.Unlock()
	for _, p := range held {
		clear(*p)
		c, _ := class(len(*p))
		pools[c].Put(p)
	}
}
