package provider

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestSharedRefreshLead checks how long before expiry a shared answer is
// refreshed, and so how many queries a period of requests sends
// (MaxAge / (MaxAge - lead)): twice the last query's duration, at least
// SharedRefreshMinLead, at most half of MaxAge.
func TestSharedRefreshLead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxAge time.Duration
		took   time.Duration
		want   time.Duration
	}{
		{name: "instant query: the least lead", maxAge: 15 * time.Second, took: 0, want: 250 * time.Millisecond},
		{name: "just under the least lead's half", maxAge: 15 * time.Second, took: 124 * time.Millisecond, want: 250 * time.Millisecond},
		{name: "twice the query", maxAge: 15 * time.Second, took: 400 * time.Millisecond, want: 800 * time.Millisecond},
		{name: "slow query: half of MaxAge at most", maxAge: 15 * time.Second, took: 5 * time.Second, want: 7500 * time.Millisecond},
		{name: "the shortest MaxAge", maxAge: time.Second, took: 10 * time.Millisecond, want: 250 * time.Millisecond},
		{name: "the shortest MaxAge, slow query", maxAge: time.Second, took: 300 * time.Millisecond, want: 500 * time.Millisecond},
		{name: "the longest MaxAge", maxAge: time.Minute, took: 50 * time.Millisecond, want: 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSharedEvaluator(SharedConfig{MaxAge: tc.maxAge}, clocktesting.NewFakeClock(time.Unix(0, 0)))
			if diff := cmp.Diff(tc.want, s.refreshLead(tc.took)); diff != "" {
				t.Errorf("refreshLead(%v) at MaxAge %v (-want +got):\n%s", tc.took, tc.maxAge, diff)
			}
		})
	}
	// At the default MaxAge and a query under 125 ms, a period of 15 s
	// sends at most 1.02 queries (a tenth of MaxAge sent 1.11).
	s := newSharedEvaluator(SharedConfig{}, clocktesting.NewFakeClock(time.Unix(0, 0)))
	maxAge := s.cfg.MaxAge
	if perPeriod := float64(maxAge) / float64(maxAge-s.refreshLead(100*time.Millisecond)); perPeriod > 1.02 {
		t.Errorf("queries per period at the default MaxAge = %.3f, want at most 1.02", perPeriod)
	}
}
