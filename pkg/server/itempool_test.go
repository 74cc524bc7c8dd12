package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/itempool"
)

// poolingProvider answers pods/* with n items named after the namespace,
// their slice taken from the request's item pool, and records whether the
// slices came from a pool (a class's capacity, not n).
type poolingProvider struct {
	placeholderProvider
	n      int
	pooled atomic.Int32
	plain  atomic.Int32
}

func (p *poolingProvider) GetMetricBySelector(ctx context.Context, namespace string, _ labels.Selector, info cmprovider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValueList, error) {
	items := itempool.MetricValues(ctx, p.n)
	if cap(items) > p.n {
		p.pooled.Add(1)
	} else {
		p.plain.Add(1)
	}
	for i := range items {
		items[i] = custom_metrics.MetricValue{
			DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", APIVersion: "/v1", Namespace: namespace, Name: fmt.Sprintf("%s-%d", namespace, i)},
			Metric:          custom_metrics.MetricIdentifier{Name: info.Metric},
			Timestamp:       metav1.NewTime(time.Unix(1700000000, 0)),
			Value:           *resource.NewQuantity(int64(i), resource.DecimalSI),
		}
	}
	// Hold the items a moment, as a Prometheus query would, then check
	// nobody else wrote them meanwhile.
	time.Sleep(time.Millisecond)
	for i := range items {
		if items[i].DescribedObject.Namespace != namespace {
			return nil, fmt.Errorf("item %d of %s was overwritten by a request for %s", i, namespace, items[i].DescribedObject.Namespace)
		}
	}
	return &custom_metrics.MetricValueList{Items: items}, nil
}

// TestServerReusesItemSlicesSafely: through the real handler chain, list
// answers take their item slices from the request's pool, and concurrent
// requests over different namespaces each get exactly their own items: a
// slice released before its answer was written, or handed to two requests,
// would show another namespace's names.
func TestServerReusesItemSlicesSafely(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full API server")
	}
	pp := &poolingProvider{n: 100}
	ts := startReadyServer(t, pp, pp)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for r := range 25 {
				ns := fmt.Sprintf("ns-%d-%d", g, r%3)
				code, body := ts.get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/some_metric")
				if code != http.StatusOK {
					t.Errorf("GET pods/* in %s = %d %s", ns, code, truncateForLog(body))
					return
				}
				var list struct {
					Items []struct {
						DescribedObject struct{ Namespace, Name string } `json:"describedObject"`
						Value           string                           `json:"value"`
					} `json:"items"`
				}
				if err := json.Unmarshal([]byte(body), &list); err != nil {
					t.Errorf("decoding the answer: %v", err)
					return
				}
				if len(list.Items) != pp.n {
					t.Errorf("%s: %d items, want %d", ns, len(list.Items), pp.n)
					return
				}
				for i, it := range list.Items {
					if want := fmt.Sprintf("%s-%d", ns, i); it.DescribedObject.Namespace != ns || it.DescribedObject.Name != want || it.Value != fmt.Sprint(i) {
						t.Errorf("%s item %d = %+v, want %s/%s value %d", ns, i, it, ns, want, i)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if pp.pooled.Load() == 0 || pp.plain.Load() != 0 {
		t.Errorf("item slices: %d from the request's pool, %d plain; want every one pooled (the server wraps the API handler in a scope)", pp.pooled.Load(), pp.plain.Load())
	}
	ts.stop()
}
