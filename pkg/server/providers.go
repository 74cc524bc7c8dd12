package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/objectcache"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/provider"
	"github.com/promscaler/promscaler/pkg/resourcemetrics"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/pkg/teamrules"
)

// DefaultProviders is the providers factory the server uses: discovery
// (pkg/discovery) relisting Prometheus into an index, and the custom and
// external metrics provider (pkg/provider) serving requests from that index,
// objects from the object cache (pkg/objectcache), and values from the
// coalescing Prometheus clients; when the rules files have resourceRules at
// startup, metrics.k8s.io (pkg/resourcemetrics) from the same clients,
// rules and cache; and, when asked, the team rules ConfigMaps.
func DefaultProviders(c *Config, deps ProviderDeps) (*Providers, error) {
	mapper, err := c.Kube.RESTMapper()
	if err != nil {
		return nil, fmt.Errorf("building the RESTMapper: %w", err)
	}
	disc, err := newDiscovery(c.Discovery, deps, mapper)
	if err != nil {
		return nil, err
	}
	restConfig, err := c.Kube.ClientConfig()
	if err != nil {
		return nil, err
	}
	objects, err := newObjectCache(restConfig)
	if err != nil {
		return nil, err
	}
	p, err := newCustomProvider(c.Shared, deps, disc, objects, mapper)
	if err != nil {
		return nil, err
	}
	resources, err := newResourceMetrics(deps, disc, objects)
	if err != nil {
		return nil, err
	}
	rulesIn := teamrules.NewCombiner(deps.Rules, disc.SetRules)
	team, err := teamRules(c.TeamRules, deps, restConfig, mapper, rulesIn)
	if err != nil {
		return nil, err
	}
	if team != nil {
		// A team rule producing too many metrics: an event on its ConfigMap.
		disc.SetOnRefused(func(refused []discovery.RefusedRule) {
			for _, r := range refused {
				team.RuleRefused(r.Rule.File(), r)
			}
		})
	}
	readiness := disc.Checker()
	ours := ourMetrics{disc: disc, mapper: mapper}
	providers := &Providers{
		Custom:     p,
		External:   p,
		Ours:       ours,
		OurMetrics: ours.list,
		Ready:      func() error { return readiness.Check(nil) },
		Run: func(ctx context.Context) {
			var wg sync.WaitGroup
			wg.Go(func() { objects.Run(ctx) })
			wg.Go(func() { disc.Run(ctx) })
			if team != nil {
				wg.Go(func() { team.Run(ctx) })
			}
			wg.Wait()
		},
		ApplyConfig: func(rs *rules.RuleSet) error {
			if err := rulesIn.SetBase(rs); err != nil {
				return err
			}
			if rs.ResourceRules() != nil && resources == nil {
				klog.InfoS("The new configuration has resourceRules, but metrics.k8s.io is installed only when the startup configuration has them: restart the adapter to serve it")
			}
			return nil
		},
	}
	if resources != nil {
		providers.InstallResourceMetrics = resources.Install
	}
	return providers, nil
}

// newDiscovery builds discovery from opts (Config.Discovery: the flags'
// interval, max age and strategy), with the backends' clients at
// discovery's own timeout (discoveryTimeout).
func newDiscovery(opts discovery.Options, deps ProviderDeps, mapper meta.RESTMapper) (*discovery.Discoverer, error) {
	opts.Backends = promclient.LookupAs[discovery.Prometheus](deps.Backends.WithTimeout(func(own time.Duration) time.Duration {
		return discoveryTimeout(own, opts.Interval)
	}))
	opts.Rules = deps.Rules
	opts.Scoper = discovery.MapperScoper{Mapper: mapper}
	opts.Metrics = deps.Metrics
	return discovery.New(opts)
}

// newObjectCache builds the object cache both metrics paths read:
// metadata informers, and pods watched whole (their phase is not in their
// metadata) in protobuf, the API server's cheapest encoding.
func newObjectCache(restConfig *rest.Config) (*objectcache.Cache, error) {
	mdClient, err := metadata.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building the metadata client: %w", err)
	}
	podConfig := rest.CopyConfig(restConfig)
	podConfig.ContentType = runtime.ContentTypeProtobuf
	podClient, err := kubernetes.NewForConfig(podConfig)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return objectcache.New(mdClient, podClient, objectcache.Options{})
}

// newCustomProvider builds the custom and external metrics provider over
// discovery's index and rules, with shared evaluation as Config.Shared says.
func newCustomProvider(shared provider.SharedConfig, deps ProviderDeps, disc *discovery.Discoverer, objects *objectcache.Cache, mapper meta.RESTMapper) (*provider.Provider, error) {
	return provider.New(provider.Config{
		// Before the first complete discovery the provider answers 503
		// rather than "not found" from an empty index.
		Index: provider.IndexSource(func() *discovery.Index {
			if !disc.Ready() {
				return nil
			}
			return disc.Index()
		}),
		Rules:       disc.Rules,
		Backends:    promclient.LookupAs[promclient.SampleQuerier](deps.Backends),
		Pending:     disc.Pending,
		Objects:     objects,
		Mapper:      mapper,
		Refresh:     disc.Refresh,
		RefreshList: disc.RefreshList,
		Shared:      shared,
	})
}

// newResourceMetrics builds metrics.k8s.io when the startup rules have
// resourceRules, as prometheus-adapter does (nil otherwise): a reload
// adding them later needs a restart to install the group; reloads of
// existing resourceRules take effect at once.
func newResourceMetrics(deps ProviderDeps, disc *discovery.Discoverer, objects *objectcache.Cache) (*resourcemetrics.API, error) {
	if deps.Rules.ResourceRules() == nil {
		return nil, nil
	}
	// One object cache: metrics.k8s.io reads pods and nodes from the
	// custom metrics path's, warmed now so that its first request does not
	// wait for the lists.
	objects.Warm(corev1.SchemeGroupVersion.WithResource("pods"))
	objects.Warm(corev1.SchemeGroupVersion.WithResource("nodes"))
	return resourcemetrics.NewAdapter(resourcemetrics.AdapterConfig{
		Objects: objects,
		SourceConfig: resourcemetrics.SourceConfig{
			Rules:    disc.Rules,
			Backends: promclient.LookupAs[promclient.SampleQuerier](deps.Backends),
		},
	})
}

// teamRules builds the team rules watcher when opts (Config.TeamRules) ask
// for it, else returns nil.
func teamRules(opts *teamrules.Options, deps ProviderDeps, restConfig *rest.Config, mapper meta.RESTMapper, sink teamrules.Sink) (*teamrules.Watcher, error) {
	if opts == nil {
		return nil, nil
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client for team rules: %w", err)
	}
	return teamrules.New(teamrules.Config{Options: *opts, Client: client, Mapper: mapper,
		Backends: deps.Backends.Names(), Sink: sink, Metrics: deps.Metrics})
}

// discoveryTimeout is the per-call timeout of discovery requests, which
// read much more than metric queries: the relist interval (a pass should
// not outlast it), capped at 5 minutes, and never below the query timeout.
func discoveryTimeout(queryTimeout, relist time.Duration) time.Duration {
	return max(queryTimeout, min(relist, 5*time.Minute))
}
