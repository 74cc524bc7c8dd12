package apistatus

import (
	"testing"
	"time"
)

// A burst of failures (an outage at 200 req/s for 60 s: 12,000) is logged
// as the burst plus the rate, and the first line after a quiet time says
// how many were left out.
func TestFailureLogRate(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := &failureLog{now: func() time.Time { return now }, tokens: failureLogBurst}
	logged, left := 0, 0
	for range 12000 {
		now = now.Add(5 * time.Millisecond)
		if ok, s := l.allow(); ok {
			logged++
			left += s
		}
	}
	if max := failureLogBurst + 60*failureLogRate + 1; logged > max || logged < 60*failureLogRate {
		t.Errorf("logged %d of 12000 failures in 60 s, want between %d and %d", logged, 60*failureLogRate, max)
	}
	now = now.Add(time.Minute)
	ok, s := l.allow()
	if !ok {
		t.Fatal("the first failure after a quiet minute is not logged")
	}
	if left+s+logged+1 != 12001 {
		t.Errorf("logged %d, reported left out %d: %d, want every failure accounted for (12001)", logged+1, left+s, logged+1+left+s)
	}
}
