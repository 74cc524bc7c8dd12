package resourcemetrics

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/pkg/naming"
	"github.com/promscaler/promscaler/pkg/promclient"
)

// AdapterConfig is what an adapter server needs to serve metrics.k8s.io.
// Metadata, Rules and Querier are required.
type AdapterConfig struct {
	// Metadata is the metadata client of the cluster (list and watch of
	// pods and nodes), e.g. metadata.NewForConfig(base.ClientConfig()).
	Metadata metadata.Interface
	// Pods is the pod metadata cache shared with the custom metrics path
	// (a *provider.ObjectCache), run by its owner.
	Pods PodMetadata
	// Rules returns the compiled configuration in service; it is read on
	// every request, so hot reloads take effect at once.
	Rules func() *naming.RuleSet
	// Querier is the shared Prometheus client.
	Querier promclient.SampleQuerier
	// Clock; nil means the real clock.
	Clock clock.PassiveClock
	// Cache and Source tuning; zero values mean the defaults.
	CacheOptions    CacheOptions
	MaxNamesInQuery int
	Parallelism     int
}

// Adapter is the metrics.k8s.io API wired to a Cache and a Source: what
// the adapter server installs (Install, before it runs) and runs (Run).
type Adapter struct {
	*API
	// Cache says which pods are Running and holds the nodes.
	Cache *Cache
	// Source queries Prometheus.
	Source *Source
}

// NewAdapter builds the API, its cache and its source.
func NewAdapter(cfg AdapterConfig) (*Adapter, error) {
	if cfg.Metadata == nil {
		return nil, errors.New("resource metrics: Metadata client is required")
	}
	cache, err := NewCache(cfg.Metadata, cfg.Pods, cfg.CacheOptions)
	if err != nil {
		return nil, err
	}
	src, err := NewSource(SourceConfig{
		Rules:           cfg.Rules,
		Querier:         cfg.Querier,
		Clock:           cfg.Clock,
		MaxNamesInQuery: cfg.MaxNamesInQuery,
		Parallelism:     cfg.Parallelism,
	})
	if err != nil {
		return nil, err
	}
	api, err := New(Config{Pods: cache, Nodes: cache, PodMetrics: src, NodeMetrics: src})
	if err != nil {
		return nil, fmt.Errorf("resource metrics: %w", err)
	}
	return &Adapter{API: api, Cache: cache, Source: src}, nil
}

// Run runs the cache until ctx ends (the shared pod metadata cache is run
// by its owner).
func (a *Adapter) Run(ctx context.Context) { a.Cache.Run(ctx) }

// Ready returns nil once the pod and node caches hold their initial lists,
// an error saying what is missing before; suitable for a /readyz check.
func (a *Adapter) Ready() error {
	var missing []string
	if !a.Cache.runningPods.HasSynced() || !a.Cache.meta.PodsSynced() {
		missing = append(missing, "pods")
	}
	if !a.Cache.nodes.HasSynced() {
		missing = append(missing, "nodes")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %v", ErrCacheNotSynced, missing)
	}
	return nil
}
