package bench

import (
	"fmt"
	"slices"
	"time"
)

// stallStats describes the stalls of an open-loop run: runs of at least
// minRun requests, consecutive in the order they were due, each answered no
// faster than a threshold. A stall is what a pause of one of the processes
// on the path (the load generator, the adapter, Prometheus: a collection,
// one thread running long while the others wait) looks like from the
// client: every request due during the pause is answered when it ends, so
// their latencies fall by the request period one after the other. The p99
// of a run at 500 req/s is decided by a few of them, so their number and
// length say more about a run's p99 than its median does.
type stallStats struct {
	// Stalls is the number of runs, Requests the requests in them.
	Stalls, Requests int
	// Longest is the longest stall: from the first of its requests being
	// due to the last of them being answered.
	Longest time.Duration
}

func (s stallStats) String() string {
	return fmt.Sprintf("%d stalls (%d requests, longest %.1f ms)", s.Stalls, s.Requests, float64(s.Longest)/float64(time.Millisecond))
}

// stallsOf finds the stalls among requests due at due[i] and answered
// after latencies[i] (the two slices aligned, in any order): runs of at
// least minRun requests, consecutive by due time, each at least threshold.
func stallsOf(due []time.Time, latencies []time.Duration, threshold time.Duration, minRun int) stallStats {
	n := min(len(due), len(latencies))
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return due[a].Compare(due[b]) })
	var (
		st                stallStats
		run               int
		first, lastAnswer time.Time
	)
	end := func() {
		if run >= minRun {
			st.Stalls++
			st.Requests += run
			st.Longest = max(st.Longest, lastAnswer.Sub(first))
		}
		run = 0
	}
	for _, i := range idx {
		if latencies[i] < threshold {
			end()
			continue
		}
		answered := due[i].Add(latencies[i])
		if run == 0 {
			first, lastAnswer = due[i], answered
		} else if answered.After(lastAnswer) {
			lastAnswer = answered
		}
		run++
	}
	end()
	return st
}
