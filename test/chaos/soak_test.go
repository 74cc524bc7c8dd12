//go:build e2e && chaos

package chaos

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/promscaler/promscaler/test/exporter"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// The soak's churn: pods come and go in churnNamespace, each with its
// churnPodMetric series; every churnGenEvery a new metric churn_gen_<n>
// appears on the live pods and the one churnGenLive generations older
// disappears.
const (
	churnNamespace = "churn"
	churnPodMetric = "churn_requests"
	churnPodsLive  = 20
	churnGenLive   = 3
)

// Soak settings (environment):
//
//	PROMSCALER_SOAK_DURATION  how long (default 1h)
//	PROMSCALER_SOAK_RATE      requests per second through the aggregator (default 20)
//	PROMSCALER_SOAK_SAMPLE    sampling period of RSS and goroutines (default 1m)
func soakSettings() (d time.Duration, rate int, sample time.Duration) {
	d, rate, sample = time.Hour, 20, time.Minute
	if v, err := time.ParseDuration(os.Getenv("PROMSCALER_SOAK_DURATION")); err == nil && v > 0 {
		d = v
	}
	if v, err := strconv.Atoi(os.Getenv("PROMSCALER_SOAK_RATE")); err == nil && v > 0 {
		rate = v
	}
	if v, err := time.ParseDuration(os.Getenv("PROMSCALER_SOAK_SAMPLE")); err == nil && v > 0 {
		sample = v
	}
	return d, rate, sample
}

type soakSample struct {
	at         time.Duration
	rss        float64
	goroutines int
	w          window
	pods, gens int
}

// TestSoak runs the adapter for PROMSCALER_SOAK_DURATION at a steady rate
// with series and pod churn, samples its RSS and goroutines, and passes
// when both are flat: after a warm-up of 1/6 of the run, the median of the
// last quarter is within 10 % (RSS) and within max(10, 10 %) (goroutines)
// of the median of the first quarter after the warm-up; no wrong value and
// no adapter exit.
func TestSoak(t *testing.T) {
	dur, rate, period := soakSettings()
	s := startStack(t, stackOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.env.EnsureNamespace(ctx, churnNamespace); err != nil {
		t.Fatal(err)
	}
	ch := &churner{s: s}
	go ch.run(ctx)
	// The churning pods' metric is discovered before the load starts (a
	// 404 before its first series exists is not the soak's finding).
	for s.ask(ctx, kindChurn).status != http.StatusOK {
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		time.Sleep(500 * time.Millisecond)
	}
	load := s.startLoad(rate, 5)
	t0 := time.Now()
	out := outDir(t, s)
	stamp := t0.UTC().Format("20060102-150405")
	csv := filepath.Join(out, "soak-"+stamp+".csv")
	f, err := os.Create(csv)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, "minute,rss_mib,goroutines,requests,ok,wrong,partial,errors,churn_pods,churn_metrics")
	t.Logf("soak: %v at %d req/s, sampling every %v; samples to %s", dur, rate, period, csv)

	var samples []soakSample
	tick := time.NewTicker(period)
	defer tick.Stop()
	last := t0
	for time.Since(t0) < dur {
		<-tick.C
		now := time.Now()
		fp := s.footprint(ctx, s.adapter)
		pods, gens := ch.counts()
		sm := soakSample{at: now.Sub(t0), rss: fp.rss, goroutines: fp.goroutines, w: load.window(last, now), pods: pods, gens: gens}
		last = now
		samples = append(samples, sm)
		fmt.Fprintf(f, "%.1f,%.1f,%d,%d,%d,%d,%d,%q,%d,%d\n", sm.at.Minutes(), sm.rss, sm.goroutines, sm.w.total, sm.w.ok, sm.w.wrong, sm.w.partial, sm.w.errorText(), pods, gens)
		t.Logf("soak %5.1f min: RSS %.1f MiB, goroutines %d, requests %d (ok %d, wrong %d, partial %d, errors %s), churn pods %d metrics %d",
			sm.at.Minutes(), sm.rss, sm.goroutines, sm.w.total, sm.w.ok, sm.w.wrong, sm.w.partial, sm.w.errorText(), pods, gens)
		if exited, err := s.adapter.Process.Exited(); exited {
			t.Fatalf("the adapter exited during the soak: %v", err)
		}
	}
	cancel()
	load.close()
	all := load.window(t0, time.Now())
	v := judgeSoak(samples, dur)
	report := soakReport(dur, rate, period, all, ch, v, samples)
	md := filepath.Join(out, "soak-"+stamp+".md")
	if err := os.WriteFile(md, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("soak report %s:\n%s", md, report)
	if all.wrong > 0 {
		t.Errorf("%d wrong values during the soak", all.wrong)
	}
	for _, p := range v.problems {
		t.Error(p)
	}
}

// soakVerdict compares the first and last windows.
type soakVerdict struct {
	firstRSS, lastRSS  float64
	firstGor, lastGor  float64
	firstFrom, firstTo time.Duration
	lastFrom           time.Duration
	problems           []string
}

func judgeSoak(samples []soakSample, dur time.Duration) soakVerdict {
	v := soakVerdict{firstFrom: dur / 6, firstTo: dur/6 + dur/4, lastFrom: dur - dur/4}
	var r1, r2, g1, g2 []float64
	for _, s := range samples {
		switch {
		case s.at > v.firstFrom && s.at <= v.firstTo:
			r1, g1 = append(r1, s.rss), append(g1, float64(s.goroutines))
		case s.at > v.lastFrom:
			r2, g2 = append(r2, s.rss), append(g2, float64(s.goroutines))
		}
	}
	if len(r1) == 0 || len(r2) == 0 {
		v.problems = append(v.problems, fmt.Sprintf("too few samples to judge (%d in the first window, %d in the last)", len(r1), len(r2)))
		return v
	}
	v.firstRSS, v.lastRSS, v.firstGor, v.lastGor = median(r1), median(r2), median(g1), median(g2)
	if v.lastRSS > 1.10*v.firstRSS {
		v.problems = append(v.problems, fmt.Sprintf("RSS grew: median %.1f MiB in the last window, %.1f MiB in the first (+%.0f %%, limit 10 %%)",
			v.lastRSS, v.firstRSS, 100*(v.lastRSS/v.firstRSS-1)))
	}
	if limit := math.Max(10, 0.10*v.firstGor); v.lastGor > v.firstGor+limit {
		v.problems = append(v.problems, fmt.Sprintf("goroutines grew: median %.0f in the last window, %.0f in the first (limit +%.0f)", v.lastGor, v.firstGor, limit))
	}
	return v
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func soakReport(dur time.Duration, rate int, period time.Duration, all window, ch *churner, v soakVerdict, samples []soakSample) string {
	var b strings.Builder
	verdict := "PASS"
	if len(v.problems) > 0 || all.wrong > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "## Soak: %v, %d req/s, %s\n\n", dur, rate, verdict)
	fmt.Fprintf(&b, "Run %s, load average at the end %s.\n\n", time.Now().UTC().Format(time.RFC3339), framework.LoadAvg())
	fmt.Fprintf(&b, "Requests %d: ok %d, wrong values %d, partial %d, errors %s. Churn: %d pods created and deleted, %d metrics appeared and disappeared.\n\n",
		all.total, all.ok, all.wrong, all.partial, all.errorText(), ch.podsMade.Load(), ch.gensMade.Load())
	fmt.Fprintf(&b, "| | first window (%v-%v) | last window (%v-%v) | change |\n|---|---|---|---|\n",
		v.firstFrom.Round(time.Second), v.firstTo.Round(time.Second), v.lastFrom.Round(time.Second), dur.Round(time.Second))
	if v.firstRSS > 0 {
		fmt.Fprintf(&b, "| adapter RSS, median (MiB) | %.1f | %.1f | %+.1f %% |\n", v.firstRSS, v.lastRSS, 100*(v.lastRSS/v.firstRSS-1))
		fmt.Fprintf(&b, "| adapter goroutines, median | %.0f | %.0f | %+.0f |\n", v.firstGor, v.lastGor, v.lastGor-v.firstGor)
	}
	fmt.Fprintf(&b, "\nSamples every %v (minute: RSS MiB / goroutines): ", period)
	for i, s := range samples {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.1f: %.1f/%d", s.at.Minutes(), s.rss, s.goroutines)
	}
	b.WriteString("\n")
	for _, p := range v.problems {
		fmt.Fprintf(&b, "\n- %s", p)
	}
	return b.String()
}

// churner creates and deletes pods (with their series) and metrics.
type churner struct {
	s                  *stack
	pods               []string
	gen                int
	podsMade, gensMade atomic.Int64
	mu                 sync.Mutex
}

func (c *churner) counts() (pods, gens int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pods), min(c.gen, churnGenLive)
}

func (c *churner) run(ctx context.Context) {
	podTick := time.NewTicker(2 * time.Second)
	defer podTick.Stop()
	genTick := time.NewTicker(30 * time.Second)
	defer genTick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-podTick.C:
			name := fmt.Sprintf("c-%d", n)
			n++
			if err := c.s.createPod(ctx, churnNamespace, name); err != nil {
				continue
			}
			_ = c.s.x.Set(exporter.Series{Name: churnPodMetric, Labels: map[string]string{"namespace": churnNamespace, "pod": name}, Value: 1})
			c.podsMade.Add(1)
			c.mu.Lock()
			c.pods = append(c.pods, name)
			var old string
			if len(c.pods) > churnPodsLive {
				old, c.pods = c.pods[0], c.pods[1:]
			}
			c.mu.Unlock()
			if old != "" {
				c.s.x.Delete(churnPodMetric, map[string]string{"namespace": churnNamespace, "pod": old})
				zero := int64(0)
				_ = c.s.env.Client.CoreV1().Pods(churnNamespace).Delete(ctx, old, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
		case <-genTick.C:
			c.mu.Lock()
			g := c.gen
			c.gen++
			pods := append([]string(nil), c.pods...)
			c.mu.Unlock()
			for _, p := range pods {
				_ = c.s.x.Set(exporter.Series{Name: fmt.Sprintf("churn_gen_%d", g), Labels: map[string]string{"namespace": churnNamespace, "pod": p}, Value: float64(g)})
			}
			c.gensMade.Add(1)
			if g >= churnGenLive {
				c.s.x.Delete(fmt.Sprintf("churn_gen_%d", g-churnGenLive), nil)
			}
		}
	}
}
