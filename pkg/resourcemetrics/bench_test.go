package resourcemetrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/promscaler/promscaler/internal/cputime"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/test/promtest"
)

// replayProm answers each distinct query with the body the fake
// Prometheus (fake) gave it once, then replayed, so that benchmarks
// measure the adapter and the HTTP round trip, not the fake's evaluation.
type replayProm struct {
	fake *promtest.Server
	mu   sync.Mutex
	body map[string]string
}

func (r *replayProm) answer(q string) (int, string) {
	r.mu.Lock()
	b, ok := r.body[q]
	r.mu.Unlock()
	if !ok {
		resp, err := r.fake.Client().Get(r.fake.URL + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return http.StatusBadGateway, err.Error()
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return http.StatusBadGateway, fmt.Sprintf("%d %s %v", resp.StatusCode, data, err)
		}
		b = string(data)
		r.mu.Lock()
		r.body[q] = b
		r.mu.Unlock()
	}
	return http.StatusOK, b
}

// bigCluster is namespaces x podsPerNS pods of two containers each, all
// with samples.
func bigCluster(namespaces, podsPerNS int) (*fakeObjects, *fakeProm) {
	objs := &fakeObjects{}
	fp := &fakeProm{ts: sampleTime}
	for n := range namespaces {
		ns := fmt.Sprintf("ns-%03d", n)
		for p := range podsPerNS {
			name := fmt.Sprintf("app-%03d-%05d", n, p)
			objs.pods = append(objs.pods, pod(ns, name, map[string]string{"app": fmt.Sprintf("app-%d", p%10)}))
			for _, c := range []string{"app", "sidecar"} {
				fp.series = append(fp.series,
					podSeries("cpu", ns, name, c, 0.001*float64(p+1)),
					podSeries("memory", ns, name, c, float64((p+1)<<20)))
			}
		}
	}
	return objs, fp
}

func benchClient(b *testing.B, fp *fakeProm) *promclient.Client {
	r := &replayProm{fake: fp.start(b), body: map[string]string{}}
	return newPromClient(b, r.answer)
}

// reportCPU reports the process CPU per operation since cpu0: on a shared
// machine wall time mostly measures waiting for a core.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

// staticQuerier answers each query from precomputed answers: no HTTP, no
// JSON, so a benchmark measures this package alone.
type staticQuerier map[string]promclient.Samples

func (s staticQuerier) QuerySamples(_ context.Context, q string, _ time.Time) (promclient.Samples, error) {
	v, ok := s[q]
	if !ok {
		return nil, fmt.Errorf("no answer for %q", q)
	}
	return v, nil
}

// BenchmarkOverheadPodMetrics10k: Source alone over 10,000 pods in 100
// namespaces (rendering 200 queries, grouping 40,000 samples, building
// 10,000 PodMetrics), with a static querier.
func BenchmarkOverheadPodMetrics10k(b *testing.B) {
	objs, fp := bigCluster(100, 100)
	rs := compileRules(b, testConfig)
	rec := fp.client(b)
	warm := mustSource(b, staticConfig(rs, rec))
	ctx := context.Background()
	if _, err := warm.GetPodMetrics(ctx, objs.pods); err != nil {
		b.Fatal(err)
	}
	static := staticQuerier{}
	for _, q := range fp.Queries() {
		var err error
		if static[q], err = rec.QuerySamples(ctx, q, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
	src := mustSource(b, staticConfig(rs, static))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for b.Loop() {
		got, err := src.GetPodMetrics(ctx, objs.pods)
		if err != nil || len(got) != len(objs.pods) {
			b.Fatalf("%d pods, %v", len(got), err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkSourcePodMetrics10k: the metrics of 10,000 pods in 100
// namespaces (200 Prometheus queries through the real client, its
// decoding included).
func BenchmarkSourcePodMetrics10k(b *testing.B) {
	objs, fp := bigCluster(100, 100)
	src := mustSource(b, sourceConfig(b, benchClient(b, fp)))
	ctx := context.Background()
	pods := objs.pods
	if got, err := src.GetPodMetrics(ctx, pods); err != nil || len(got) != len(pods) {
		b.Fatalf("warm-up: %d pods, %v", len(got), err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for b.Loop() {
		if _, err := src.GetPodMetrics(ctx, pods); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkAPIListPodMetrics10k: GET /apis/metrics.k8s.io/v1beta1/pods
// over 10,000 pods in 100 namespaces, through the generic API server's
// handler (JSON encoding included).
func BenchmarkAPIListPodMetrics10k(b *testing.B) {
	objs, fp := bigCluster(100, 100)
	h := newServer(b, objs, benchClient(b, fp))
	benchGet(b, h, "/apis/metrics.k8s.io/v1beta1/pods", 10000)
}

// BenchmarkAPIListPodMetricsNamespace: the HPA's request, one namespace of
// 100 pods with a label selector (10 pods), in a 10,000-pod cluster.
func BenchmarkAPIListPodMetricsNamespace(b *testing.B) {
	objs, fp := bigCluster(100, 100)
	h := newServer(b, objs, benchClient(b, fp))
	benchGet(b, h, "/apis/metrics.k8s.io/v1beta1/namespaces/ns-042/pods?labelSelector=app%3Dapp-3", 10)
}

func benchGet(b *testing.B, h http.Handler, path string, wantItems int) {
	code, body := do(b, h, path, "")
	var list struct {
		Items []metav1.PartialObjectMetadata `json:"items"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Items) != wantItems {
		b.Fatalf("warm-up GET %s: %d, %d items (want %d)", path, code, len(list.Items), wantItems)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for b.Loop() {
		if code, body := do(b, h, path, ""); code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, code, body)
		}
	}
	reportCPU(b, cpu0)
}
