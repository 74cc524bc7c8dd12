package provider_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/naming"
	"github.com/promscaler/promscaler/pkg/provider"
)

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
			mapper := testMapper()
			rs, err := naming.Compile(testConfig(), mapper)
			if err != nil {
				t.Fatal(err)
			}
			opts := discovery.IndexOptions{Scoper: discovery.MapperScoper{Mapper: mapper}}
			var current atomic.Pointer[discovery.Index]
			current.Store(discovery.EmptyIndex())
			var keys []string
			fp := newFakeProm(t, always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "1", 1764493200})))
			p, err := provider.New(provider.Config{
				Index:   provider.IndexSource(current.Load),
				Rules:   func() *naming.RuleSet { return rs },
				Querier: fp.client(t, 5*time.Second, metrics.New()),
				Objects: testObjects(),
				Mapper:  mapper,
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
				cmprovider.CustomMetricInfo{GroupResource: podsGR, Namespaced: true, Metric: "fpm_active_rate"}, nil)
			checkAPIError(t, err, tc.wantCode, "no rule discovered it")
			if diff := cmp.Diff([]string{"custom pods true fpm_active_rate"}, keys); diff != "" {
				t.Errorf("Refresh keys (-want +got):\n%s", diff)
			}
		})
	}
}
