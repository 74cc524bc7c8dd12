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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

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
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: framework.AdapterService, Namespace: framework.AdapterNamespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(port), TargetPort: intstr.FromInt32(int32(port))}},
		},
	}
	svcs := s.env.Client.CoreV1().Services(framework.AdapterNamespace)
	if old, err := svcs.Get(ctx, svc.Name, metav1.GetOptions{}); err == nil {
		svc.ResourceVersion = old.ResourceVersion
		if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating adapter Service: %w", err)
		}
	} else if apierrors.IsNotFound(err) {
		if _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating adapter Service: %w", err)
		}
	} else {
		return fmt.Errorf("reading adapter Service: %w", err)
	}
	gv := framework.CustomMetricsV1Beta2
	name := gv.Version + "." + gv.Group
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"group":                 gv.Group,
			"version":               gv.Version,
			"insecureSkipTLSVerify": true,
			"groupPriorityMinimum":  int64(100),
			"versionPriority":       int64(200),
			"service":               map[string]any{"namespace": framework.AdapterNamespace, "name": framework.AdapterService, "port": int64(port)},
		},
	}}
	if _, err := s.env.Dynamic.Resource(apiServiceGVR).Apply(ctx, name, obj, metav1.ApplyOptions{FieldManager: "promscaler-bench", Force: true}); err != nil {
		return fmt.Errorf("applying APIService %s: %w", name, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := s.env.Dynamic.Resource(apiServiceGVR).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Available" && m["status"] == "True" {
					progress("APIService %s Available, pointing at the serving adapter (port %d)", name, port)
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("APIService %s not Available after 1m (last error %v)", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
