//go:build e2e && bench

package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// Environment variables of BenchmarkAB.
const (
	// EnvAB lists the adapter binaries BenchmarkAB compares, as
	// name=path pairs separated by commas, e.g.
	// "main=/tmp/ab/main/adapter,lean=/tmp/ab/lean/adapter". The first is
	// the baseline the others are compared with. Unset: BenchmarkAB skips.
	EnvAB = "PROMSCALER_BENCH_AB"
	// EnvABRounds is how many times each binary is measured (default 2),
	// in the order A B A B ... on the one stack.
	EnvABRounds = "PROMSCALER_BENCH_AB_ROUNDS"
	// EnvABRuns selects the runs of each round, comma-separated, from
	// identical, distinct, star5000, coalesce (default: all of these), and
	// coalesce-all (the burst over both sizes with both senders; only when
	// named).
	EnvABRuns = "PROMSCALER_BENCH_AB_RUNS"
)

// abBinary is one binary of an A/B comparison.
type abBinary struct{ name, path string }

func abBinaries() ([]abBinary, error) {
	var out []abBinary
	for _, f := range strings.Split(os.Getenv(EnvAB), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, path, ok := strings.Cut(f, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("%s: %q is not name=path", EnvAB, f)
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%s: binary %s: %w", EnvAB, name, err)
		}
		out = append(out, abBinary{name, path})
	}
	return out, nil
}

// abFigures collects each binary's figures over the rounds:
// binary -> figure -> one value per round.
type abFigures map[string]map[string][]float64

func (f abFigures) add(bin, figure string, v float64) {
	if f[bin] == nil {
		f[bin] = map[string][]float64{}
	}
	f[bin][figure] = append(f[bin][figure], v)
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkAB measures several adapter binaries (PROMSCALER_BENCH_AB) on
// the same stack, each started fresh with the default flags (and
// PROMSCALER_BENCH_SERVING_ARGS) and measured in turn, A B A B ...
// (PROMSCALER_BENCH_AB_ROUNDS): pods/* over 100 pods with 8 workers on one
// namespace (identical) and on 8 (distinct: no query is shared), pods/*
// over the 5,000-pod namespace one request at a time (star5000), 1,000
// identical requests at once over 100 pods (coalesce: queries sent), and
// the adapter's peak RSS after those runs. It ends with each figure's
// median and range per binary and the medians' difference from the first
// binary: the form of the A/B a performance work-around needs (issue 18).
func BenchmarkAB(b *testing.B) {
	bins, err := abBinaries()
	if err != nil {
		b.Fatal(err)
	}
	if len(bins) == 0 {
		b.Skipf("%s not set", EnvAB)
	}
	runs := map[string]bool{"identical": true, "distinct": true, "star5000": true, "coalesce": true}
	if v := os.Getenv(EnvABRuns); v != "" {
		runs = map[string]bool{}
		for _, r := range strings.Split(v, ",") {
			runs[strings.TrimSpace(r)] = true
		}
	}
	s := setup(b)
	rounds := envInt(EnvABRounds, 2)
	figs := abFigures{}
	var order []string // figure names in first-seen order
	record := func(bin, figure string, v float64) {
		if !slices.Contains(order, figure) {
			order = append(order, figure)
		}
		figs.add(bin, figure, v)
	}
	w := s.cfg.workers
	for round := 1; round <= rounds; round++ {
		for _, bin := range bins {
			b.Run(fmt.Sprintf("round-%d/bin=%s", round, bin.name), func(b *testing.B) {
				s.abRound(b, bin, round, runs, w, func(figure string, v float64) { record(bin.name, figure, v) })
			})
		}
	}
	base := bins[0].name
	var lines []string
	for _, figure := range order {
		bm := median(figs[base][figure])
		for _, bin := range bins {
			vs := figs[bin.name][figure]
			if len(vs) == 0 {
				continue
			}
			m := median(vs)
			line := fmt.Sprintf("%-28s %-12s median %10.3f  range %10.3f..%-10.3f n=%d", figure, bin.name, m, slices.Min(vs), slices.Max(vs), len(vs))
			if bin.name != base && bm != 0 && !math.IsNaN(bm) {
				line += fmt.Sprintf("  %+.1f %% vs %s", (m-bm)/math.Abs(bm)*100, base)
			}
			lines = append(lines, line)
		}
	}
	progress("A/B summary (%d rounds, load %s):\n%s", rounds, framework.LoadAvg(), strings.Join(lines, "\n"))
}

// abRound starts bin, measures the selected runs on it, reports each
// figure to record, and stops it.
func (s *stack) abRound(b *testing.B, bin abBinary, round int, runs map[string]bool, workers int, record func(string, float64)) {
	ctx := context.Background()
	a, err := s.startAdapterBin("ab-"+bin.name+"-"+strconv.Itoa(round), bin.path, s.cfg.servingArgs...)
	if err != nil {
		b.Fatal(err)
	}
	defer a.stop()
	if err := s.waitServing(ctx, a); err != nil {
		b.Fatal(err)
	}
	// Let the start-up's discovery and informers settle.
	time.Sleep(2 * time.Second)
	closed := func(name string, nsOf func(int) string) {
		m := s.measure(b, a, servingMetric, func() result {
			return closedLoop(ctx, s.admin, workers, s.cfg.duration, func(i int) string { return podsStarURL(a.url, nsOf(i)) })
		})
		m.log(fmt.Sprintf("%s round %d: %s", bin.name, round, name))
		record(name+" req/s", m.res.perSecond())
		record(name+" cpu-ms/req", m.perReq(m.adapterCPU)*1000)
		record(name+" p50-ms", m.res.percentile(0.5))
	}
	if runs["identical"] {
		closed(fmt.Sprintf("identical-c%d", workers), func(int) string { return servingNamespace(0) })
	}
	if runs["distinct"] {
		closed(fmt.Sprintf("distinct-c%d", workers), servingNamespace)
	}
	if runs["star5000"] {
		u := podsStarURL(a.url, bigNamespace)
		sequential(1, func() (*http.Request, error) { return http.NewRequestWithContext(ctx, http.MethodGet, u, nil) }, s.admin)
		m := s.measure(b, a, `namespace="`+bigNamespace+`"`, func() result {
			r, _ := sequential(star5000Requests, func() (*http.Request, error) { return http.NewRequestWithContext(ctx, http.MethodGet, u, nil) }, s.admin)
			return r
		})
		m.log(fmt.Sprintf("%s round %d: star5000", bin.name, round))
		record("star5000 p50-ms", m.res.percentile(0.5))
		record("star5000 own-p50-ms", m.res.ownPercentile(0.5))
		record("star5000 cpu-ms/req", m.perReq(m.adapterCPU)*1000)
	}
	if runs["coalesce"] {
		m := s.benchCoalesceFrames(b, a, servingNamespace(0), 1000)
		record("coalesce-1000 queries", float64(len(m.logged)))
		record("coalesce-1000 errors", float64(m.res.errors))
	}
	// The burst over both sizes and with both senders (BenchmarkCoalesce1000
	// on each binary): queries sent and requests that failed (503s).
	if runs["coalesce-all"] {
		for _, c := range []struct {
			ns   string
			pods int
		}{{servingNamespace(0), s.cfg.servePods}, {bigNamespace, s.cfg.bigPods}} {
			fm := s.benchCoalesceFrames(b, a, c.ns, 1000)
			nm := s.benchCoalesceNetHTTP(b, a, c.ns, 1000)
			for _, x := range []struct {
				sender string
				m      measured
			}{{"frames", fm}, {"net-http", nm}} {
				name := fmt.Sprintf("burst-%d-%s", c.pods, x.sender)
				record(name+" queries", float64(len(x.m.logged)))
				record(name+" errors", float64(x.m.res.errors))
				record(name+" last-answer-s", x.m.res.elapsed.Seconds())
			}
		}
	}
	hwm, err := framework.MemMiB(a.pid(), "VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	record("peak-rss-MiB", hwm)
	b.ReportMetric(hwm, "peak-rss-MiB")
}
