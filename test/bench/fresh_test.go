//go:build e2e && bench

package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// EnvFreshWindow is the length of BenchmarkFresh's steady window (default
// 3m), whose CPU use is scaled to an hour.
const EnvFreshWindow = "PROMSCALER_BENCH_FRESH_WINDOW"

// freshRate is how fast BenchmarkFresh's new counters grow per second: the
// first scraped value divided by it is how long after its creation
// Prometheus first scraped a series.
const freshRate = 1000.0

// prometheus-adapter's measured discovery cost at 1,000,000 series: 13-16
// adapter CPU-s per relist (docs/performance.md), at its 1m relist.
const upstreamCPUPerHourLow, upstreamCPUPerHourHigh = 13 * 60, 16 * 60

// BenchmarkFresh measures how soon new series are served and what keeping
// the metrics fresh costs, on the generated series, with an adapter at its
// default flags except --metrics-max-age=1h (the generated series are 10 to
// 30 minutes old) and -v=2 (to count discovery passes):
//
//  1. from first scrape to served: a new metric name only listed (no
//     request names it), then a new metric name and a known metric in a new
//     namespace asked for by name every 250 ms from their creation;
//  2. adapter plus Prometheus CPU per hour (Prometheus's scraping baseline
//     subtracted) over a steady window with the default relist (1m), the
//     aggregator's discovery poll (a listing a minute) and an HPA asking
//     every 15 s for a metric that never exists, scaled to an hour;
//  3. the worst case: a request for a different missing metric every
//     second (passes on demand start at least 1 s apart): CPU per pass and
//     per hour at that rate.
func BenchmarkFresh(b *testing.B) {
	s := setup(b)
	b.ReportAllocs()
	for range b.N {
		s.benchFresh(b)
	}
}

func (s *stack) benchFresh(b *testing.B) {
	ctx := context.Background()
	a, err := s.startAdapter("fresh", "--metrics-max-age="+maxAge.String(), "-v=2")
	if err != nil {
		b.Fatal(err)
	}
	defer a.stop()
	if _, err := a.waitListed(ctx, s.admin, "pods/"+BulkMetric(s.bulk.Metrics-1), 10*time.Minute); err != nil {
		b.Fatal(err)
	}
	run := strconv.FormatInt(time.Now().UnixNano()%1e9, 36) // names new to this iteration
	pod := servingPod(0)
	ns := servingNamespace(0)

	// 1. From first scrape to served.
	created := map[string]time.Time{}
	add := func(name, ns string) {
		created[name+"/"+ns] = time.Now()
		if err := s.exporter.Set(exporter.Series{Name: name, Type: exporter.Counter, Rate: freshRate,
			Labels: map[string]string{"namespace": ns, "pod": pod}}); err != nil {
			b.Fatal(err)
		}
	}
	firstScrape := func(name, ns string) time.Time {
		q := fmt.Sprintf(`min_over_time(%s{namespace=%q}[10m])`, name, ns)
		v, err := s.prom.WaitForQuery(ctx, q, 1, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		return created[name+"/"+ns].Add(time.Duration(v[0].Value / freshRate * float64(time.Second)))
	}
	served := func(name, ns string) func() bool {
		return func() bool {
			u := a.url + "/apis/custom.metrics.k8s.io/v1beta1/namespaces/" + ns + "/pods/" + pod + "/" + name
			_, code, err := framework.Get(ctx, s.admin, u)
			return err == nil && code == http.StatusOK
		}
	}
	// until polls each check every 250 ms and returns when each first held.
	until := func(checks map[string]func() bool) map[string]time.Time {
		at := map[string]time.Time{}
		deadline := time.Now().Add(3 * time.Minute)
		for len(at) < len(checks) {
			for what, ok := range checks {
				if _, done := at[what]; !done && ok() {
					at[what] = time.Now()
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("after 3 minutes, only %v of %d checks held; log:\n%s", at, len(checks), tail(a.logFile, 30))
			}
			time.Sleep(250 * time.Millisecond)
		}
		return at
	}
	listName := "bench_fresh_listed_" + run
	add(listName, ns)
	at := until(map[string]func() bool{"listed": func() bool {
		ok, _ := listsMetric(ctx, s.admin, a.url, "pods/"+listName)
		return ok
	}})
	listed := at["listed"].Sub(firstScrape(listName, ns))
	newName, newNS, known := "bench_fresh_"+run, "bench-fresh-"+run, BulkMetric(0)
	add(newName, ns)
	add(known, newNS)
	at = until(map[string]func() bool{"name": served(newName, ns), "namespace": served(known, newNS)})
	nameServed := at["name"].Sub(firstScrape(newName, ns))
	nsServed := at["namespace"].Sub(firstScrape(known, newNS))
	progress("fresh: after its first scrape, a new metric name listed in %.1f s, served by name in %.1f s; a known metric in a new namespace served in %.1f s (load %s)",
		listed.Seconds(), nameServed.Seconds(), nsServed.Seconds(), framework.LoadAvg())

	// 2. A steady window at default flags, scaled to an hour.
	window := envDuration(EnvFreshWindow, 3*time.Minute)
	base, err := s.promBaseline()
	if err != nil {
		b.Fatal(err)
	}
	every := func(ctx context.Context, wg *sync.WaitGroup, d time.Duration, f func(i int)) {
		wg.Go(func() {
			t := time.NewTicker(d)
			defer t.Stop()
			for i := 0; ; i++ {
				f(i)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	measure := func(d time.Duration, clients func(ctx context.Context, wg *sync.WaitGroup)) (acpu, pcpu float64, passes int) {
		p0, err := a.discoveryPasses()
		if err != nil {
			b.Fatal(err)
		}
		n0 := len(p0)
		am, pm := s.startCPUs(b, a)
		wctx, cancel := context.WithTimeout(ctx, d)
		var wg sync.WaitGroup
		clients(wctx, &wg)
		<-wctx.Done()
		cancel()
		wg.Wait()
		acpu, _, err = am.stop()
		if err != nil {
			b.Fatal(err)
		}
		pcpu, wall, err := pm.stop()
		if err != nil {
			b.Fatal(err)
		}
		p, err := a.discoveryPasses()
		if err != nil {
			b.Fatal(err)
		}
		return acpu, max(pcpu-base*wall.Seconds(), 0), len(p) - n0
	}
	acpu, pcpu, passes := measure(window, func(ctx context.Context, wg *sync.WaitGroup) {
		every(ctx, wg, time.Minute, func(int) { _, _ = listsMetric(ctx, s.admin, a.url, "pods/"+listName) })
		every(ctx, wg, 15*time.Second, func(int) { served("bench_fresh_absent", ns)() })
	})
	perHour := 3600 / window.Seconds()
	hour := (acpu + pcpu) * perHour
	progress("fresh: steady %s at default flags: %d passes, adapter %.2f CPU-s, Prometheus %.2f CPU-s (baseline %.3f/s subtracted): %.1f CPU-s/hour (adapter %.1f, Prometheus %.1f); prometheus-adapter at its 1m relist: %d-%d: %.1f-%.1f %% of it (load %s)",
		window, passes, acpu, pcpu, base, hour, acpu*perHour, pcpu*perHour, upstreamCPUPerHourLow, upstreamCPUPerHourHigh,
		100*hour/upstreamCPUPerHourHigh, 100*hour/upstreamCPUPerHourLow, framework.LoadAvg())

	// 3. The worst case: a pass a second.
	const worst = 20 * time.Second
	wa, wp, wpasses := measure(worst, func(ctx context.Context, wg *sync.WaitGroup) {
		every(ctx, wg, time.Second, func(i int) { served(fmt.Sprintf("bench_fresh_absent_%d", i), ns)() })
	})
	perPass := (wa + wp) / float64(max(wpasses, 1))
	progress("fresh: a missing metric asked every second for %s: %d passes, %.3f CPU-s per pass (adapter %.3f, Prometheus %.3f): %.0f CPU-s/hour at one pass a second (load %s)",
		worst, wpasses, perPass, wa/float64(max(wpasses, 1)), wp/float64(max(wpasses, 1)), perPass*3600, framework.LoadAvg())

	b.ReportMetric(listed.Seconds(), "listed-after-scrape-s")
	b.ReportMetric(nameServed.Seconds(), "name-served-after-scrape-s")
	b.ReportMetric(nsServed.Seconds(), "namespace-served-after-scrape-s")
	b.ReportMetric(hour, "cpu-s/hour")
	b.ReportMetric(acpu*perHour, "adapter-cpu-s/hour")
	b.ReportMetric(pcpu*perHour, "prom-cpu-s/hour")
	b.ReportMetric(perPass, "cpu-s/pass")
	b.ReportMetric(perPass*3600, "worst-cpu-s/hour")
	b.ReportMetric(float64(s.bulk.Series()), "series")
}
