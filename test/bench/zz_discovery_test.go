//go:build e2e && bench

// The file's name sorts last on purpose: go test runs a package's
// benchmarks in the order of its files, and the discovery benchmark's
// series and grouped strategies load Prometheus (5-11 CPU-s per relist, a
// 2 GiB series answer to the adapter) so that it answers the serving
// benchmarks' queries two to three times slower afterwards (the 5,000-pod
// query: p50 53 ms after it against 19-25 ms before, at 1,000,000 series).

package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// discoverySelector is the rule's seriesQuery (testdata/rules.yaml).
const discoverySelector = `{namespace!="",pod!=""}`

// strategies returns the --discovery-strategy values to measure and the
// default one; none when the adapter has no such flag (then only its
// default is measured).
func strategies(bin string) (list []string, def string) {
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	help := string(out)
	if !strings.Contains(help, "--discovery-strategy") {
		return nil, ""
	}
	if m := regexp.MustCompile(`--discovery-strategy[^\n]*\(default "?([a-z]+)"?\)`).FindStringSubmatch(help); m != nil {
		def = m[1]
	}
	if v := os.Getenv(EnvStrategies); v != "" {
		return strings.Split(v, ","), def
	}
	return []string{"labels", "grouped", "series"}, def
}

// promBaseline is Prometheus's CPU use per second when nobody queries it
// (scraping the exporter), subtracted from the windows measured around
// discovery.
func (s *stack) promBaseline() (float64, error) {
	m, err := startCPU(s.prom.Process.Pid())
	if err != nil {
		return 0, err
	}
	time.Sleep(3 * time.Second)
	c, d, err := m.stop()
	if err != nil {
		return 0, err
	}
	return c / d.Seconds(), nil
}

// BenchmarkDiscovery measures discovery over the generated series: Prometheus's
// cost of answering /api/v1/series for them (what prometheus-adapter asks
// every relist), then, per discovery strategy, an adapter started fresh:
// the time from its exec until it lists a generated metric, its CPU and
// Prometheus's CPU per relist, and its peak RSS.
func BenchmarkDiscovery(b *testing.B) {
	s := setup(b)
	b.Run("series-api", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			s.benchSeriesAPI(b)
		}
	})
	list, def := strategies(s.env.Bin("adapter"))
	if len(list) == 0 {
		b.Run("strategy=default", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				s.benchDiscovery(b, "")
			}
		})
		return
	}
	progress("discovery strategies %v (default %q)", list, def)
	for _, st := range list {
		name := "strategy=" + st
		if st == def {
			name += "(default)"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				s.benchDiscovery(b, st)
			}
		})
	}
}

func (s *stack) benchSeriesAPI(b *testing.B) {
	ctx := context.Background()
	base, err := s.promBaseline()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	q := url.Values{"match[]": {discoverySelector},
		"start": {strconv.FormatInt(now.Add(-maxAge).Unix(), 10)}, "end": {strconv.FormatInt(now.Unix(), 10)}}
	m, err := startCPU(s.prom.Process.Pid())
	if err != nil {
		b.Fatal(err)
	}
	a, err := do(ctx, s.promHC, s.prom.URL+"/api/v1/series?"+q.Encode())
	n := a.bytes
	if err != nil {
		b.Fatalf("/api/v1/series: %v", err)
	}
	cpu, wall, err := m.stop()
	if err != nil {
		b.Fatal(err)
	}
	cpu -= base * wall.Seconds()
	rss, _ := framework.MemMiB(s.prom.Process.Pid(), "VmRSS")
	progress("/api/v1/series %s over %s: %.1f MB in %s, Prometheus %.2f CPU-s (baseline %.3f/s subtracted), Prometheus RSS %.0f MiB",
		discoverySelector, maxAge, float64(n)/1e6, wall.Round(time.Millisecond), cpu, base, rss)
	b.ReportMetric(cpu, "series-api-prom-cpu-s")
	b.ReportMetric(wall.Seconds(), "series-api-s")
	b.ReportMetric(float64(n)/1e6, "series-api-MB")
	b.ReportMetric(float64(s.bulk.Series()), "series")
}

func (s *stack) benchDiscovery(b *testing.B, strategy string) {
	ctx := context.Background()
	base, err := s.promBaseline()
	if err != nil {
		b.Fatal(err)
	}
	extra := []string{
		"--metrics-relist-interval=" + s.cfg.relist.String(),
		"--metrics-max-age=" + maxAge.String(),
		"-v=2",
	}
	name := "discovery"
	if strategy != "" {
		extra = append(extra, "--discovery-strategy="+strategy)
		name += "-" + strategy
	}
	if strategy == "series" {
		// /api/v1/series over 1,000,000 series is ~70 MB: past the default
		// --prometheus-max-answer-bytes (8 MiB), which refuses it.
		extra = append(extra, "--prometheus-max-answer-bytes=0")
	}
	a, err := s.startAdapter(name, extra...)
	if err != nil {
		b.Fatal(err)
	}
	defer a.stop()
	want := "pods/" + BulkMetric(s.bulk.Metrics-1)
	listedAt, err := a.waitListed(ctx, s.admin, want, 10*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	firstList := listedAt.Sub(a.started)
	passes, err := a.discoveryPasses()
	if err != nil {
		b.Fatal(err)
	}
	var firstPass time.Duration
	if len(passes) > 0 {
		firstPass = passes[0]
	}
	progress("%s: %s listed %s after exec (first discovery pass %s)", name, want, firstList.Round(time.Millisecond), firstPass)
	if ok, err := listsMetric(ctx, s.admin, a.url, "pods/"+servingMetric); !ok {
		b.Errorf("adapter does not list pods/%s beside the bulk metrics (err %v)", servingMetric, err)
	}

	// Relists: from the end of one pass to the end of the pass N later.
	waitPasses := func(n int) ([]time.Duration, error) {
		deadline := time.Now().Add(time.Duration(n+1) * (s.cfg.relist + 10*time.Minute))
		for time.Now().Before(deadline) {
			p, err := a.discoveryPasses()
			if err != nil {
				return nil, err
			}
			if len(p) >= n {
				return p, nil
			}
			if a.exited() {
				return nil, fmt.Errorf("adapter exited; log:\n%s", tail(a.logFile, 30))
			}
			time.Sleep(100 * time.Millisecond)
		}
		return nil, fmt.Errorf("fewer than %d discovery passes after waiting; log:\n%s", n, tail(a.logFile, 30))
	}
	p, err := waitPasses(len(passes) + 1)
	if err != nil {
		b.Fatal(err)
	}
	n0 := len(p)
	am, pm := s.startCPUs(b, a)
	if p, err = waitPasses(n0 + s.cfg.relists); err != nil {
		b.Fatal(err)
	}
	acpu, _, err := am.stop()
	if err != nil {
		b.Fatal(err)
	}
	pcpu, wall, err := pm.stop()
	if err != nil {
		b.Fatal(err)
	}
	relists := float64(len(p) - n0)
	pcpu = (pcpu - base*wall.Seconds()) / relists
	acpu /= relists
	var sum time.Duration
	for _, d := range p[n0:] {
		sum += d
	}
	passDur := sum / time.Duration(len(p)-n0)
	hwm, err := framework.MemMiB(a.pid(), "VmHWM")
	if err != nil {
		b.Fatal(err)
	}
	prss, _ := framework.MemMiB(s.prom.Process.Pid(), "VmRSS")
	progress("%s: %d relists in %s: adapter %.3f CPU-s/relist, Prometheus %.3f CPU-s/relist (baseline %.3f/s subtracted), pass %s, adapter peak RSS %.0f MiB, Prometheus RSS %.0f MiB, load %s",
		name, int(relists), wall.Round(time.Millisecond), acpu, pcpu, base, passDur.Round(time.Millisecond), hwm, prss, framework.LoadAvg())
	b.ReportMetric(firstList.Seconds(), "first-list-s")
	b.ReportMetric(firstPass.Seconds(), "first-pass-s")
	b.ReportMetric(passDur.Seconds(), "relist-s")
	b.ReportMetric(acpu, "adapter-cpu-s/relist")
	b.ReportMetric(pcpu, "prom-cpu-s/relist")
	b.ReportMetric(hwm, "peak-rss-MiB")
	b.ReportMetric(float64(s.bulk.Series()), "series")
}
