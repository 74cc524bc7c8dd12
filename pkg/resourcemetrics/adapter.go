package resourcemetrics

import (
	"errors"
	"fmt"
)

// AdapterConfig is what an adapter server needs to serve metrics.k8s.io:
// the object cache and the Source's configuration (Rules and Backends are
// required).
type AdapterConfig struct {
	// Objects is the adapter's object cache (a *objectcache.Cache),
	// shared with the custom metrics path and run by its owner: the pods
	// and nodes reported are read there.
	Objects Objects
	// SourceConfig configures the queries; its Rules are read on every
	// request, so hot reloads take effect at once.
	SourceConfig
}

// NewAdapter builds the API over the object cache and a Source: what the
// adapter server installs (Install, before it runs).
func NewAdapter(cfg AdapterConfig) (*API, error) {
	if cfg.Objects == nil {
		return nil, errors.New("resource metrics: Objects (the object cache) is required")
	}
	src, err := NewSource(cfg.SourceConfig)
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
