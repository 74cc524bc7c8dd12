package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Interleaved overhead measurement.
//
// BenchmarkOverhead's legs last 10-30 s each, one after the other: the
// machine's state drifts between them (a Prometheus compaction, the head
// block filling, a neighbour on the host), and the difference of two p99s
// taken minutes apart spread from -2.9 to +4.5 ms between identical runs.
// The interleaved run cuts both legs into short segments and alternates
// them (adapter, Prometheus, Prometheus, adapter, adapter, ...), so both
// legs sample the same minute of the machine, and resamples the pairs of
// segments (a block bootstrap: requests of one segment share its pauses and
// are not independent draws) for a confidence interval on the difference.

// leg names one side of the comparison.
type leg int

const (
	adapterLeg leg = iota
	prometheusLeg
)

func (l leg) String() string {
	if l == adapterLeg {
		return "adapter"
	}
	return "prometheus"
}

// pairOrder returns the order of the two legs in pair i: ABBA (adapter
// first in even pairs, Prometheus first in odd ones), so neither leg always
// follows the other (the first segment after a switch finds the previous
// leg's answers still landing, and its connections idle for a segment).
func pairOrder(i int) [2]leg {
	if i%2 == 0 {
		return [2]leg{adapterLeg, prometheusLeg}
	}
	return [2]leg{prometheusLeg, adapterLeg}
}

// quantileMS is the q-quantile (0 < q <= 1) of sorted latencies in ms, by
// the same rule as result.percentile (the ceil(q*n)-th smallest); NaN when
// there are none.
func quantileMS(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := max(int(math.Ceil(q*float64(len(sorted))))-1, 0)
	return float64(sorted[i]) / float64(time.Millisecond)
}

// pooledQuantile is the q-quantile, in ms, of the latencies of the segments
// picked (by index, repeats allowed), in the scratch slice buf.
func pooledQuantile(segments [][]time.Duration, picked []int, q float64, buf []time.Duration) (float64, []time.Duration) {
	buf = buf[:0]
	for _, i := range picked {
		buf = append(buf, segments[i]...)
	}
	slices.Sort(buf)
	return quantileMS(buf, q), buf
}

// diffInterval is a quantile difference between the legs with its
// bootstrap confidence interval, in ms.
type diffInterval struct {
	Diff, Lo, Hi float64
}

// bootstrapDiff returns the q-quantile of the adapter leg's latencies less
// that of the Prometheus leg's, both pooled over all segments, and its
// central (1-alpha) percentile-bootstrap interval over resamples: each
// resample draws len(adapter) pairs of segments with replacement (segment i
// of both legs together: they ran side by side) and takes the difference
// of the pooled quantiles. The two legs must have the same number of
// segments; seed makes the interval reproducible for the same latencies.
func bootstrapDiff(adapter, prometheus [][]time.Duration, q, alpha float64, resamples int, seed uint64) diffInterval {
	n := len(adapter)
	if n == 0 || n != len(prometheus) {
		return diffInterval{math.NaN(), math.NaN(), math.NaN()}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	var bufA, bufP []time.Duration
	var qa, qp float64
	qa, bufA = pooledQuantile(adapter, all, q, bufA)
	qp, bufP = pooledQuantile(prometheus, all, q, bufP)
	out := diffInterval{Diff: qa - qp, Lo: math.NaN(), Hi: math.NaN()}
	if resamples <= 0 {
		return out
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	diffs := make([]float64, 0, resamples)
	picked := make([]int, n)
	for range resamples {
		for i := range picked {
			picked[i] = rng.IntN(n)
		}
		qa, bufA = pooledQuantile(adapter, picked, q, bufA)
		qp, bufP = pooledQuantile(prometheus, picked, q, bufP)
		if !math.IsNaN(qa) && !math.IsNaN(qp) {
			diffs = append(diffs, qa-qp)
		}
	}
	if len(diffs) == 0 {
		return out
	}
	slices.Sort(diffs)
	at := func(p float64) float64 {
		i := min(max(int(math.Floor(p*float64(len(diffs)))), 0), len(diffs)-1)
		return diffs[i]
	}
	out.Lo, out.Hi = at(alpha/2), at(1-alpha/2)
	return out
}
