package discovery_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/promtest"
	"github.com/promscaler/promscaler/test/ruletest"
)

// benchSeries returns series for the seed rule: per pod, perPod series
// (distinct "le" values) with a dozen labels, over 50 namespaces.
func benchSeries(pods, perPod int) []model.LabelSet {
	out := make([]model.LabelSet, 0, pods*perPod)
	for p := range pods {
		for s := range perPod {
			out = append(out, model.LabelSet{
				"__name__": "pm_status", "state": "active processes",
				"namespace": model.LabelValue(fmt.Sprintf("ns-%d", p%50)), "pod_name": model.LabelValue(fmt.Sprintf("pod-%d", p)),
				"le": model.LabelValue(fmt.Sprint(s)), "instance": model.LabelValue(fmt.Sprintf("10.0.%d.%d:9253", p/250, p%250)),
				"job": "php-fpm", "container": "fpm", "node": model.LabelValue(fmt.Sprintf("node-%d", p%20)),
				"pool": "www", "scrape_pool": "kubernetes-pods", "app": "shop", "version": "v1.2.3",
			})
		}
	}
	return out
}

// BenchmarkDiscovery measures one discovery pass with each strategy, the
// adapter side only: Prometheus' answers are computed once by the fake and
// replayed (resp-bytes/op is what Prometheus sends per pass). The labels
// strategy's cost grows with served names x resource labels x namespaces,
// the grouped strategy's with distinct (metric, resource, namespace)
// combinations (pods here), the series strategy's with every series and
// label.
func BenchmarkDiscovery(b *testing.B) {
	ruleList := ruletest.Compile(b, testConfig)
	for _, size := range []struct{ pods, perPod int }{{1000, 10}, {5000, 20}} {
		benchStrategies(b, ruleList, benchSeries(size.pods, size.perPod), 2)
	}
}

// replay answers each distinct request (path and parameters, times
// excluded) with the body the fake Prometheus gave the first time, so the
// benchmark measures the adapter side: HTTP, JSON decoding and indexing.
type replay struct {
	upstream string
	mu       sync.Mutex
	bodies   map[string][]byte
	bytes    atomic.Int64
}

func newReplay(upstream string) *replay {
	return &replay{upstream: upstream, bodies: map[string][]byte{}}
}

func (r *replay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if err := req.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	form := url.Values{}
	for k, v := range req.Form {
		if k != "start" && k != "end" && k != "time" && k != "timeout" {
			form[k] = v
		}
	}
	key := req.URL.Path + "?" + form.Encode()
	r.mu.Lock()
	body, ok := r.bodies[key]
	r.mu.Unlock()
	if !ok {
		resp, err := http.PostForm(r.upstream+req.URL.Path, req.Form)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if body, err = io.ReadAll(resp.Body); err != nil || resp.StatusCode != http.StatusOK {
			http.Error(w, fmt.Sprintf("upstream: %d %v", resp.StatusCode, err), http.StatusBadGateway)
			return
		}
		r.mu.Lock()
		r.bodies[key] = body
		r.mu.Unlock()
	}
	r.bytes.Add(int64(len(body)))
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// BenchmarkDiscoveryManyNames is BenchmarkDiscovery for the labels
// strategy's worst case: many served names (its requests grow with names x
// resource labels), here 200 names x 20 namespaces x 25 pods = 100,000
// series under one template rule, so each name needs its label names and
// the namespaces of each resource label.
func BenchmarkDiscoveryManyNames(b *testing.B) {
	ruleList := ruletest.Compile(b, `
rules:
- seriesQuery: '{__name__=~"app_.*",namespace!="",pod!=""}'
  resources:
    template: <<.Resource>>
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`)
	const names, namespaces, pods = 200, 20, 25
	series := make([]model.LabelSet, 0, names*namespaces*pods)
	for n := range names {
		for ns := range namespaces {
			for p := range pods {
				series = append(series, model.LabelSet{
					"__name__": model.LabelValue(fmt.Sprintf("app_metric_%d", n)), "namespace": model.LabelValue(fmt.Sprintf("ns-%d", ns)),
					"pod": model.LabelValue(fmt.Sprintf("pod-%d", p)), "service": "web", "instance": model.LabelValue(fmt.Sprintf("10.0.%d.%d:8080", ns, p)),
					"job": "app", "container": "app",
				})
			}
		}
	}
	// pods, services, jobs.batch (namespaced) and namespaces.
	benchStrategies(b, ruleList, series, 4*names)
}

// benchStrategies runs one discovery pass per iteration with each strategy
// over series, answered by promtest through a replaying cache (so the
// benchmark measures the adapter, not the fake), and reports the answers'
// bytes per pass. wantMetrics is the number of custom metrics the index
// must hold.
func benchStrategies(b *testing.B, ruleList *rules.RuleSet, series []model.LabelSet, wantMetrics int) {
	b.Helper()
	fake := promtest.New(series)
	defer fake.Close()
	cache := newReplay(fake.URL)
	front := httptest.NewServer(cache)
	defer front.Close()
	client, err := promclient.New(promclient.Config{Address: front.URL, HTTPClient: front.Client(), Timeout: time.Minute, Metrics: metrics.New()})
	if err != nil {
		b.Fatal(err)
	}
	for _, st := range discovery.Strategies {
		b.Run(fmt.Sprintf("%s/series=%d", st, len(series)), func(b *testing.B) {
			d, err := discovery.New(discovery.Options{Backends: promclient.Single[discovery.Prometheus](client), Rules: ruleList, Interval: time.Minute, Strategy: st, Metrics: metrics.New()})
			if err != nil {
				b.Fatal(err)
			}
			if err := d.RunOnce(context.Background()); err != nil { // fill the replay cache
				b.Fatal(err)
			}
			cache.bytes.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := d.RunOnce(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cache.bytes.Load())/float64(b.N), "resp-bytes/op")
			if n := len(d.Index().CustomMetrics()); n != wantMetrics {
				b.Fatalf("%d custom metrics, want %d", n, wantMetrics)
			}
		})
	}
}
