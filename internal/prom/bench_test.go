package prom

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/promscaler/promscaler/internal/metrics"
)

// benchServer answers every query with a two-sample vector.
func benchServer(b *testing.B) *httptest.Server {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[`+
			`{"metric":{"namespace":"default","pod":"a"},"value":[1700000000,"0.5"]},`+
			`{"metric":{"namespace":"default","pod":"b"},"value":[1700000000,"1.5"]}]}}`)
	}))
	b.Cleanup(srv.Close)
	return srv
}

const benchQuery = `sum(rate(http_requests_total{namespace="default",pod=~"a|b"}[2m])) by (pod)`

// BenchmarkQuery is one query at a time: the client's own cost (request
// building, GET rewrite, decoding, metrics) on top of a loopback round trip.
func BenchmarkQuery(b *testing.B) {
	srv := benchServer(b)
	c, err := New(Config{Address: srv.URL, HTTPClient: &http.Client{Transport: newTransport(nil)}, Metrics: metrics.New()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Query(ctx, benchQuery, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueryParallel is many goroutines asking the same query: with
// coalescing most calls join a request in flight.
func BenchmarkQueryParallel(b *testing.B) {
	srv := benchServer(b)
	c, err := New(Config{Address: srv.URL, HTTPClient: &http.Client{Transport: newTransport(nil)}, Metrics: metrics.New()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Query(ctx, benchQuery, time.Time{}); err != nil {
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
		if _, err := g.do(ctx, "k", fn, nil); err != nil {
			b.Fatal(err)
		}
	}
}
