package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/promclient"
)

// arrivalProvider runs the same "now" query twice per metric request with
// the request's context, and records whether that context carries the
// time the request reached the server.
type arrivalProvider struct {
	placeholderProvider
	prom *promclient.Client

	mu      sync.Mutex
	arrived []time.Time
	errs    []error
}

func (p *arrivalProvider) GetMetricByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, sel labels.Selector) (*custom_metrics.MetricValue, error) {
	t, ok := arrivalTime(ctx)
	p.mu.Lock()
	if ok {
		p.arrived = append(p.arrived, t)
	}
	for range 2 {
		if _, err := p.prom.QuerySamples(ctx, "sum(up)", time.Time{}); err != nil {
			p.errs = append(p.errs, err)
		}
	}
	p.mu.Unlock()
	return p.placeholderProvider.GetMetricByName(ctx, name, info, sel)
}

// TestServerPassesArrivalTimeToPrometheusClient: the context reaching the
// providers carries the request's arrival (stampArrival), and the
// Prometheus client built by the server uses it. A query repeated within a
// request takes the answer that landed after the request arrived; the next
// request, sent after that answer landed and past the coalescing window,
// queries again.
func TestServerPassesArrivalTimeToPrometheusClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full API server")
	}
	var served atomic.Int32
	promSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	}))
	defer promSrv.Close()
	p := &arrivalProvider{}
	factory := func(deps ProviderDeps) (*Providers, error) {
		if deps.Backends == nil {
			return nil, fmt.Errorf("no Prometheus client")
		}
		p.prom = deps.Backends.Default()
		return &Providers{Custom: p, External: p}, nil
	}
	ts := startTestServer(t, testRules, factory, promSrv.URL, nil)
	ts.waitReady()

	const path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/pod-a/some_metric"
	start := time.Now()
	for i := range 2 {
		if i > 0 {
			time.Sleep(promclient.DefaultCoalesceWindow + 50*time.Millisecond)
		}
		if code, body := ts.get(path); code != http.StatusNotFound {
			t.Fatalf("GET %s = %d %s; want the provider's 404", path, code, truncateForLog(body))
		}
	}
	end := time.Now()

	p.mu.Lock()
	arrived, errs := p.arrived, p.errs
	p.mu.Unlock()
	if len(errs) != 0 {
		t.Fatalf("queries failed: %v", errs)
	}
	if len(arrived) != 2 {
		t.Fatalf("%d of 2 provider calls had an arrival time in their context", len(arrived))
	}
	for _, a := range arrived {
		if a.Before(start) || a.After(end) {
			t.Errorf("arrival time %v outside the requests' span [%v, %v]", a, start, end)
		}
	}
	if got := served.Load(); got != 2 {
		t.Errorf("Prometheus served %d queries for 2 requests querying twice each, want 2", got)
	}
	ts.stop()
}

// TestStampArrival: the arrival is the time the request's connection last
// read bytes when that is known and earlier than now, else now; the API
// server's received timestamp is the fallback for contexts without it.
func TestStampArrival(t *testing.T) {
	reads := newReadStamps(nil)
	reads.base = reads.base.Add(-10 * time.Second) // the connection read 9 s ago
	known := &stampedConn{l: reads, key: "10.0.0.1:1000"}
	known.lastRead.Store(int64(time.Second))
	reads.conns.Store(known.key, known)
	fresh := &stampedConn{l: reads, key: "10.0.0.2:1000"} // nothing read yet
	reads.conns.Store(fresh.key, fresh)
	future := newReadStamps(nil)
	ahead := &stampedConn{l: future, key: known.key}
	ahead.lastRead.Store(int64(time.Hour))
	future.conns.Store(ahead.key, ahead)

	tests := []struct {
		name   string
		reads  *readStamps
		remote string
		// wantRead: the arrival is the connection's read time; otherwise
		// it is when the handler ran.
		wantRead bool
	}{
		{name: "connection read time", reads: reads, remote: known.key, wantRead: true},
		{name: "connection that read nothing", reads: reads, remote: fresh.key},
		{name: "unknown connection", reads: reads, remote: "10.0.0.3:1000"},
		{name: "read time after now (not possible, but never later than now)", reads: future, remote: known.key},
		{name: "listener not wrapped", remote: known.key},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got time.Time
			var ok bool
			h := stampArrival(tc.reads, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got, ok = arrivalTime(r.Context())
			}))
			req := httptest.NewRequest(http.MethodGet, "/apis/custom.metrics.k8s.io/v1beta2", nil)
			req.RemoteAddr = tc.remote
			before := time.Now()
			h.ServeHTTP(httptest.NewRecorder(), req)
			after := time.Now()
			if !ok {
				t.Fatal("no arrival time in the handler's context")
			}
			if tc.wantRead {
				if want := reads.base.Add(time.Second); !got.Equal(want) {
					t.Errorf("arrival %v, want the connection's read time %v", got, want)
				}
				return
			}
			if got.Before(before) || got.After(after) {
				t.Errorf("arrival %v, want the time the handler ran, in [%v, %v]", got, before, after)
			}
		})
	}

	t.Run("API server timestamp without stampArrival", func(t *testing.T) {
		want := time.Unix(1000, 0)
		got, ok := arrivalTime(request.WithReceivedTimestamp(context.Background(), want))
		if !ok || !got.Equal(want) {
			t.Errorf("arrivalTime = %v, %t; want %v, true", got, ok, want)
		}
	})
}

// TestReadStamps runs a real listener: a connection's stamp is the time of
// its last read that returned bytes, looked up by the remote address the
// HTTP server reports, and goes away with the connection.
func TestReadStamps(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reads := newReadStamps(ln)
	defer reads.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := reads.Accept()
	if err != nil {
		t.Fatal(err)
	}
	remote := client.LocalAddr().String()
	if _, ok := reads.lastRead(remote); ok {
		t.Fatal("a stamp before anything was read")
	}
	sent := time.Now()
	if _, err := client.Write([]byte("GET")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(server, buf); err != nil {
		t.Fatal(err)
	}
	read := time.Now()
	got, ok := reads.lastRead(remote)
	if !ok {
		t.Fatalf("no stamp for %s after a read", remote)
	}
	if got.Before(sent) || got.After(read) {
		t.Errorf("stamp %v outside [%v, %v]", got, sent, read)
	}
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := reads.lastRead(remote); ok {
		t.Error("the stamp outlived its connection")
	}
}
