package promclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/cputime"
	"github.com/promscaler/promscaler/internal/metrics"
)

// benchServer answers every query with a two-sample vector.
func benchServer(b *testing.B) *fakeProm {
	b.Helper()
	return newFakeProm(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[`+
			`{"metric":{"namespace":"default","pod":"a"},"value":[1700000000,"0.5"]},`+
			`{"metric":{"namespace":"default","pod":"b"},"value":[1700000000,"1.5"]}]}}`)
	})
}

// benchClient is a client of the Prometheus at url, for benchmarks.
func benchClient(b *testing.B, url string) *Client {
	b.Helper()
	c, err := New(Config{Address: url, HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}, Metrics: metrics.New(), Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.CloseIdleConnections)
	return c
}

const benchQuery = `sum(rate(http_requests_total{namespace="default",pod=~"a|b"}[2m])) by (pod)`

// BenchmarkQuery is one query at a time: the client's own cost (request
// building, GET rewrite, decoding, metrics) on top of a loopback round trip.
func BenchmarkQuery(b *testing.B) {
	c := benchClient(b, benchServer(b).URL)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.QuerySamples(ctx, benchQuery, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueryParallel is many goroutines asking the same query: with
// coalescing most calls join a request in flight.
func BenchmarkQueryParallel(b *testing.B) {
	c := benchClient(b, benchServer(b).URL)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.QuerySamples(ctx, benchQuery, time.Time{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCoalescingGroup is the flight group alone, without I/O.
func BenchmarkCoalescingGroup(b *testing.B) {
	var g group
	ctx := context.Background()
	fn := func(context.Context) (any, error) { return 1, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.do(ctx, "k", share{}, fn, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCoalescingGroupLanded is a call answered by a landed result (the
// freshness rule), without I/O.
func BenchmarkCoalescingGroupLanded(b *testing.B) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	g := group{clock: clk}
	ctx := context.Background()
	fn := func(context.Context) (any, error) { return 1, nil }
	sh := share{keep: true, arrived: clk.Now()}
	if _, err := g.do(ctx, "k", sh, fn, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.do(ctx, "k", sh, fn, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueryPath is one instant query of n samples from the fake
// Prometheus, through the client's request path and decoding: the
// streaming decoder (Client.QuerySamples) against client_golang's v1 Query
// and toVector (what the client did before), on the same client.
func BenchmarkQueryPath(b *testing.B) {
	for _, n := range []int{100, 5000} {
		body := benchAnswer(n)
		srv := newFakeProm(b, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		})
		c := benchClient(b, srv.URL)
		paths := []struct {
			name  string
			query func(ctx context.Context) (int, error)
		}{
			{name: "client_golang", query: func(ctx context.Context) (int, error) {
				ctx = context.WithValue(ctx, requestStateKey{}, &requestState{timeout: c.timeout})
				val, _, _, err := c.api.Query(ctx, benchQuery, time.Time{})
				if err != nil {
					return 0, err
				}
				vec, err := toVector(val)
				return len(vec), err
			}},
			{name: "streaming", query: func(ctx context.Context) (int, error) {
				smps, err := c.QuerySamples(ctx, benchQuery, time.Time{})
				return len(smps), err
			}},
		}
		for _, p := range paths {
			b.Run(fmt.Sprintf("%s/%d", p.name, n), func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				cpu0 := cputime.Process()
				for b.Loop() {
					if got, err := p.query(ctx); err != nil || got != n {
						b.Fatalf("%d samples, %v", got, err)
					}
				}
				reportCPU(b, cpu0)
			})
		}
	}
}

// reportCPU reports the process CPU time per operation since cpu0 (the
// httptest Prometheus included, when there is one): on a shared machine
// wall time mostly measures waiting for a core.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu := cputime.Process() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
	}
}
