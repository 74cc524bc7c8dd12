//go:build e2e && bench

package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

const (
	// EnvPairs is the number of segment pairs of the interleaved overhead
	// run (default 30).
	EnvPairs = "PROMSCALER_BENCH_PAIRS"
	// EnvSegment is the length of each segment of the interleaved overhead
	// run (default 1s).
	EnvSegment = "PROMSCALER_BENCH_SEGMENT"
)

// interleavedResamples is how many bootstrap resamples give the interval.
const interleavedResamples = 2000

// benchOverheadInterleaved measures the adapter leg and the Prometheus leg
// of BenchmarkOverhead in pairs of short segments, alternating (pairOrder),
// and reports the p99 difference of the pooled legs with a 95 % block
// bootstrap interval over the pairs (bootstrapDiff), the legs' pooled
// percentiles, the adapter's own time and each leg's stalls.
func (s *stack) benchOverheadInterleaved(b *testing.B, a *adapterProc, rate int) {
	ctx := context.Background()
	pairs := envInt(EnvPairs, 30)
	seg := envDuration(EnvSegment, time.Second)
	ns := servingNamespace(0)
	adapterURL := podsStarURL(a.url, ns)

	// The PromQL the adapter sends for the request, from the query log;
	// one second of each leg, unmeasured, so connections are up.
	qlog := newQueryLog(s.prom.QueryLogFile)
	openLoop(ctx, s.admin, rate, time.Second, adapterURL)
	logged, err := qlog.entries(`namespace="` + ns + `"`)
	if err != nil || len(logged) == 0 {
		b.Fatalf("no query for %s in Prometheus's query log (%v)", ns, err)
	}
	query := logged[0].query
	raw := s.prom.URL + "/api/v1/query?" + url.Values{"query": {query}}.Encode()
	openLoop(ctx, s.promHC, rate, time.Second, raw)

	before := s.adapterCounters(ctx, a)
	prof := s.startProfile(ctx, a, time.Duration(2*pairs)*seg)
	var legs [2][]result
	start := time.Now()
	for i := range pairs {
		for _, l := range pairOrder(i) {
			if l == adapterLeg {
				legs[l] = append(legs[l], openLoop(ctx, s.admin, rate, seg, adapterURL))
			} else {
				legs[l] = append(legs[l], openLoop(ctx, s.promHC, rate, seg, raw))
			}
		}
	}
	elapsed := time.Since(start)
	prof.stop(ctx, s, a)
	after := s.adapterCounters(ctx, a)

	var lat [2][][]time.Duration
	var pooled [2]result
	for l, segs := range legs {
		allWaits := true
		for _, r := range segs {
			lat[l] = append(lat[l], r.latencies)
			p := &pooled[l]
			p.requests += r.requests
			p.errors += r.errors
			p.elapsed += r.elapsed
			p.latencies = append(p.latencies, r.latencies...)
			p.due = append(p.due, r.due...)
			p.waits = append(p.waits, r.waits...)
			allWaits = allWaits && len(r.waits) == len(r.latencies)
			if p.firstErr == "" {
				p.firstErr = r.firstErr
			}
		}
		if !allWaits {
			pooled[l].waits = nil // ownPercentile is then NaN
		}
	}
	if dir := os.Getenv(EnvTimeline); dir != "" {
		for l, r := range pooled {
			if err := r.writeTimeline(dir, fmt.Sprintf("overhead-%d-interleaved-%s.txt", rate, leg(l))); err != nil {
				b.Errorf("%s: %v", EnvTimeline, err)
			}
		}
	}
	ra, rp := pooled[adapterLeg], pooled[prometheusLeg]
	p99 := bootstrapDiff(lat[adapterLeg], lat[prometheusLeg], 0.99, 0.05, interleavedResamples, 1)
	p50 := bootstrapDiff(lat[adapterLeg], lat[prometheusLeg], 0.5, 0.05, interleavedResamples, 1)
	queries := after.queries - before.queries
	progress("overhead at %d/s, %d interleaved pairs of %s segments (%s): adapter p50 %.2f p99 %.2f ms, Prometheus p50 %.2f p99 %.2f ms: "+
		"p99 overhead %+.2f ms (95%% interval %+.2f..%+.2f), p50 overhead %+.2f ms (%+.2f..%+.2f); adapter's own time p50 %.2f p99 %.2f ms; "+
		"%d+%d requests (%d errors%s), the adapter sent %.0f queries (%.2f per request); stalls: adapter leg %v, Prometheus leg %v; load %s",
		rate, pairs, seg, elapsed.Round(time.Second), ra.percentile(0.5), ra.percentile(0.99), rp.percentile(0.5), rp.percentile(0.99),
		p99.Diff, p99.Lo, p99.Hi, p50.Diff, p50.Lo, p50.Hi, ra.ownPercentile(0.5), ra.ownPercentile(0.99),
		ra.requests, rp.requests, ra.errors+rp.errors, errSuffix(ra.firstErr+rp.firstErr), queries, queries/float64(max(ra.requests, 1)),
		ra.stalls(), rp.stalls(), framework.LoadAvg())
	reportLegs(b, ra, rp)
	b.ReportMetric(p99.Diff, "overhead-p99-ms")
	b.ReportMetric(p99.Lo, "overhead-p99-lo-ms")
	b.ReportMetric(p99.Hi, "overhead-p99-hi-ms")
	b.ReportMetric(p50.Diff, "overhead-p50-ms")
	b.ReportMetric(ra.ownPercentile(0.5), "own-p50-ms")
	b.ReportMetric(ra.ownPercentile(0.99), "own-p99-ms")
	b.ReportMetric(float64(ra.stalls().Stalls), "stalls")
	b.ReportMetric(float64(rp.stalls().Stalls), "prom-stalls")
	b.ReportMetric(float64(ra.errors+rp.errors), "errors")
	b.ReportMetric(queries/float64(max(ra.requests, 1)), "prom-queries/req")
}
