package controller

import (
	"time"

	"k8s.io/client-go/util/workqueue"
)

// fixedIntervalRateLimiter delays every item by the same interval: with
// AddRateLimited after each reconcile, an HPA is reconciled once per sync
// period (upstream's FixedItemIntervalRateLimiter).
type fixedIntervalRateLimiter struct {
	interval time.Duration
}

var _ workqueue.TypedRateLimiter[string] = fixedIntervalRateLimiter{}

func newFixedIntervalRateLimiter(interval time.Duration) workqueue.TypedRateLimiter[string] {
	return fixedIntervalRateLimiter{interval: interval}
}

// When implements workqueue.TypedRateLimiter.
func (r fixedIntervalRateLimiter) When(string) time.Duration { return r.interval }

// NumRequeues implements workqueue.TypedRateLimiter.
func (fixedIntervalRateLimiter) NumRequeues(string) int { return 1 }

// Forget implements workqueue.TypedRateLimiter.
func (fixedIntervalRateLimiter) Forget(string) {}
