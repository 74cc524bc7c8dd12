package provider_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/apistatus"
	"github.com/promscaler/promscaler/pkg/provider/fake"
)

// podName is a realistic Deployment pod name.
func podName(i int) string { return fmt.Sprintf("worker-7d9f8b6c5d-%05d", i) }

// bigNamespace returns objects with n pods labelled app=worker (plus ten
// others) in namespace "big", and an answer with a sample for each of
// them: pod i has value i/4.
func bigNamespace(n int) (*fake.Objects, func(string) (int, string)) {
	objs := testObjects()
	var samples []sample
	for i := range n {
		objs.Add(podsGR, fake.Object{Namespace: "big", Name: podName(i), Labels: map[string]string{"app": "worker"}})
		samples = append(samples, sample{map[string]string{"pod_name": podName(i)}, fmt.Sprint(float64(i) / 4), 1764493200})
	}
	for i := range 10 {
		name := fmt.Sprintf("other-%d", i)
		objs.Add(podsGR, fake.Object{Namespace: "big", Name: name, Labels: map[string]string{"app": "other"}})
		samples = append(samples, sample{map[string]string{"pod_name": name}, "1", 1764493200})
	}
	return objs, always(http.StatusOK, vector(samples...))
}

func TestQueryLengthDoesNotGrowWithObjects(t *testing.T) {
	for _, n := range []int{1, 20, 21, 100, 5000} {
		t.Run(fmt.Sprintf("%d pods", n), func(t *testing.T) {
			objs, answer := bigNamespace(n)
			e := newEnv(t, envOptions{answer: answer, objects: objs, fpmNamespaces: []string{"big"}})
			got, err := e.prov.GetMetricBySelector(context.Background(), "big", mustSelector(t, "app=worker"),
				fpmInfo, labels.Everything())
			if err != nil {
				t.Fatalf("GetMetricBySelector: %v", err)
			}
			sent := e.prom.sent()
			if len(sent) != 1 {
				t.Fatalf("sent %d queries, want 1", len(sent))
			}
			q := sent[0]
			if n > 20 {
				if want := fpmQuery(`namespace="big"`, "pod_name"); q != want {
					t.Errorf("query = %s\nwant %s", q, want)
				}
			} else if !strings.Contains(q, podName(n-1)) {
				t.Errorf("query for %d names has no name matcher: %s", n, q)
			}
			if len(q) > 4096 {
				t.Errorf("query is %d bytes, want at most 4 KiB", len(q))
			}
			if len(got.Items) != n {
				t.Fatalf("got %d items, want %d (other pods filtered out)", len(got.Items), n)
			}
			for _, it := range got.Items {
				var i int
				if _, err := fmt.Sscanf(it.DescribedObject.Name, "worker-7d9f8b6c5d-%05d", &i); err != nil {
					t.Fatalf("unexpected object %q", it.DescribedObject.Name)
				}
				if want := float64(i) / 4; it.Value.AsApproximateFloat64() != want {
					t.Errorf("%s = %s, want %v", it.DescribedObject.Name, it.Value.String(), want)
				}
			}
		})
	}
}

func TestConcurrentIdenticalRequestsSendOneQuery(t *testing.T) {
	const n = 1000
	e := newEnv(t, envOptions{answer: always(http.StatusOK, vector(
		sample{map[string]string{"pod_name": "web-1"}, "0.5", 1764493200},
		sample{map[string]string{"pod_name": "web-2"}, "0.25", 1764493200},
	))})
	arrived, release := e.prom.hold(n)
	defer release()

	results := make([]*custom_metrics.MetricValueList, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.prov.GetMetricBySelector(context.Background(), "shop", mustSelector(t, "app=web"),
				fpmInfo, labels.Everything())
		}()
	}
	<-arrived
	// Hold Prometheus' answer until every other request joined the one
	// in flight (a deadline only to fail instead of hanging).
	coalesced := e.metrics.CoalescedQueries.WithLabelValues(metrics.DefaultBackend, metrics.EndpointQuery)
	deadline := time.Now().Add(60 * time.Second)
	for testutil.ToFloat64(coalesced) < n-1 {
		if time.Now().After(deadline) {
			t.Fatalf("only %v of %d requests joined the query in flight", testutil.ToFloat64(coalesced), n-1)
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	wg.Wait()

	if sent := e.prom.sent(); len(sent) != 1 {
		t.Errorf("Prometheus received %d queries, want 1", len(sent))
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if diff := cmp.Diff(results[0], results[i], cmpOpts); diff != "" {
			t.Fatalf("request %d answered differently (-first +this):\n%s", i, diff)
		}
	}
	if len(results[0].Items) != 2 {
		t.Errorf("got %d items, want 2", len(results[0].Items))
	}
}

func TestHangingPrometheusFailsWithinTimeout(t *testing.T) {
	e := newEnv(t, envOptions{timeout: 100 * time.Millisecond})
	_, release := e.prom.hold(10)
	defer release()
	_, err := e.prov.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "shop", Name: "web-1"},
		fpmInfo, labels.Everything())
	checkAPIError(t, err, http.StatusServiceUnavailable, "Prometheus did not answer (timeout; request id ")
}

func TestCanceledRequestIsNotAValue(t *testing.T) {
	e := newEnv(t, envOptions{})
	arrived, release := e.prom.hold(1)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := e.prov.GetMetricByName(ctx, types.NamespacedName{Namespace: "shop", Name: "web-1"},
		cmprovider.CustomMetricInfo{GroupResource: podsGR, Namespaced: true, Metric: "jobs_waiting"}, labels.Everything())
	// jobs_waiting has a defaultValue: a canceled query must still not
	// answer it. Nobody reads the answer: the 499 keeps such requests
	// apart from server errors in the request metrics.
	checkAPIError(t, err, apistatus.StatusClientClosedRequest, "the client closed the request")
}

func TestLongNamesSwitchToAllObjects(t *testing.T) {
	// Five pods with 253-character names: few enough for a name matcher,
	// but the seed rule repeats the matchers and would render ~2.8 KB;
	// with a 2 KiB budget the query selects every object instead.
	objs := testObjects()
	var samples []sample
	for i := range 5 {
		name := fmt.Sprintf("%s-%d", strings.Repeat("a", 251), i)
		objs.Add(podsGR, fake.Object{Namespace: "big", Name: name, Labels: map[string]string{"app": "long"}})
		samples = append(samples, sample{map[string]string{"pod_name": name}, "2", 1764493200})
	}
	for _, tc := range []struct {
		name     string
		maxBytes int
		want     string
	}{
		{"within the budget", 0, `pod_name=~"aaa`},
		{"over the budget", 2048, `pm_status{namespace="big",state=`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{answer: always(http.StatusOK, vector(samples...)), objects: objs,
				fpmNamespaces: []string{"big"}, maxBytes: tc.maxBytes})
			got, err := e.prov.GetMetricBySelector(context.Background(), "big", mustSelector(t, "app=long"),
				fpmInfo, labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Items) != 5 {
				t.Errorf("got %d items, want 5", len(got.Items))
			}
			sent := e.prom.sent()
			if len(sent) != 1 || !strings.Contains(sent[0], tc.want) {
				t.Errorf("queries = %q, want one containing %q", sent, tc.want)
			}
			if tc.maxBytes > 0 && len(sent[0]) > tc.maxBytes {
				t.Errorf("query is %d bytes, over the %d budget", len(sent[0]), tc.maxBytes)
			}
		})
	}
}
