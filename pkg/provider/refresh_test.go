package provider_test

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/provider"
	"github.com/promscaler/promscaler/pkg/rules"
)

// refreshSetup returns the test mapper, the compiled test rules and the
// index options to build indexes with them.
func refreshSetup(t *testing.T) (meta.RESTMapper, *rules.RuleSet, discovery.IndexOptions) {
	t.Helper()
	mapper := testMapper()
	rs, err := rules.Compile(testConfig(), mapper)
	if err != nil {
		t.Fatal(err)
	}
	return mapper, rs, discovery.IndexOptions{Scoper: discovery.MapperScoper{Mapper: mapper}}
}

// TestRefreshOnMiss: a metric the index lacks asks Config.Refresh once with
// a key naming the lookup, and is looked up again in the index published
// meanwhile; when Refresh declines, the answer is the 404 as before.
func TestRefreshOnMiss(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		discover bool // Refresh publishes the full index and returns true
		wantCode int32
	}{
		{name: "refresh finds the new metric", discover: true},
		{name: "refresh declined", discover: false, wantCode: http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mapper, rs, opts := refreshSetup(t)
			var current atomic.Pointer[discovery.Index]
			current.Store(discovery.EmptyIndex())
			var keys []string
			fp := newFakeProm(t, always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "1", 1764493200})))
			p, err := provider.New(provider.Config{
				Index:    provider.IndexSource(current.Load),
				Rules:    func() *rules.RuleSet { return rs },
				Backends: promclient.Single[promclient.SampleQuerier](fp.client(t, 5*time.Second, metrics.New())),
				Objects:  testObjects(),
				Mapper:   mapper,
				Refresh: func(_ context.Context, key string) bool {
					keys = append(keys, key)
					if tc.discover {
						current.Store(discovery.BuildIndex(testSeries(rs), opts))
					}
					return tc.discover
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "shop", Name: "web-1"},
				fpmInfo, nil)
			checkAPIError(t, err, tc.wantCode, "no rule discovered it")
			if diff := cmp.Diff([]string{"custom pods true fpm_active_rate"}, keys); diff != "" {
				t.Errorf("Refresh keys (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRefreshList: listing every metric (custom or external) calls
// Config.RefreshList with a bounded context and lists the index published
// meanwhile, so a metric that appeared since the last relist is listed
// without a request naming it; before the first discovery nothing waits.
func TestRefreshList(t *testing.T) {
	t.Parallel()
	mapper, rs, opts := refreshSetup(t)
	all := testSeries(rs)
	var current atomic.Pointer[discovery.Index]
	var calls atomic.Int32
	index := func() *discovery.Index { return current.Load() }
	p, err := provider.New(provider.Config{
		Index:    provider.IndexSource(index),
		Rules:    func() *rules.RuleSet { return rs },
		Backends: promclient.Single[promclient.SampleQuerier](newFakeProm(t, always(http.StatusOK, vector())).client(t, 5*time.Second, metrics.New())),
		Objects:  testObjects(),
		Mapper:   mapper,
		RefreshList: func(ctx context.Context) bool {
			calls.Add(1)
			if d, ok := ctx.Deadline(); !ok || time.Until(d) > provider.ListRefreshWait {
				t.Errorf("RefreshList context deadline %v (set: %t), want within %v", d, ok, provider.ListRefreshWait)
			}
			current.Store(discovery.BuildIndex(all, opts)) // the pass finds every series
			return true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ListAllMetrics(); len(got) != 0 || calls.Load() != 0 {
		t.Errorf("before the first discovery: listed %v, RefreshList called %d times; want nothing, no call", got, calls.Load())
	}
	// The last relist saw only node_load1 and cloud_sqs_messages.
	current.Store(discovery.BuildIndex([]discovery.RuleSeries{all[1], all[6]}, opts))
	custom := p.ListAllMetrics()
	if !slices.Contains(custom, fpmInfo) {
		t.Errorf("ListAllMetrics after the refresh = %v, want fpm_active_rate for pods listed", custom)
	}
	current.Store(discovery.BuildIndex([]discovery.RuleSeries{all[1], all[6]}, opts))
	external := p.ListAllExternalMetrics()
	if !slices.Contains(external, cmprovider.ExternalMetricInfo{Metric: "rabbitmq_queue_length"}) {
		t.Errorf("ListAllExternalMetrics after the refresh = %v, want rabbitmq_queue_length listed", external)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("RefreshList called %d times, want once per listing (2)", got)
	}
}
