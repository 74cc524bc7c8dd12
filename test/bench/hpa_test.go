//go:build e2e && bench

package bench

import (
	"context"
	"encoding/json"
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
// "100,1000"); EnvHPAPeriods is the number of measured 15 s periods per leg
// (default 2, after one warm-up period); EnvHPAModes lists the load shapes
// (default "spread,burst"; "idle" sends nothing: Prometheus's cost of
// scraping the series alone); EnvHPATarget is what the requests go to:
// "adapter" (default: the adapter binary behind kube-apiserver's
// aggregator) or "provider" (pkg/provider in this process, no API server:
// quicker, and a CPU profile of this process is the provider's);
// EnvHPAShared lists the legs of each (default "false,true": shared
// evaluation off, then on; "true" alone runs an adapter binary without
// --shared-evaluation-max-age, e.g. an older build in an A/B);
// EnvHPAAdapterArgs adds flags to the adapter's command line
// (space-separated), e.g. "--authorization-webhook-cache-authorized-ttl=10s"
// for the library's authorization cache. EnvHPAScrapeInterval is
// Prometheus's scrape interval of the HPAs' series (default 5s: what the
// Done-when figures of issue 33 are measured with; 15s or 30s, common in
// clusters, show how much of Prometheus's CPU is the scrape).
// EnvHPAPrometheusArgs adds flags to Prometheus's command line
// (space-separated), e.g. "--storage.tsdb.samples-per-chunk=30" to see
// what its head chunks' length costs the grouped query.
const (
	EnvHPAPrometheusArgs = "PROMSCALER_BENCH_HPA_PROMETHEUS_ARGS"
	EnvHPAScrapeInterval = "PROMSCALER_BENCH_HPA_SCRAPE_INTERVAL"
	EnvHPAAdapterArgs    = "PROMSCALER_BENCH_HPA_ADAPTER_ARGS"
	EnvHPAShared         = "PROMSCALER_BENCH_HPA_SHARED"
	EnvHPAs              = "PROMSCALER_BENCH_HPAS"
	EnvHPAPeriods        = "PROMSCALER_BENCH_HPA_PERIODS"
	EnvHPAModes          = "PROMSCALER_BENCH_HPA_MODES"
	EnvHPATarget         = "PROMSCALER_BENCH_HPA_TARGET"
)

const (
	hpaMetric   = "bench_hpa_requests_total"
	hpaPodsEach = 10
	hpaPeriod   = 15 * time.Second
)

// BenchmarkHPAPeriods mimics kube-controller-manager's HPA controller: N
// HPAs in N namespaces (10 pods each), each reading the pods/* value of
// one rule (sum(rate(x[2m])) by (pod)) once per 15 s sync period, spread
// over the period or in one burst at its start (at most 64 in flight).
// Each leg runs per request (shared evaluation off) and shared (the
// defaults) against a real Prometheus. With the adapter target (the
// default) each leg starts the adapter binary (default flags, sharing off
// with --shared-evaluation-max-age=0) behind kube-apiserver's aggregator,
// and the requests come as the HPA controller's identity through
// kube-apiserver, so the adapter's SubjectAccessReviews are real. Per
// period it reports the CPU-seconds of Prometheus, the adapter and
// kube-apiserver (/proc), the Prometheus queries and SubjectAccessReviews
// the adapter sent, and the requests' p50/p99 as the HPA controller sees
// them.
func BenchmarkHPAPeriods(b *testing.B) {
	ns := envInts(EnvHPAs, []int{100, 1000})
	periods := envInt(EnvHPAPeriods, 2)
	modes := envChoices(EnvHPAModes, []string{"spread", "burst"}, "spread", "burst", "idle")
	inProcess := envChoice(EnvHPATarget, "adapter", "adapter", "provider") == "provider"
	var sharedLegs []bool
	for _, f := range envChoices(EnvHPAShared, []string{"false", "true"}, "false", "true") {
		sharedLegs = append(sharedLegs, f == "true")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	env, prom := startHPAStack(ctx, b, slices.Max(ns))
	defer env.Close()
	var cluster *hpaCluster
	if !inProcess {
		var err error
		if cluster, err = startHPACluster(ctx, env, prom, slices.Max(ns)); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range ns {
		for _, mode := range modes {
			for _, shared := range sharedLegs {
				if mode == "idle" && shared && len(sharedLegs) > 1 {
					continue // idle sends nothing: once per N is enough
				}
				name := fmt.Sprintf("N=%d/%s/shared=%t", n, mode, shared)
				b.Run(name, func(b *testing.B) {
					var t hpaTarget
					if inProcess {
						t = hpaProvider(b, prom, n, shared)
					} else {
						a, err := cluster.startAdapter(ctx, fmt.Sprintf("hpa-%d-%s-%t", n, mode, shared), shared)
						if err != nil {
							b.Fatal(err)
						}
						t = a
					}
					defer t.close(ctx)
					r := runHPALeg(ctx, b, t, n, periods, mode)
					r.report(b, name)
				})
			}
		}
	}
}

// startHPAStack starts the control plane and a Prometheus scraping maxN
// namespaces of hpaPodsEach counters, and waits for three samples of each.
func startHPAStack(ctx context.Context, b *testing.B, maxN int) (*framework.Env, *framework.Prometheus) {
	env, err := framework.Start(ctx, framework.Config{Logf: progress})
	if err != nil {
		b.Fatal(err)
	}
	liveEnv.Store(env)
	x, cfg := hpaExporter(b, env)
	cfg.ExtraArgs = strings.Fields(os.Getenv(EnvHPAPrometheusArgs))
	prom, err := env.StartPrometheus(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := setHPASeries(x, maxN); err != nil {
		b.Fatal(err)
	}
	waitHPASeries(ctx, b, prom, cfg.ScrapeInterval, maxN)
	return env, prom
}

// hpaExporter serves the HPAs' counters (none yet: setHPASeries sets
// them) until env closes, and returns the Prometheus config that scrapes
// them every EnvHPAScrapeInterval.
func hpaExporter(b *testing.B, env *framework.Env) (*exporter.Exporter, framework.PrometheusConfig) {
	b.Helper()
	x := exporter.New(nil)
	addr, stop, err := x.Serve()
	if err != nil {
		b.Fatal(err)
	}
	env.OnClose(stop)
	return x, framework.PrometheusConfig{ScrapeInterval: envDuration(EnvHPAScrapeInterval, 5*time.Second),
		Targets: []framework.ScrapeTarget{{Job: "hpa", Targets: []string{addr}, HonorLabels: true}}}
}

// waitHPASeries waits until prom holds three samples of each of n
// namespaces' counters.
func waitHPASeries(ctx context.Context, b *testing.B, prom *framework.Prometheus, scrape time.Duration, n int) {
	b.Helper()
	window := model.Duration(max(time.Minute, 4*scrape))
	if _, err := prom.WaitForQuery(ctx, fmt.Sprintf(`count(count_over_time(%s[%s]) >= 3) >= %d`, hpaMetric, window, n*hpaPodsEach), 1, 10*time.Minute); err != nil {
		b.Fatal(err)
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

// hpaTarget is what a leg's requests go to.
type hpaTarget interface {
	// get sends HPA i's request and returns the number of pods answered.
	get(ctx context.Context, i int) (int, error)
	// snapshot reads the counters and CPU times a period is measured with.
	snapshot(ctx context.Context) (hpaSnapshot, error)
	close(ctx context.Context)
}

// hpaSnapshot is a target's counters at one time: CPU-seconds of
// Prometheus, the adapter (this process for the provider target) and
// kube-apiserver; Prometheus queries and SubjectAccessReviews sent.
type hpaSnapshot struct {
	promCPU, adapterCPU, apiserverCPU float64
	queries, reviews                  float64
}

func (s hpaSnapshot) sub(o hpaSnapshot) hpaSnapshot {
	return hpaSnapshot{promCPU: s.promCPU - o.promCPU, adapterCPU: s.adapterCPU - o.adapterCPU, apiserverCPU: s.apiserverCPU - o.apiserverCPU,
		queries: s.queries - o.queries, reviews: s.reviews - o.reviews}
}

// hpaInProcess is the provider target: pkg/provider over a real promclient
// client, in this process, for n namespaces of pods (a fake object
// lister, the rule's series as discovery finds them), counting queries.
type hpaInProcess struct {
	p       *provider.Provider
	queries *atomic.Int64
	promPID int
	info    cmprovider.CustomMetricInfo
	sel     labels.Selector
}

var _ hpaTarget = (*hpaInProcess)(nil)

// hpaConfig is the benchmark's one rule (hpaRules, as a config.Config).
func hpaConfig() *config.Config {
	return &config.Config{Rules: []config.DiscoveryRule{{
		SeriesQuery:  `{__name__="` + hpaMetric + `",namespace!="",pod!=""}`,
		Resources:    config.ResourceMapping{Template: "<<.Resource>>"},
		Name:         config.NameMapping{Matches: "^(.*)_total$", As: "${1}_per_second"},
		MetricsQuery: `sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)`,
	}}}
}

// hpaProvider builds the provider target for n namespaces.
func hpaProvider(b *testing.B, prom *framework.Prometheus, n int, shared bool) *hpaInProcess {
	b.Helper()
	mapper := kubemapper.New()
	rs, err := rules.Compile(hpaConfig(), mapper)
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
	client, err := promclient.New(promclient.Config{Address: prom.URL, HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, Timeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	t := &hpaInProcess{queries: &atomic.Int64{}, promPID: prom.Process.Pid(),
		info: cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "bench_hpa_requests_per_second"},
		sel:  labels.SelectorFromSet(labels.Set{"app": "bench"})}
	t.p, err = provider.New(provider.Config{
		Index:    provider.IndexSource(func() *discovery.Index { return idx }),
		Backends: promclient.Single[promclient.SampleQuerier](countingQuerier{q: client, n: t.queries}),
		Objects:  objs,
		Mapper:   mapper,
		Shared:   provider.SharedConfig{Disabled: !shared},
	})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

func (t *hpaInProcess) get(ctx context.Context, i int) (int, error) {
	list, err := t.p.GetMetricBySelector(ctx, hpaNamespace(i), t.sel, t.info, labels.Everything())
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

func (t *hpaInProcess) snapshot(context.Context) (hpaSnapshot, error) {
	prom, err := cpuSeconds(t.promPID)
	return hpaSnapshot{promCPU: prom, adapterCPU: cputime.Process().Seconds(), queries: float64(t.queries.Load())}, err
}

func (t *hpaInProcess) close(context.Context) {}

type countingQuerier struct {
	q promclient.SampleQuerier
	n *atomic.Int64
}

func (c countingQuerier) QuerySamples(ctx context.Context, query string, ts time.Time) (promclient.Samples, error) {
	c.n.Add(1)
	return c.q.QuerySamples(ctx, query, ts)
}

// hpaItems GETs a metric value list and returns its number of items.
func hpaItems(ctx context.Context, hc *http.Client, u string) (int, error) {
	body, code, err := framework.Get(ctx, hc, u)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d: %.300s", code, body)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// hpaResult is one leg's figures: the measured periods' sums, each
// period's queries and reviews (the warm-up period first), and kube-apiserver's
// count of SubjectAccessReviews over the measured periods (-1: none).
type hpaResult struct {
	periods          int
	sum              hpaSnapshot
	perPeriod        []hpaSnapshot
	apiserverReviews float64
	errs, empty      int64
	lat              []time.Duration
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
	var queries, reviews, promCPU []string
	for _, p := range r.perPeriod {
		queries = append(queries, fmt.Sprintf("%.0f", p.queries))
		reviews = append(reviews, fmt.Sprintf("%.0f", p.reviews))
		promCPU = append(promCPU, fmt.Sprintf("%.3f", p.promCPU))
	}
	b.ReportMetric(per(r.sum.promCPU), "prom-cpu-s/period")
	b.ReportMetric(per(r.sum.adapterCPU), "adapter-cpu-s/period")
	b.ReportMetric(per(r.sum.apiserverCPU), "apiserver-cpu-s/period")
	b.ReportMetric(per(r.sum.queries), "queries/period")
	b.ReportMetric(per(r.sum.reviews), "reviews/period")
	b.ReportMetric(float64(q(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(q(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(r.errs+r.empty), "errors")
	progress("%s: per 15 s period: Prometheus %.3f CPU-s, adapter %.3f CPU-s, kube-apiserver %.3f CPU-s, %.1f queries, %.1f SubjectAccessReviews (kube-apiserver counted %.0f in all); "+
		"queries per period [warm-up, measured...] %v, reviews %v, Prometheus CPU-s %v; p50 %s p99 %s; %d requests, %d errors, %d short answers (load %s)",
		name, per(r.sum.promCPU), per(r.sum.adapterCPU), per(r.sum.apiserverCPU), per(r.sum.queries), per(r.sum.reviews), r.apiserverReviews,
		queries, reviews, promCPU, q(0.5), q(0.99), len(r.lat), r.errs, r.empty, framework.LoadAvg())
}

// runHPALeg runs one warm-up period then periods measured periods of n
// HPAs against t.
func runHPALeg(ctx context.Context, b *testing.B, t hpaTarget, n, periods int, mode string) hpaResult {
	b.Helper()
	if mode == "idle" {
		n = 0
	}
	burst := mode == "burst"
	r := hpaResult{periods: periods, apiserverReviews: -1}
	a, isAdapter := t.(*hpaAdapter)
	var reviews0 float64
	if isAdapter {
		reviews0 = a.apiserverReviews(ctx)
	}
	prev, err := t.snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	start := prev
	prof, promProf := &profiler{}, &profiler{}
	for period := range periods + 1 {
		if isAdapter && period == 1 {
			// PROMSCALER_BENCH_PROFILE: the adapter's and Prometheus's CPU
			// profiles of the measured periods.
			prof = a.c.s.startProfile(ctx, a.a, time.Duration(periods)*hpaPeriod)
			promProf = startPromProfile(ctx, a.c.s.prom, a.a.name, time.Duration(periods)*hpaPeriod)
		}
		rec := &r
		if period == 0 {
			rec = nil // warm-up: sharing starts, connections open, authorizations cached
		}
		hpaPeriodLoad(ctx, t, n, burst, rec)
		cur, err := t.snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		r.perPeriod = append(r.perPeriod, cur.sub(prev))
		if period == 0 {
			start = cur
		}
		prev = cur
	}
	r.sum = prev.sub(start)
	if isAdapter {
		prof.stop(ctx, a.c.s, a.a)
		promProf.wg.Wait()
		r.apiserverReviews = a.apiserverReviews(ctx) - reviews0 - r.perPeriod[0].reviews
	}
	return r
}

// hpaPeriodLoad sends one period's requests (one per HPA, spread evenly
// or all at its start, at most 64 in flight) and waits for the period's
// end; r, when not nil, records them.
func hpaPeriodLoad(ctx context.Context, t hpaTarget, n int, burst bool, r *hpaResult) {
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
			items, err := t.get(ctx, i)
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
			case items != hpaPodsEach:
				r.empty++
			}
		})
	}
	wg.Wait()
	time.Sleep(time.Until(start.Add(hpaPeriod)))
}

// startPromProfile starts a CPU profile of Prometheus for d (its
// /debug/pprof), when EnvProfile is set, written as <n>-<name>-prometheus-cpu.pb.gz.
func startPromProfile(ctx context.Context, prom *framework.Prometheus, name string, d time.Duration) *profiler {
	dir := os.Getenv(EnvProfile)
	if dir == "" {
		return &profiler{}
	}
	p := &profiler{dir: dir, prefix: fmt.Sprintf("%02d-%s", profileRun.Add(1), name)}
	p.wg.Go(func() {
		p.fetch(ctx, http.DefaultClient, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", prom.URL, max(int(d.Seconds()), 1)), "prometheus-cpu.pb.gz")
	})
	return p
}
