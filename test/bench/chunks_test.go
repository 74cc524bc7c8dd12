//go:build e2e && bench

package bench

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/e2e/framework"
)

// EnvChunksArgs are the second Prometheus's extra flags in
// BenchmarkHeadChunkAB (space-separated), e.g.
// "--storage.tsdb.samples-per-chunk=30"; the benchmark is skipped when it
// is unset. EnvChunksPeriods is its number of measured 15 s periods
// (default 80: two cycles of head chunks at a 5 s scrape, half of the
// periods with the query).
const (
	EnvChunksArgs    = "PROMSCALER_BENCH_CHUNKS_ARGS"
	EnvChunksPeriods = "PROMSCALER_BENCH_CHUNKS_PERIODS"
)

// BenchmarkHeadChunkAB measures what a Prometheus flag does to the cost of
// the HPAs' grouped query, free of the machine's drift between runs: two
// Prometheus servers, one with default flags and one with
// PROMSCALER_BENCH_CHUNKS_ARGS, scrape the same 1,000 namespaces of 10
// counters (BenchmarkHPAPeriods's series, every
// PROMSCALER_BENCH_HPA_SCRAPE_INTERVAL, default 5 s) at the same time. In
// every other 15 s period both are sent the shared query the adapter sends
// for BenchmarkHPAPeriods's rule (in alternating order, through
// promclient as the adapter sends it); in the others, nothing. Each
// server's CPU-seconds are read at the same period boundaries, so the
// idle periods give its floor (the scrape), the query periods minus the
// floor the query's cost, and both together what one query per period
// costs it, over whole head chunk cycles.
func BenchmarkHeadChunkAB(b *testing.B) {
	bArgs := strings.Fields(os.Getenv(EnvChunksArgs))
	if len(bArgs) == 0 {
		b.Skipf("%s not set", EnvChunksArgs)
	}
	periods := envInt(EnvChunksPeriods, 80)
	const n = 1000
	ctx := context.Background()
	env, err := framework.Start(ctx, framework.Config{Logf: progress})
	if err != nil {
		b.Fatal(err)
	}
	liveEnv.Store(env)
	defer env.Close()
	x, cfg := hpaExporter(b, env)
	servers := []*chunkServer{{name: "default"}, {name: strings.Join(bArgs, " "), args: bArgs}}
	for _, s := range servers {
		cfg.ExtraArgs = s.args
		if s.prom, err = env.StartPrometheus(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		if s.client, err = promclient.New(promclient.Config{Address: s.prom.URL, HTTPClient: &http.Client{}, Timeout: 30 * time.Second}); err != nil {
			b.Fatal(err)
		}
	}
	if err := setHPASeries(x, n); err != nil {
		b.Fatal(err)
	}
	for _, s := range servers {
		waitHPASeries(ctx, b, s.prom, cfg.ScrapeInterval, n)
	}
	query, err := hpaSharedQuery()
	if err != nil {
		b.Fatal(err)
	}
	progress("head chunk A/B: %d periods, the query in every other one: %s", periods, query)
	// Period 0 is a warm-up with the query (connections open).
	for period := range periods + 1 {
		start := time.Now()
		cpu0 := make([]float64, len(servers))
		for i, s := range servers {
			if cpu0[i], err = cpuSeconds(s.prom.Process.Pid()); err != nil {
				b.Fatal(err)
			}
		}
		withQuery := period%2 == 0
		if withQuery {
			for k := range servers {
				s := servers[(k+period/2)%len(servers)] // alternate who goes first
				t0 := time.Now()
				got, err := s.client.QuerySamples(ctx, query, time.Time{}) // now, as the adapter asks
				if err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				if len(got) != n*hpaPodsEach {
					b.Fatalf("%s: the query answered %d series, want %d", s.name, len(got), n*hpaPodsEach)
				}
				if period > 0 {
					s.wall = append(s.wall, time.Since(t0))
				}
			}
		}
		time.Sleep(time.Until(start.Add(hpaPeriod)))
		for i, s := range servers {
			c, err := cpuSeconds(s.prom.Process.Pid())
			if err != nil {
				b.Fatal(err)
			}
			if period == 0 {
				continue
			}
			if withQuery {
				s.query = append(s.query, c-cpu0[i])
			} else {
				s.idle = append(s.idle, c-cpu0[i])
			}
		}
	}
	for i, s := range servers {
		s.report(b, fmt.Sprintf("p%d", i))
	}
}

// chunkServer is one Prometheus of BenchmarkHeadChunkAB and its figures.
type chunkServer struct {
	name   string
	args   []string
	prom   *framework.Prometheus
	client *promclient.Client
	// CPU-seconds of each measured period with and without the query;
	// the query's duration as the client saw it.
	query, idle []float64
	wall        []time.Duration
}

func (s *chunkServer) report(b *testing.B, key string) {
	floor, withQuery := mean(s.idle), mean(s.query)
	rss, _ := framework.MemMiB(s.prom.Process.Pid(), "VmRSS")
	var wall time.Duration
	for _, w := range s.wall {
		wall += w
	}
	if len(s.wall) > 0 {
		wall /= time.Duration(len(s.wall))
	}
	progress("head chunk A/B: Prometheus %s: CPU-s per 15 s period %.3f with the query (%d periods), %.3f without (%d): the query %.3f; query %v on average; RSS %.0f MiB; with the query %s, without %s",
		s.name, withQuery, len(s.query), floor, len(s.idle), withQuery-floor, wall.Round(time.Millisecond), rss, fmtFloats(s.query), fmtFloats(s.idle))
	b.ReportMetric(withQuery, key+"-cpu-s/period")
	b.ReportMetric(floor, key+"-idle-cpu-s/period")
	b.ReportMetric(withQuery-floor, key+"-query-cpu-s")
	b.ReportMetric(rss, key+"-rss-MiB")
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

func fmtFloats(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// hpaSharedQuery is the shared query the adapter sends for hpaConfig's
// rule: pods in every namespace.
func hpaSharedQuery() (string, error) {
	rs, err := rules.Compile(hpaConfig(), kubemapper.New())
	if err != nil {
		return "", err
	}
	q, err := rs.CustomRules()[0].SharedQuery(rules.SharedRequest{Series: hpaMetric, Resource: schema.GroupResource{Resource: "pods"}})
	if err != nil {
		return "", err
	}
	return q.Expr, nil
}
