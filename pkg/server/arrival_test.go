package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/test/promtest"
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
// providers carries the request's arrival (instrumentRequests), and the
// Prometheus client built by the server uses it. A query repeated within a
// request takes the answer that landed after the request arrived; the next
// request, sent after that answer landed and past the coalescing window,
// queries again.
func TestServerPassesArrivalTimeToPrometheusClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full API server")
	}
	promSrv := promtest.New(nil)
	defer promSrv.Close()
	promSrv.HandleQuery(func(string) (int, string) {
		return http.StatusOK, `{"status":"success","data":{"resultType":"vector","result":[]}}`
	})
	p := &arrivalProvider{}
	factory := func(_ *Config, deps ProviderDeps) (*Providers, error) {
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
	if got := len(promSrv.Requests()); got != 2 {
		t.Errorf("Prometheus served %d queries for 2 requests querying twice each, want 2", got)
	}
	ts.stop()
}

// TestArrivalTime: the arrival is when the request entered the handler
// chain (instrumentRequests); the API server's received timestamp is the
// fallback for contexts without it.
func TestArrivalTime(t *testing.T) {
	var got time.Time
	var ok bool
	h := instrumentRequests(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got, ok = arrivalTime(r.Context())
	}), metrics.New(), nil)
	before := time.Now()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/apis/custom.metrics.k8s.io/v1beta2", nil))
	after := time.Now()
	if !ok {
		t.Fatal("no arrival time in the handler's context")
	}
	if got.Before(before) || got.After(after) {
		t.Errorf("arrival %v, want the time the request entered the chain, in [%v, %v]", got, before, after)
	}

	want := time.Unix(1000, 0)
	got, ok = arrivalTime(request.WithReceivedTimestamp(context.Background(), want))
	if !ok || !got.Equal(want) {
		t.Errorf("arrivalTime without instrumentRequests = %v, %t; want the API server's %v, true", got, ok, want)
	}
}
