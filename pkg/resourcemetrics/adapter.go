package resourcemetrics

import (
	"errors"
	"fmt"

	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
)

// AdapterConfig is what an adapter server needs to serve metrics.k8s.io.
// Objects, Rules and Querier are required.
type AdapterConfig struct {
	// Objects is the adapter's object cache (a *provider.ObjectCache),
	// shared with the custom metrics path and run by its owner: the pods
	// and nodes reported are read there.
	Objects Objects
	// Rules returns the compiled configuration in service; it is read on
	// every request, so hot reloads take effect at once.
	Rules func() *rules.RuleSet
	// Querier is the shared Prometheus client.
	Querier promclient.SampleQuerier
	// Clock; nil means the real clock.
	Clock clock.PassiveClock
	// Source tuning; zero values mean the defaults.
	MaxNamesInQuery int
	Parallelism     int
}

// NewAdapter builds the API over the object cache and a Source: what the
// adapter server installs (Install, before it runs).
func NewAdapter(cfg AdapterConfig) (*API, error) {
	if cfg.Objects == nil {
		return nil, errors.New("resource metrics: Objects (the object cache) is required")
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
	objs := objectLister{objects: cfg.Objects}
	api, err := New(Config{Pods: objs, Nodes: objs, PodMetrics: src, NodeMetrics: src})
	if err != nil {
		return nil, fmt.Errorf("resource metrics: %w", err)
	}
	return api, nil
}
