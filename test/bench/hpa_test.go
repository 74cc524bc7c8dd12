//go:build e2e && bench

package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/cputime"
	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/provider"
	"github.com/promscaler/promscaler/pkg/provider/fake"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// EnvHPAs lists the numbers of HPAs BenchmarkHPAPeriods measures (default
// "100,1000"); EnvHPAPeriods is the number of 15 s periods per leg (default
// 2); EnvHPAModes lists the load shapes (default "spread,burst"; "idle"
// sends nothing: Prometheus's cost of scraping the series alone).
const (
	EnvHPAs       = "PROMSCALER_BENCH_HPAS"
	EnvHPAPeriods = "PROMSCALER_BENCH_HPA_PERIODS"
	EnvHPAModes   = "PROMSCALER_BENCH_HPA_MODES"
)

const (
	hpaMetric   = "bench_hpa_requests_total"
	hpaPodsEach = 10
	hpaPeriod   = 15 * time.Second
)

// BenchmarkHPAPeriods mimics kube-controller-manager's HPA controller: N
// HPAs in N namespaces (10 pods each), each reading the pods/* value of
// one rule (sum(rate(x[2m])) by (pod)) once per 15 s sync period, spread
// over the period or in one burst at its start. Each leg runs the
// provider (pkg/provider over a real promclient client, in this process)
// against a real Prometheus, per request (shared evaluation disabled) and
// shared (the defaults), and reports per period: Prometheus CPU-seconds
// (/proc), this process's CPU-seconds (provider and load generator),
// queries sent, and request latency p50/p99. The API server side
// (SubjectAccessReviews) is not part of it: see docs/adapter.md.
func BenchmarkHPAPeriods(b *testing.B) {
	ns := envInts(EnvHPAs, []int{100, 1000})
	periods := envInt(EnvHPAPeriods, 2)
	modes := []string{"spread", "burst"}
	if v := os.Getenv(EnvHPAModes); v != "" {
		modes = strings.Split(v, ",")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	env, err := framework.Start(ctx, framework.Config{Logf: progress})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	x := exporter.New(nil)
	addr, stop, err := x.Serve()
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	prom, err := env.StartPrometheus(ctx, framework.PrometheusConfig{ScrapeInterval: 5 * time.Second,
		Targets: []framework.ScrapeTarget{{Job: "hpa", Targets: []string{addr}, HonorLabels: true}}})
	if err != nil {
		b.Fatal(err)
	}
	maxN := slices.Max(ns)
	if err := setHPASeries(x, maxN); err != nil {
		b.Fatal(err)
	}
	if _, err := prom.WaitForQuery(ctx, fmt.Sprintf(`count(count_over_time(%s[1m]) >= 3) >= %d`, hpaMetric, maxN*hpaPodsEach), 1, 5*time.Minute); err != nil {
		b.Fatal(err)
	}
	for _, n := range ns {
		for _, mode := range modes {
			for _, shared := range []bool{false, true} {
				if mode == "idle" && shared {
					continue
				}
				name := fmt.Sprintf("N=%d/%s/shared=%t", n, mode, shared)
				b.Run(name, func(b *testing.B) {
					r := runHPALeg(ctx, b, prom, n, periods, mode, shared)
					r.report(b, name)
				})
			}
		}
	}
}

// setHPASeries sets n namespaces of hpaPodsEach counters.
func setHPASeries(x *exporter.Exporter, n int) error {
	series := make([]exporter.Series, 0, n*hpaPodsEach)
	for i := range n {
		for j := range hpaPodsEach {
			series = append(series, exporter.Series{Name: hpaMetric, Type: exporter.Counter, Rate: float64(1 + j),
				Labels: map[string]string{"namespace": hpaNamespace(i), "pod": fmt.Sprintf("pod-%d", j)}})
		}
	}
	return x.Set(series...)
}

func hpaNamespace(i int) string { return fmt.Sprintf("hpa-%04d", i) }

// hpaProvider builds the provider for n namespaces of pods, the rule's
// series as discovery finds them, and a counting querier.
func hpaProvider(b *testing.B, promURL string, n int, shared bool) (*provider.Provider, *atomic.Int64) {
	b.Helper()
	cfg := &config.Config{Rules: []config.DiscoveryRule{{
		SeriesQuery:  `{__name__="` + hpaMetric + `",namespace!="",pod!=""}`,
		Resources:    config.ResourceMapping{Template: "<<.Resource>>"},
		Name:         config.NameMapping{Matches: "^(.*)_total$", As: "${1}_per_second"},
		MetricsQuery: `sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)`,
	}}}
	mapper := kubemapper.New()
	rs, err := rules.Compile(cfg, mapper)
	if err != nil {
		b.Fatal(err)
	}
	objs := fake.NewObjects()
	var series []rules.Series
	for i := range n {
		for j := range hpaPodsEach {
			pod := fmt.Sprintf("pod-%d", j)
			objs.Add(schema.GroupResource{Resource: "pods"}, fake.Object{Namespace: hpaNamespace(i), Name: pod, Labels: map[string]string{"app": "bench"}})
			series = append(series, rules.Series{Name: hpaMetric, Labels: model.LabelSet{"__name__": hpaMetric, "namespace": model.LabelValue(hpaNamespace(i)), "pod": model.LabelValue(pod)}})
		}
	}
	idx := discovery.BuildIndex([]discovery.RuleSeries{{Rule: rs.CustomRules()[0], Series: series}}, discovery.IndexOptions{Scoper: discovery.MapperScoper{Mapper: mapper}})
	client, err := promclient.New(promclient.Config{Address: promURL, HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, Timeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	queries := &atomic.Int64{}
	counting := countingQuerier{q: client, n: queries}
	p, err := provider.New(provider.Config{
		Index:    provider.IndexSource(func() *discovery.Index { return idx }),
		Backends: promclient.Single[promclient.SampleQuerier](counting),
		Objects:  objs,
		Mapper:   mapper,
		Shared:   provider.SharedConfig{Disabled: !shared},
	})
	if err != nil {
		b.Fatal(err)
	}
	return p, queries
}

type countingQuerier struct {
	q promclient.SampleQuerier
	n *atomic.Int64
}

func (c countingQuerier) QuerySamples(ctx context.Context, query string, ts time.Time) (promclient.Samples, error) {
	c.n.Add(1)
	return c.q.QuerySamples(ctx, query, ts)
}

// hpaResult is one leg's figures.
type hpaResult struct {
	periods              int
	promCPU, selfCPU     float64
	queries, errs, empty int64
	lat                  []time.Duration
}

func (r hpaResult) report(b *testing.B, name string) {
	per := func(v float64) float64 { return v / float64(r.periods) }
	sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
	q := func(f float64) time.Duration {
		if len(r.lat) == 0 {
			return 0
		}
		return r.lat[min(len(r.lat)-1, int(f*float64(len(r.lat))))]
	}
	b.ReportMetric(per(r.promCPU), "prom-cpu-s/period")
	b.ReportMetric(per(r.selfCPU), "provider-cpu-s/period")
	b.ReportMetric(per(float64(r.queries)), "queries/period")
	b.ReportMetric(float64(q(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(q(0.99).Microseconds())/1000, "p99-ms")
	progress("%s: per 15 s period: Prometheus %.3f CPU-s, provider+generator %.3f CPU-s, %.0f queries; p50 %s p99 %s; %d requests, %d errors, %d empty (load %s)",
		name, per(r.promCPU), per(r.selfCPU), per(float64(r.queries)), q(0.5), q(0.99), len(r.lat), r.errs, r.empty, framework.LoadAvg())
}

// runHPALeg runs periods sync periods of n HPAs and measures them.
func runHPALeg(ctx context.Context, b *testing.B, prom *framework.Prometheus, n, periods int, mode string, shared bool) hpaResult {
	b.Helper()
	p, queries := hpaProvider(b, prom.URL, n, shared)
	info := cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "bench_hpa_requests_per_second"}
	sel := labels.SelectorFromSet(labels.Set{"app": "bench"})
	// One warm-up period, unmeasured (sharing starts, connections open).
	if mode == "idle" {
		n = 0
	}
	burst := mode == "burst"
	hpaPeriodLoad(ctx, p, info, sel, n, burst, nil)
	promCPU0, err := cpuSeconds(prom.Process.Pid())
	if err != nil {
		b.Fatal(err)
	}
	self0, q0 := cputime.Process(), queries.Load()
	r := hpaResult{periods: periods}
	for range periods {
		hpaPeriodLoad(ctx, p, info, sel, n, burst, &r)
	}
	promCPU1, err := cpuSeconds(prom.Process.Pid())
	if err != nil {
		b.Fatal(err)
	}
	r.promCPU, r.selfCPU, r.queries = promCPU1-promCPU0, (cputime.Process() - self0).Seconds(), queries.Load()-q0
	return r
}

// hpaPeriodLoad sends one period's requests (one per HPA, spread evenly
// or all at its start, at most 64 in flight) and waits for the period's
// end; r, when not nil, records them.
func hpaPeriodLoad(ctx context.Context, p *provider.Provider, info cmprovider.CustomMetricInfo, sel labels.Selector, n int, burst bool, r *hpaResult) {
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		if !burst {
			time.Sleep(time.Until(start.Add(time.Duration(i) * hpaPeriod / time.Duration(n))))
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			list, err := p.GetMetricBySelector(ctx, hpaNamespace(i), sel, info, labels.Everything())
			d := time.Since(t0)
			if r == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			r.lat = append(r.lat, d)
			switch {
			case err != nil:
				r.errs++
			case len(list.Items) != hpaPodsEach:
				r.empty++
			}
		})
	}
	wg.Wait()
	time.Sleep(time.Until(start.Add(hpaPeriod)))
}
