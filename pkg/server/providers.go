package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/apistatus"
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
// objects from metadata informers, and values from the coalescing
// Prometheus client; and, when the rules file has resourceRules at startup,
// metrics.k8s.io (pkg/resourcemetrics) from the same client and rules.
func DefaultProviders(deps ProviderDeps) (*Providers, error) {
	mapper, err := deps.Kube.RESTMapper()
	if err != nil {
		return nil, fmt.Errorf("building the RESTMapper: %w", err)
	}
	ruleList := deps.Rules
	opts := deps.Discovery
	opts.Backends = promclient.LookupAs[discovery.Prometheus](deps.Backends.WithTimeout(func(own time.Duration) time.Duration {
		return discoveryTimeout(own, opts.Interval)
	}))
	opts.Rules = ruleList
	opts.Scoper = discovery.MapperScoper{Mapper: mapper}
	opts.Metrics = deps.Metrics
	disc, err := discovery.New(opts)
	if err != nil {
		return nil, err
	}
	restConfig, err := deps.Kube.ClientConfig()
	if err != nil {
		return nil, err
	}
	mdClient, err := metadata.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building the metadata client: %w", err)
	}
	// Pods are watched whole (their phase is not in their metadata):
	// protobuf, the API server's cheapest encoding, for them.
	podConfig := rest.CopyConfig(restConfig)
	podConfig.ContentType = runtime.ContentTypeProtobuf
	podClient, err := kubernetes.NewForConfig(podConfig)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	objects, err := objectcache.New(mdClient, podClient, objectcache.Options{})
	if err != nil {
		return nil, err
	}
	p, err := provider.New(provider.Config{
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
	})
	if err != nil {
		return nil, err
	}
	// metrics.k8s.io is installed when the startup rules have
	// resourceRules, as prometheus-adapter does; a reload adding them later
	// needs a restart to install the group (reloads of existing
	// resourceRules take effect at once).
	var resources *resourcemetrics.API
	if ruleList.ResourceRules() != nil {
		// One object cache: metrics.k8s.io reads pods and nodes from the
		// custom metrics path's, warmed now so that its first request does
		// not wait for the lists.
		objects.Warm(corev1.SchemeGroupVersion.WithResource("pods"))
		objects.Warm(corev1.SchemeGroupVersion.WithResource("nodes"))
		resources, err = resourcemetrics.NewAdapter(resourcemetrics.AdapterConfig{
			Objects: objects,
			SourceConfig: resourcemetrics.SourceConfig{
				Rules:    disc.Rules,
				Backends: promclient.LookupAs[promclient.SampleQuerier](deps.Backends),
			},
		})
		if err != nil {
			return nil, err
		}
	}
	rulesIn := teamrules.NewCombiner(ruleList, disc.SetRules)
	team, err := teamRules(deps, restConfig, mapper, rulesIn)
	if err != nil {
		return nil, err
	}
	readiness := disc.Checker()
	providers := &Providers{
		Custom:   p,
		External: p,
		Ready:    func() error { return readiness.Check(nil) },
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

// teamRules builds the team rules watcher when deps ask for it, else
// returns nil.
func teamRules(deps ProviderDeps, restConfig *rest.Config, mapper meta.RESTMapper, sink teamrules.Sink) (*teamrules.Watcher, error) {
	if deps.TeamRules == nil {
		return nil, nil
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client for team rules: %w", err)
	}
	return teamrules.New(teamrules.Config{Options: *deps.TeamRules, Client: client, Mapper: mapper,
		Backends: deps.Backends.Names(), Sink: sink, Metrics: deps.Metrics})
}

// discoveryTimeout is the per-call timeout of discovery requests, which
// read much more than metric queries: the relist interval (a pass should
// not outlast it), capped at 5 minutes, and never below the query timeout.
func discoveryTimeout(queryTimeout, relist time.Duration) time.Duration {
	return max(queryTimeout, min(relist, 5*time.Minute))
}

// clientContextKey carries the request's original context (cancelled when
// the client hangs up) past the API server's handler chain.
type clientContextKey struct{}

// detachClientCancel hands the API server's handler chain a context that a
// client hanging up does not cancel (its own request timeout still
// applies): otherwise the chain's timeout filter treats the hang-up as a
// timeout, aborts the handler and logs two errors per request
// (prometheus-adapter#292). The providers still stop at once: withClient
// restores the client's cancellation for them.
func detachClientCancel(r *http.Request) *http.Request {
	orig := r.Context()
	return r.WithContext(context.WithValue(context.WithoutCancel(orig), clientContextKey{}, orig))
}

// withClient returns ctx, also cancelled (with cause apistatus.ErrClientGone) when the
// request's client hangs up.
func withClient(ctx context.Context) (context.Context, context.CancelFunc) {
	client, ok := ctx.Value(clientContextKey{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(client, func() { cancel(apistatus.ErrClientGone) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// quietly runs a provider call with withClient's context, and turns the
// error of a request whose client went away, or that ran out of time, into
// a typed API status: a plain error would be logged by the API server as an
// internal error, and a client hanging up is not one (apistatus.FromError:
// 499, or 504 for the deadline). Other errors pass through unchanged.
func quietly[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := withClient(ctx)
	defer cancel()
	v, err := call(ctx)
	if err != nil && ctx.Err() != nil {
		err = apistatus.FromError(ctx, "metrics request", err)
	}
	return v, err
}

// quietCustomProvider runs a custom metrics provider's calls quietly.
type quietCustomProvider struct {
	cmprovider.CustomMetricsProvider
}

// GetMetricByName implements cmprovider.CustomMetricsProvider.
func (q quietCustomProvider) GetMetricByName(ctx context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, sel labels.Selector) (*custom_metrics.MetricValue, error) {
	return quietly(ctx, func(ctx context.Context) (*custom_metrics.MetricValue, error) {
		return q.CustomMetricsProvider.GetMetricByName(ctx, name, info, sel)
	})
}

// GetMetricBySelector implements cmprovider.CustomMetricsProvider.
func (q quietCustomProvider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, sel labels.Selector) (*custom_metrics.MetricValueList, error) {
	return quietly(ctx, func(ctx context.Context) (*custom_metrics.MetricValueList, error) {
		return q.CustomMetricsProvider.GetMetricBySelector(ctx, namespace, selector, info, sel)
	})
}

// quietExternalProvider runs an external metrics provider's calls quietly.
type quietExternalProvider struct {
	cmprovider.ExternalMetricsProvider
}

// GetExternalMetric implements cmprovider.ExternalMetricsProvider.
func (q quietExternalProvider) GetExternalMetric(ctx context.Context, namespace string, sel labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	return quietly(ctx, func(ctx context.Context) (*external_metrics.ExternalMetricValueList, error) {
		return q.ExternalMetricsProvider.GetExternalMetric(ctx, namespace, sel, info)
	})
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

// WriteHeader implements http.ResponseWriter.
func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap implements responsewriter.UserProvidedDecorator.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
