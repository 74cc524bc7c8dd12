//go:build e2e && bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promscaler/promscaler/internal/cputime"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

var (
	servingOnce    sync.Once
	servingAdapter *adapterProc
	servingErr     error

	perRequestOnce    sync.Once
	perRequestAdapter *adapterProc
	perRequestErr     error
)

// coalesceWindowFlag is the adapter flag that lets a burst's identical
// requests take an answer that landed before they arrived.
const coalesceWindowFlag = "--prometheus-coalesce-window"

// perRequestArgs is the overhead adapter's command line: args (the serving
// adapter's) with the coalescing window off, unless args set it or the
// adapter (its --help) has no window on by default; own is false when the
// serving adapter's command line already is that. At 500 req/s the
// requests overlap, so with a window an open loop is answered from landed
// answers (58 queries for 15,000 requests on b1bad6d, 5 Dec), and the
// adapter leg no longer crosses the per-request path the raw query is
// compared with.
func perRequestArgs(help string, args []string) (out []string, own bool) {
	for _, a := range args {
		if a == coalesceWindowFlag || strings.HasPrefix(a, coalesceWindowFlag+"=") {
			return args, false
		}
	}
	m := regexp.MustCompile(regexp.QuoteMeta(coalesceWindowFlag) + `[^\n]*\(default ([^)]+)\)`).FindStringSubmatch(help)
	if m == nil || m[1] == "0s" || m[1] == "0" {
		return args, false
	}
	return append(slices.Clone(args), coalesceWindowFlag+"=0"), true
}

// perRequest returns the adapter of BenchmarkOverhead: the serving adapter
// when its flags already send a query per request that finds no flight,
// else one started once with perRequestArgs.
func (s *stack) perRequest(b *testing.B) *adapterProc {
	b.Helper()
	help, _ := exec.Command(s.env.Bin("adapter"), "--help").CombinedOutput()
	args, own := perRequestArgs(string(help), s.cfg.servingArgs)
	if !own {
		return s.serving(b)
	}
	perRequestOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		a, err := s.startAdapter("per-request", args...)
		if err == nil {
			err = s.waitServing(ctx, a)
		}
		perRequestAdapter, perRequestErr = a, err
		if err == nil {
			progress("overhead adapter: flags %q (the serving adapter's with the coalescing window off)", args)
		}
	})
	if perRequestErr != nil {
		b.Fatal(perRequestErr)
	}
	return perRequestAdapter
}

// podsStarURL is the HPA's Pods-metric request: every pod of ns matching the
// label selector.
func podsStarURL(base, ns string) string {
	return base + "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/" + servingMetric +
		"?labelSelector=" + url.QueryEscape(podLabel+"="+podLabelValue)
}

// serving returns the adapter of the serving benchmarks: default flags
// (only the connection flags set), started once, ready when it answers
// pods/* with every pod of every serving namespace.
func (s *stack) serving(b *testing.B) *adapterProc {
	b.Helper()
	servingOnce.Do(func() {
		servingAdapter, servingErr = s.startServing()
	})
	if servingErr != nil {
		b.Fatal(servingErr)
	}
	return servingAdapter
}

func (s *stack) startServing() (*adapterProc, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, err := s.startAdapter("serving", s.cfg.servingArgs...)
	if err != nil {
		return nil, err
	}
	if err := s.waitServing(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

// waitServing returns when a answers pods/* with every pod of every
// serving namespace.
func (s *stack) waitServing(ctx context.Context, a *adapterProc) error {
	if _, err := a.waitListed(ctx, s.admin, "pods/"+servingMetric, 3*time.Minute); err != nil {
		return err
	}
	want := map[string]int{bigNamespace: s.cfg.bigPods}
	for w := range s.cfg.workers {
		want[servingNamespace(w)] = s.cfg.servePods
	}
	deadline := time.Now().Add(2 * time.Minute)
	for ns, n := range want {
		for {
			got, err := items(ctx, s.admin, podsStarURL(a.url, ns))
			if err == nil && got == n {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pods/* in %s: %d items (err %v), want %d; log:\n%s", ns, got, err, n, tail(a.logFile, 20))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	age, err := s.prom.Query(ctx, `max(time() - timestamp(`+servingMetric+`))`)
	if err != nil || len(age) != 1 {
		return fmt.Errorf("sample age of %s: %v (%d samples)", servingMetric, err, len(age))
	}
	progress("serving adapter ready: every pod of every namespace answered with its value; every %s series' latest sample at most %.1fs old", servingMetric, age[0].Value)
	return nil
}

// items returns how many items a metric value list has, and an error when
// a pod's value is not the one the exporter serves for it (1 + index%50).
func items(ctx context.Context, hc *http.Client, u string) (int, error) {
	body, code, err := framework.Get(ctx, hc, u)
	if err != nil {
		return 0, err
	}
	if code != 200 {
		return 0, fmt.Errorf("HTTP %d: %.300s", code, body)
	}
	var list struct {
		Items []struct {
			DescribedObject struct {
				Name string `json:"name"`
			} `json:"describedObject"`
			Value string `json:"value"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, err
	}
	for _, it := range list.Items {
		var i int
		if _, err := fmt.Sscanf(it.DescribedObject.Name, "pod-%d", &i); err != nil {
			return 0, fmt.Errorf("unexpected pod %q", it.DescribedObject.Name)
		}
		if want := strconv.Itoa(1 + i%50); it.Value != want {
			return 0, fmt.Errorf("pod %s: value %q, want %q", it.DescribedObject.Name, it.Value, want)
		}
	}
	return len(list.Items), nil
}

// adapterCounters reads the adapter's Prometheus-query counters.
type adapterCounters struct {
	queries, coalesced float64
	// apiSum, apiCount: the adapter's apiserver_request_duration_seconds
	// for custom.metrics.k8s.io, which the API server measures from the
	// request's received timestamp (the one the coalescer compares).
	apiSum, apiCount float64
}

func (s *stack) adapterCounters(ctx context.Context, a *adapterProc) adapterCounters {
	text, err := metricsText(ctx, s.admin, a.url+"/metrics")
	if err != nil {
		return adapterCounters{}
	}
	return adapterCounters{
		queries:   counters(text, "promscaler_prometheus_request_duration_seconds_count", "endpoint")["query"],
		coalesced: counters(text, "promscaler_prometheus_coalesced_requests_total", "endpoint")["query"],
		apiSum:    counters(text, "apiserver_request_duration_seconds_sum", "group")["custom.metrics.k8s.io"],
		apiCount:  counters(text, "apiserver_request_duration_seconds_count", "group")["custom.metrics.k8s.io"],
	}
}

// measured wraps a load run with what it cost: Prometheus queries (query
// log and the adapter's counters), Kubernetes API calls, CPU (the adapter's
// and Prometheus's from /proc, the load generator's - this process - from
// getrusage).
type measured struct {
	res    result
	logged []string
	// entries are logged with their times.
	entries                         []loggedQuery
	before, after                   adapterCounters
	k8sCalls                        float64
	apiserver                       map[string]float64
	adapterCPU, promCPU, harnessCPU float64
}

func (s *stack) measure(b *testing.B, a *adapterProc, querySubstr string, run func() result) measured {
	ctx := context.Background()
	var m measured
	qlog := newQueryLog(s.prom.QueryLogFile)
	calls0, err := s.snapshotAPICalls(ctx, a)
	if err != nil {
		b.Fatal(err)
	}
	m.before = s.adapterCounters(ctx, a)
	am, pm := s.startCPUs(b, a)
	prof := s.startProfile(ctx, a, s.cfg.duration)
	h0 := cputime.Process()
	m.res = run()
	m.harnessCPU = (cputime.Process() - h0).Seconds()
	m.adapterCPU, _, _ = am.stop()
	m.promCPU, _, _ = pm.stop()
	prof.stop(ctx, s, a)
	m.after = s.adapterCounters(ctx, a)
	calls1, err := s.snapshotAPICalls(ctx, a)
	if err != nil {
		b.Fatal(err)
	}
	m.k8sCalls, m.apiserver = calls0.diff(calls1)
	if m.entries, err = qlog.entries(querySubstr); err != nil {
		b.Fatal(err)
	}
	for _, e := range m.entries {
		m.logged = append(m.logged, e.query)
	}
	return m
}

func (m measured) perReq(v float64) float64 { return v / float64(max(m.res.requests, 1)) }

// harnessCores is the load generator's CPU over the run's wall time: how
// many of the machine's cores it took.
func (m measured) harnessCores() float64 { return m.harnessCPU / m.res.elapsed.Seconds() }

// report logs the run and reports its metrics.
func (m measured) report(b *testing.B, name string) {
	m.log(name)
	r := m.res
	perReq := m.perReq
	b.ReportMetric(r.perSecond(), "req/s")
	b.ReportMetric(r.percentile(0.5), "p50-ms")
	b.ReportMetric(r.percentile(0.99), "p99-ms")
	b.ReportMetric(float64(r.errors), "errors")
	b.ReportMetric(float64(len(m.logged)), "prom-queries")
	b.ReportMetric(perReq(float64(len(m.logged))), "prom-queries/req")
	b.ReportMetric(perReq(m.adapterCPU)*1000, "adapter-cpu-ms/req")
	b.ReportMetric(perReq(m.promCPU)*1000, "prom-cpu-ms/req")
	b.ReportMetric(perReq(m.harnessCPU)*1000, "loadgen-cpu-ms/req")
	b.ReportMetric(m.k8sCalls, "k8s-api-calls")
}

// log prints what the run measured.
func (m measured) log(name string) {
	r := m.res
	perReq := m.perReq
	var keys []string
	for k, v := range m.apiserver {
		keys = append(keys, fmt.Sprintf("%s=%.0f", k, v))
	}
	sort.Strings(keys)
	progress("%s: %d requests (%d errors%s) in %s: %.0f req/s, p50 %.2f ms, p99 %.2f ms; Prometheus queries: %d logged, %.0f sent by the adapter (%.0f coalesced); adapter %.2f CPU-ms/req, Prometheus %.2f CPU-ms/req, load generator %.2f CPU-ms/req (%.2f cores); adapter Kubernetes API calls %.0f; kube-apiserver requests by resource %s; load %s",
		name, r.requests, r.errors, errSuffix(r.firstErr), r.elapsed.Round(time.Millisecond), r.perSecond(), r.percentile(0.5), r.percentile(0.99),
		len(m.logged), m.after.queries-m.before.queries, m.after.coalesced-m.before.coalesced,
		perReq(m.adapterCPU)*1000, perReq(m.promCPU)*1000, perReq(m.harnessCPU)*1000, m.harnessCores(), m.k8sCalls, strings.Join(keys, ","), framework.LoadAvg())
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return ", first: " + s
}

// BenchmarkServing measures the adapter with its default flags answering
// the HPA's pods/* request over a 100-pod namespace, closed loop: every
// worker on one namespace (identical requests may coalesce), every worker
// on its own namespace (distinct queries, nothing coalesces), and one
// request at a time.
func BenchmarkServing(b *testing.B) {
	s := setup(b)
	a := s.serving(b)
	ctx := context.Background()
	w := s.cfg.workers
	runs := []struct {
		name    string
		workers int
		url     func(int) string
	}{
		{fmt.Sprintf("pods-star-%d/identical-c%d", s.cfg.servePods, w), w, func(int) string { return podsStarURL(a.url, servingNamespace(0)) }},
		{fmt.Sprintf("pods-star-%d/distinct-namespaces-c%d", s.cfg.servePods, w), w, func(i int) string { return podsStarURL(a.url, servingNamespace(i)) }},
		{fmt.Sprintf("pods-star-%d/sequential", s.cfg.servePods), 1, func(int) string { return podsStarURL(a.url, servingNamespace(0)) }},
	}
	for _, run := range runs {
		b.Run(run.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				m := s.measure(b, a, servingMetric, func() result {
					return closedLoop(ctx, s.admin, run.workers, s.cfg.duration, run.url)
				})
				m.report(b, run.name)
			}
		})
	}
}

// BenchmarkOverhead sends the pods/* request open loop at each configured
// rate (500/s, and 100/s, which Prometheus alone sustains on a busy 2-core
// machine) through the adapter, then the PromQL the adapter sent (read from
// Prometheus's query log) straight to Prometheus at the same rate
// (uncompressed, as the adapter asks by default; the log shows each leg's
// encoding), and
// reports the p99 difference and what the load generator (this process)
// spent per request in each leg. It also reports the adapter's own time per
// request: each request's latency less the wait for Prometheus the adapter
// announced in its Server-Timing header (own-p50-ms, own-p99-ms), i.e. the
// overhead each request paid beyond its Prometheus query, without the
// Prometheus leg's own stalls. The rate=N-APAP run, at the first rate
// only, measures the two legs twice, alternating (adapter, Prometheus,
// adapter, Prometheus), so the noise between rounds is visible; the
// rate=N-interleaved run alternates them in short segments and gives the
// p99 difference a confidence interval (benchOverheadInterleaved).
func BenchmarkOverhead(b *testing.B) {
	s := setup(b)
	a := s.perRequest(b)
	for _, rate := range s.cfg.rates {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				s.benchOverhead(b, a, rate, 1)
			}
		})
	}
	rate := s.cfg.rates[0]
	b.Run(fmt.Sprintf("rate=%d-APAP", rate), func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			s.benchOverhead(b, a, rate, 2)
		}
	})
	b.Run(fmt.Sprintf("rate=%d-interleaved", rate), func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			s.benchOverheadInterleaved(b, a, rate)
		}
	})
}

// benchOverhead measures the adapter leg and the Prometheus leg rounds
// times, alternating, and reports the legs' latencies pooled over the
// rounds (and each round's p99 when there are several).
func (s *stack) benchOverhead(b *testing.B, a *adapterProc, rate, rounds int) {
	ctx := context.Background()
	ns := servingNamespace(0)
	adapterURL := podsStarURL(a.url, ns)
	var (
		query    string
		raw      string
		ads, prs []measured
	)
	for round := 1; round <= rounds; round++ {
		// One second at the rate, unmeasured, so connections are up.
		openLoop(ctx, s.admin, rate, time.Second, adapterURL)
		ma := s.measure(b, a, `namespace="`+ns+`"`, func() result {
			return openLoop(ctx, s.admin, rate, s.cfg.duration, adapterURL)
		})
		ma.log(fmt.Sprintf("adapter open loop %d/s (round %d/%d)", rate, round, rounds))
		if query == "" {
			if len(ma.logged) == 0 {
				b.Fatalf("no query for %s in Prometheus's query log", ns)
			}
			query = ma.logged[0]
			raw = s.prom.URL + "/api/v1/query?" + url.Values{"query": {query}}.Encode()
		}
		openLoop(ctx, s.promHC, rate, time.Second, raw)
		mp := s.measure(b, a, `namespace="`+ns+`"`, func() result {
			return openLoop(ctx, s.promHC, rate, s.cfg.duration, raw)
		})
		mp.log(fmt.Sprintf("prometheus open loop %d/s (round %d/%d, %s)", rate, round, rounds, query))
		ads, prs = append(ads, ma), append(prs, mp)
		if round == 1 {
			s.logEncodings(ctx, adapterURL, raw)
		}
		ra, rp := ma.res, mp.res
		if dir := os.Getenv(EnvTimeline); dir != "" {
			for leg, r := range map[string]result{"adapter": ra, "prometheus": rp} {
				if err := r.writeTimeline(dir, fmt.Sprintf("overhead-%d-%d-r%d-%s.txt", rate, rounds, round, leg)); err != nil {
					b.Errorf("%s: %v", EnvTimeline, err)
				}
			}
		}
		progress("overhead at %d/s, round %d/%d: adapter p50 %.2f p99 %.2f ms, Prometheus p50 %.2f p99 %.2f ms: p99 overhead %.2f ms; stalls of 3+ requests >= 10 ms: adapter leg %v, Prometheus leg %v; load generator %.3f CPU-ms/req (%.2f cores) through the adapter, %.3f CPU-ms/req (%.2f cores) to Prometheus",
			rate, round, rounds, ra.percentile(0.5), ra.percentile(0.99), rp.percentile(0.5), rp.percentile(0.99), ra.percentile(0.99)-rp.percentile(0.99),
			ra.stalls(), rp.stalls(),
			ma.perReq(ma.harnessCPU)*1000, ma.harnessCores(), mp.perReq(mp.harnessCPU)*1000, mp.harnessCores())
		progress("adapter's own time per request at %d/s, round %d/%d (latency less the Prometheus wait in Server-Timing): p50 %.2f p99 %.2f ms",
			rate, round, rounds, ra.ownPercentile(0.5), ra.ownPercentile(0.99))
		if rounds > 1 {
			b.ReportMetric(ra.percentile(0.99), fmt.Sprintf("p99-ms-r%d", round))
			b.ReportMetric(ra.ownPercentile(0.99), fmt.Sprintf("own-p99-ms-r%d", round))
			b.ReportMetric(rp.percentile(0.99), fmt.Sprintf("prom-p99-ms-r%d", round))
		}
	}
	ma, mp := pool(ads), pool(prs)
	ra, rp := ma.res, mp.res
	if len(ra.waits) != len(ra.latencies) {
		ra.waits = nil // a round without them
	}
	if rounds > 1 {
		progress("overhead at %d/s, %d rounds pooled: adapter p50 %.2f p99 %.2f ms, Prometheus p50 %.2f p99 %.2f ms: p99 overhead %.2f ms; adapter's own time per request p50 %.2f p99 %.2f ms",
			rate, rounds, ra.percentile(0.5), ra.percentile(0.99), rp.percentile(0.5), rp.percentile(0.99), ra.percentile(0.99)-rp.percentile(0.99),
			ra.ownPercentile(0.5), ra.ownPercentile(0.99))
	}
	reportLegs(b, ra, rp)
	b.ReportMetric(ra.percentile(0.99)-rp.percentile(0.99), "overhead-p99-ms")
	b.ReportMetric(ra.ownPercentile(0.5), "own-p50-ms")
	b.ReportMetric(ra.ownPercentile(0.99), "own-p99-ms")
	as, ps := ra.stalls(), rp.stalls()
	b.ReportMetric(float64(as.Stalls), "stalls")
	b.ReportMetric(float64(as.Requests)/float64(max(len(ra.latencies), 1))*100, "stalled-%")
	b.ReportMetric(float64(ps.Stalls), "prom-stalls")
	b.ReportMetric(float64(ps.Requests)/float64(max(len(rp.latencies), 1))*100, "prom-stalled-%")
	b.ReportMetric(float64(ra.errors+rp.errors), "errors")
	b.ReportMetric(float64(len(ma.logged)), "prom-queries")
	b.ReportMetric(ma.perReq(ma.adapterCPU)*1000, "adapter-cpu-ms/req")
	b.ReportMetric(mp.perReq(mp.promCPU)*1000, "prom-cpu-ms/query")
	b.ReportMetric(ma.perReq(ma.harnessCPU)*1000, "loadgen-cpu-ms/req")
	b.ReportMetric(mp.perReq(mp.harnessCPU)*1000, "prom-leg-loadgen-cpu-ms/req")
	b.ReportMetric(ma.harnessCores(), "loadgen-cores")
	b.ReportMetric(mp.harnessCores(), "prom-leg-loadgen-cores")
	b.ReportMetric(ma.k8sCalls, "k8s-api-calls")
}

// reportLegs reports the rate and the p50 and p99 of both legs of an
// overhead run: ra through the adapter, rp straight to Prometheus.
func reportLegs(b *testing.B, ra, rp result) {
	b.ReportMetric(ra.perSecond(), "req/s")
	b.ReportMetric(rp.perSecond(), "prom-req/s")
	b.ReportMetric(ra.percentile(0.5), "p50-ms")
	b.ReportMetric(ra.percentile(0.99), "p99-ms")
	b.ReportMetric(rp.percentile(0.5), "prom-p50-ms")
	b.ReportMetric(rp.percentile(0.99), "prom-p99-ms")
}

// logEncodings logs the size and encoding of one answer of each leg.
func (s *stack) logEncodings(ctx context.Context, adapterURL, promURL string) {
	var out []string
	for _, leg := range []struct {
		name, url string
		hc        *http.Client
	}{{"adapter", adapterURL, s.admin}, {"Prometheus", promURL, s.promHC}} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, leg.url, nil)
		if err != nil {
			continue
		}
		a, err := doRequest(leg.hc, req)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", leg.name, err))
			continue
		}
		out = append(out, fmt.Sprintf("%s %d bytes (%s)", leg.name, a.bytes, a.encodingName()))
	}
	progress("answers of the two legs: %s", strings.Join(out, ", "))
}

// pool merges measured runs: requests, latencies, queries and CPU add up.
func pool(ms []measured) measured {
	if len(ms) == 1 {
		return ms[0]
	}
	var p measured
	for _, m := range ms {
		p.res.requests += m.res.requests
		p.res.errors += m.res.errors
		p.res.elapsed += m.res.elapsed
		p.res.latencies = append(p.res.latencies, m.res.latencies...)
		p.res.due = append(p.res.due, m.res.due...)
		p.res.waits = append(p.res.waits, m.res.waits...)
		if p.res.firstErr == "" {
			p.res.firstErr = m.res.firstErr
		}
		p.logged = append(p.logged, m.logged...)
		p.k8sCalls += m.k8sCalls
		p.adapterCPU += m.adapterCPU
		p.promCPU += m.promCPU
		p.harnessCPU += m.harnessCPU
	}
	return p
}

// star5000Requests is how many requests each leg of BenchmarkStar5000
// sends: enough for a p99 that is not simply the slowest request (with 50,
// the p99 was the maximum).
const star5000Requests = 200

// BenchmarkStar5000 sends pods/* over the 5,000-pod namespace
// star5000Requests times, one at a time, then the PromQL the adapter sent
// (read from Prometheus's query log) straight to Prometheus as many times,
// one at a time, uncompressed as the
// adapter asks by default, and reports both answer times, the adapter's
// overhead over Prometheus, the length of the query and the size of both
// answers (as read, with the encoding each leg used, and when gzip is
// asked). The adapter leg is measured a second time without asking for gzip
// (identity-*): Go's transport asks for it, and the API server compresses
// answers over 128 KiB.
func BenchmarkStar5000(b *testing.B) {
	s := setup(b)
	a := s.serving(b)
	ctx := context.Background()
	b.ReportAllocs()
	for range b.N {
		u := podsStarURL(a.url, bigNamespace)
		adapterReq := func() (*http.Request, error) { return http.NewRequestWithContext(ctx, http.MethodGet, u, nil) }
		var adapterAns answer
		m := s.measure(b, a, `namespace="`+bigNamespace+`"`, func() result {
			r, last := sequential(star5000Requests, adapterReq, s.admin)
			adapterAns = last
			return r
		})
		longest := 0
		for _, q := range m.logged {
			longest = max(longest, len(q))
		}
		m.report(b, fmt.Sprintf("pods/* over %d pods", s.cfg.bigPods))
		if len(m.logged) == 0 {
			b.Fatalf("no query for %s in Prometheus's query log", bigNamespace)
		}
		progress("query sent for %d pods (%d bytes): %.2000s", s.cfg.bigPods, longest, m.logged[0])
		b.ReportMetric(float64(longest), "query-bytes")
		b.ReportMetric(float64(s.cfg.bigPods), "pods")

		query := m.logged[0]
		promReq := func() (*http.Request, error) { return promQueryRequest(ctx, s.prom.URL, query) }
		// One unmeasured query, so the connection is up.
		sequential(1, promReq, s.promHC)
		var promAns answer
		mp := s.measure(b, a, `namespace="`+bigNamespace+`"`, func() result {
			r, last := sequential(star5000Requests, promReq, s.promHC)
			promAns = last
			return r
		})
		mp.log(fmt.Sprintf("the adapter's query for %d pods straight to Prometheus", s.cfg.bigPods))

		// The adapter leg again, uncompressed: what gzip costs the adapter.
		tr, err := adminTransport(s.env.PKI.Admin)
		if err != nil {
			b.Fatal(err)
		}
		tr.DisableCompression = true
		plain := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
		sequential(1, adapterReq, plain)
		var plainAns answer
		mi := s.measure(b, a, `namespace="`+bigNamespace+`"`, func() result {
			r, last := sequential(star5000Requests, adapterReq, plain)
			plainAns = last
			return r
		})
		plain.CloseIdleConnections()
		mi.log(fmt.Sprintf("pods/* over %d pods, uncompressed (%s, %d bytes)", s.cfg.bigPods, plainAns.encodingName(), plainAns.bytes))
		b.ReportMetric(mi.res.percentile(0.5), "identity-p50-ms")
		b.ReportMetric(mi.res.percentile(0.99), "identity-p99-ms")
		b.ReportMetric(mi.perReq(mi.adapterCPU)*1000, "identity-adapter-cpu-ms/req")

		aWire, aEnc, aErr := s.wire(adapterReq, s.admin)
		pWire, pEnc, pErr := s.wire(promReq, s.promHC)
		if aErr != nil || pErr != nil {
			b.Fatalf("measuring answer sizes on the wire: adapter: %v, Prometheus: %v", aErr, pErr)
		}
		ra, rp := m.res, mp.res
		progress("pods/* over %d pods: adapter p50 %.2f p99 %.2f ms, Prometheus p50 %.2f p99 %.2f ms: overhead p50 %.2f p99 %.2f ms; answers: adapter %d bytes (measured leg: %s; %d bytes on the wire when gzip is asked: %s), Prometheus %d bytes (measured leg: %s; %d bytes on the wire when gzip is asked: %s)",
			s.cfg.bigPods, ra.percentile(0.5), ra.percentile(0.99), rp.percentile(0.5), rp.percentile(0.99),
			ra.percentile(0.5)-rp.percentile(0.5), ra.percentile(0.99)-rp.percentile(0.99),
			adapterAns.bytes, adapterAns.encodingName(), aWire, encodingName(aEnc),
			promAns.bytes, promAns.encodingName(), pWire, encodingName(pEnc))
		progress("pods/* over %d pods: the adapter's own time per request (latency less the Prometheus wait in Server-Timing): p50 %.2f p99 %.2f ms (gzip), p50 %.2f p99 %.2f ms (identity)",
			s.cfg.bigPods, ra.ownPercentile(0.5), ra.ownPercentile(0.99), mi.res.ownPercentile(0.5), mi.res.ownPercentile(0.99))
		b.ReportMetric(ra.ownPercentile(0.5), "own-p50-ms")
		b.ReportMetric(ra.ownPercentile(0.99), "own-p99-ms")
		b.ReportMetric(rp.percentile(0.5), "prom-p50-ms")
		b.ReportMetric(rp.percentile(0.99), "prom-p99-ms")
		b.ReportMetric(ra.percentile(0.5)-rp.percentile(0.5), "overhead-p50-ms")
		b.ReportMetric(ra.percentile(0.99)-rp.percentile(0.99), "overhead-p99-ms")
		b.ReportMetric(float64(rp.errors), "prom-errors")
		b.ReportMetric(float64(adapterAns.bytes), "answer-bytes")
		b.ReportMetric(float64(promAns.bytes), "prom-answer-bytes")
		b.ReportMetric(float64(aWire), "answer-wire-bytes")
		b.ReportMetric(float64(pWire), "prom-answer-wire-bytes")
	}
}

// wire returns the size on the wire of one answer to newReq's request and
// its encoding.
func (s *stack) wire(newReq func() (*http.Request, error), hc *http.Client) (int, string, error) {
	req, err := newReq()
	if err != nil {
		return 0, "", err
	}
	return wireBytes(hc, req)
}

func encodingName(e string) string { return answer{encoding: e}.encodingName() }

// BenchmarkServingCached is BenchmarkServing's identical and
// distinct-namespace runs against a second adapter started with
// --prometheus-cache-ttl=1s (off by default): what the result cache adds
// when identical requests do not overlap in time.
func BenchmarkServingCached(b *testing.B) {
	s := setup(b)
	// The default-flags adapter idles meanwhile; start it first so it does
	// not start during these runs.
	s.serving(b)
	a, err := s.startAdapter("serving-cache-1s", "--prometheus-cache-ttl=1s")
	if err != nil {
		b.Fatal(err)
	}
	defer a.stop()
	ctx := context.Background()
	if _, err := a.waitListed(ctx, s.admin, "pods/"+servingMetric, 3*time.Minute); err != nil {
		b.Fatal(err)
	}
	w := s.cfg.workers
	for _, run := range []struct {
		name string
		url  func(int) string
	}{
		{fmt.Sprintf("pods-star-%d/identical-c%d", s.cfg.servePods, w), func(int) string { return podsStarURL(a.url, servingNamespace(0)) }},
		{fmt.Sprintf("pods-star-%d/distinct-namespaces-c%d", s.cfg.servePods, w), func(i int) string { return podsStarURL(a.url, servingNamespace(i)) }},
	} {
		b.Run(run.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				m := s.measure(b, a, servingMetric, func() result {
					return closedLoop(ctx, s.admin, w, s.cfg.duration, run.url)
				})
				m.report(b, run.name+" (--prometheus-cache-ttl=1s)")
			}
		})
	}
}
