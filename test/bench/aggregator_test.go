//go:build e2e && bench

package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// BenchmarkAggregated sends the pods/* request over a 100-pod namespace one
// at a time for the run's duration straight to the adapter, then through
// kube-apiserver's aggregator (as the HPA does), and reports both latencies
// and the difference: what the hop through kube-apiserver adds. The
// serving adapter is registered as custom.metrics.k8s.io/v1beta2 for this
// benchmark only.
func BenchmarkAggregated(b *testing.B) {
	s := setup(b)
	a := s.serving(b)
	ctx := context.Background()
	if err := s.registerAggregated(ctx, a); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := s.env.UnregisterAdapter(ctx, &framework.Adapter{GroupVersions: []schema.GroupVersion{framework.CustomMetricsV1Beta2}}); err != nil {
			b.Error(err)
		}
	}()
	tr, err := adminTransport(s.env.PKI.Admin)
	if err != nil {
		b.Fatal(err)
	}
	apiserver := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	defer apiserver.CloseIdleConnections()
	ns := servingNamespace(0)
	direct := podsStarURL(a.url, ns)
	aggregated := podsStarURL(s.env.RESTConfig.Host, ns)
	// Available, and answering with every pod.
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := items(ctx, apiserver, aggregated)
		if err == nil && n == s.cfg.servePods {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("pods/* through the aggregator: %d items (err %v), want %d", n, err, s.cfg.servePods)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.Run(fmt.Sprintf("pods-star-%d/sequential", s.cfg.servePods), func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			md := s.measure(b, a, `namespace="`+ns+`"`, func() result {
				return closedLoop(ctx, s.admin, 1, s.cfg.duration, func(int) string { return direct })
			})
			md.log("pods/* straight to the adapter, sequential")
			mg := s.measure(b, a, `namespace="`+ns+`"`, func() result {
				return closedLoop(ctx, apiserver, 1, s.cfg.duration, func(int) string { return aggregated })
			})
			mg.log("pods/* through kube-apiserver's aggregator, sequential")
			rd, rg := md.res, mg.res
			progress("aggregator hop: direct p50 %.2f p99 %.2f ms, through kube-apiserver p50 %.2f p99 %.2f ms: +%.2f ms p50, +%.2f ms p99",
				rd.percentile(0.5), rd.percentile(0.99), rg.percentile(0.5), rg.percentile(0.99),
				rg.percentile(0.5)-rd.percentile(0.5), rg.percentile(0.99)-rd.percentile(0.99))
			b.ReportMetric(rd.percentile(0.5), "direct-p50-ms")
			b.ReportMetric(rd.percentile(0.99), "direct-p99-ms")
			b.ReportMetric(rg.percentile(0.5), "p50-ms")
			b.ReportMetric(rg.percentile(0.99), "p99-ms")
			b.ReportMetric(rg.percentile(0.5)-rd.percentile(0.5), "hop-p50-ms")
			b.ReportMetric(rg.percentile(0.99)-rd.percentile(0.99), "hop-p99-ms")
			b.ReportMetric(rg.perSecond(), "req/s")
			b.ReportMetric(rd.perSecond(), "direct-req/s")
			b.ReportMetric(float64(rd.errors+rg.errors), "errors")
		}
	})
}

// registerAggregated points custom.metrics.k8s.io/v1beta2 at the adapter
// (an ExternalName Service to localhost, as test/e2e/framework does) and
// waits until the APIService is Available.
func (s *stack) registerAggregated(ctx context.Context, a *adapterProc) error {
	u, err := url.Parse(a.url)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("adapter port in %s: %w", a.url, err)
	}
	gv := framework.CustomMetricsV1Beta2
	if err := s.env.RegisterAPIServices(ctx, port, []schema.GroupVersion{gv}); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ok, err := s.env.APIServiceAvailable(ctx, gv)
		if ok {
			progress("APIService %s.%s Available, pointing at the serving adapter (port %d)", gv.Version, gv.Group, port)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("APIService %s.%s not Available after 1m (last error %v)", gv.Version, gv.Group, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
