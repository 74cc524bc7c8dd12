// Package server builds and runs the adapter's aggregated API server:
// custom.metrics.k8s.io, external.metrics.k8s.io and, with resource rules,
// metrics.k8s.io, served from Prometheus through the metrics providers, with
// the adapter's /metrics, readiness and hot reload of the rules file.
package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	apimetrics "k8s.io/apiserver/pkg/endpoints/metrics"
	"k8s.io/apiserver/pkg/endpoints/responsewriter"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/apiencode"
	"github.com/promscaler/promscaler/internal/certauth"
	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/servertiming"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/reload"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/pkg/teamrules"
)

// Providers is the seam between the server and the metrics providers
// (pkg/provider): what the server installs and runs. Everything the
// providers need comes in through ProviderDeps.
type Providers struct {
	// Custom serves custom.metrics.k8s.io (v1beta1 and v1beta2). Required.
	Custom cmprovider.CustomMetricsProvider
	// External serves external.metrics.k8s.io (v1beta1). Required.
	External cmprovider.ExternalMetricsProvider
	// InstallResourceMetrics, when set, installs metrics.k8s.io on the
	// server (before it runs).
	InstallResourceMetrics func(*genericapiserver.GenericAPIServer) error
	// Ready returns nil once the first complete discovery has been
	// published, an error saying what is missing before. /readyz fails
	// until then. Nil means always ready.
	Ready func() error
	// Run runs the providers' background loops (discovery relists) until
	// ctx ends. Nil when there are none.
	Run func(ctx context.Context)
	// ApplyConfig installs a new set of rules files, loaded and checked
	// (rules.Load), in place of the startup ones (hot reload). It returns
	// an error, and keeps the rules in service, when it cannot.
	ApplyConfig func(*rules.RuleSet) error
}

// ProviderDeps is what the server hands the providers factory.
type ProviderDeps struct {
	// Kube gives the Kubernetes clients.
	Kube KubeClients
	// Backends are the shared, coalescing clients of the default backend
	// and the named ones, built once by the server.
	Backends *promclient.Backends
	// Metrics is the adapter's registry of metrics.
	Metrics *metrics.Metrics
	// Rules are the rules files loaded at startup (rules.Load).
	Rules *rules.RuleSet
	// Discovery is Config.Discovery: how often discovery runs, how far back
	// it looks and how it asks Prometheus.
	Discovery discovery.Options
	// TeamRules, when set, serves the team rules ConfigMaps (teamrules).
	TeamRules *teamrules.Options
}

// ProvidersFactory builds the providers for a server.
type ProvidersFactory func(ProviderDeps) (*Providers, error)

// KubeClients gives the Kubernetes clients the providers use;
// custom-metrics-apiserver's AdapterBase is one.
type KubeClients interface {
	// ClientConfig is the REST configuration of the cluster's API server.
	ClientConfig() (*rest.Config, error)
	// RESTMapper maps resources to kinds, refreshed from API discovery.
	RESTMapper() (meta.RESTMapper, error)
}

// Config is the adapter server's configuration: plain values, filled by the
// command line (cmd/adapter) or by a test.
type Config struct {
	// Name names the API server in logs.
	Name string
	// APIServer is the generic API server's configuration (serving,
	// delegated authentication and authorization, audit), built from
	// custom-metrics-apiserver's options; Informers are the shared informers
	// it starts. Complete adds the handler chain and the client certificate
	// cache to it.
	APIServer *cmapiserver.Config
	Informers informers.SharedInformerFactory
	// Kube gives the providers their Kubernetes clients.
	Kube KubeClients

	// RulesFiles are the rules files and directories of rules files
	// (prometheus-adapter's format), in order, loaded by Complete; each
	// file is watched for changes every ConfigReloadInterval (0: never).
	RulesFiles           []string
	ConfigReloadInterval time.Duration
	// Strict refuses to start on a query Prometheus would reject (loaded
	// with an error logged otherwise, as prometheus-adapter does).
	Strict bool
	// Backends are the default backend (the --prometheus-* flags, the one
	// rules without a backend key read from) then the named ones
	// (--backends-config), which rules name with their backend key.
	Backends []promclient.Backend
	// Discovery's Interval, MaxAge and Strategy configure discovery; the
	// providers fill in its backends, rules and the rest.
	Discovery discovery.Options
	// Pod is the adapter's own Pod (POD_NAMESPACE and POD_NAME from the
	// downward API); when set, a configuration file rejected on reload is
	// also an Event on it. Empty: logged and counted only.
	Pod types.NamespacedName
	// ClientCertCacheTTL is how long a client certificate chain that
	// verified is trusted without verifying it again (certauth); zero
	// verifies on every request, as the library does.
	ClientCertCacheTTL time.Duration
	// TeamRules, when set, also serves the rules of the team rules
	// ConfigMaps, each confined to its namespace (--team-rules).
	TeamRules *teamrules.Options

	// NewProviders builds the metrics providers; nil means DefaultProviders.
	// Tests replace it with fakes.
	NewProviders ProvidersFactory
	// Metrics is the adapter's own registry, served on /metrics; nil means
	// a new one.
	Metrics *metrics.Metrics

	// MetricsSerializer wraps the metrics groups' negotiated serializer;
	// nil means apiencode.NewNegotiatedSerializer (the metric lists written
	// as JSON directly; its A/B is in docs/performance.md).
	MetricsSerializer func(runtime.NegotiatedSerializer) runtime.NegotiatedSerializer

	// libraryMetricsAPIs installs the metrics groups with the library's own
	// installer and serializer instead: the reference the tests compare the
	// served answers against.
	libraryMetricsAPIs bool
}

// loadRules loads the rules files (rules.Load) against the cluster's
// resources and the configured backends, logging the warnings. strict
// names the files in which a query Prometheus would reject is an error
// (rules.Strict); in the others it loads with a warning, as
// prometheus-adapter loads it.
func (c *Config) loadRules(files []rules.File, mapper meta.RESTMapper, strict func(string) bool) (*rules.RuleSet, error) {
	var names []string
	for _, b := range c.Backends[min(1, len(c.Backends)):] {
		names = append(names, b.Name)
	}
	loaded, err := rules.Load(files, rules.Options{Mapper: mapper, Strict: strict, Backends: names})
	if err != nil {
		return nil, err
	}
	logConfigWarnings(loaded.Warnings)
	for _, e := range loaded.QueryErrors {
		klog.ErrorS(e, "Rule loaded anyway, its queries will fail")
	}
	return loaded.Set, nil
}

// Server is a completed adapter server, ready to Run.
type Server struct {
	name      string
	api       *cmapiserver.CustomMetricsAdapterServer
	backends  *promclient.Backends
	providers *Providers
	watcher   *reload.Watcher
	apiServer *apiServerReachability
	events    *podEvents
}

// Complete loads the rules file and builds the Prometheus client, the
// providers and the API server (with the metrics APIs, /metrics, the
// readiness check and request instrumentation).
func (c *Config) Complete() (*Server, error) {
	if c.APIServer == nil || c.APIServer.GenericConfig == nil {
		return nil, errors.New("no API server configuration")
	}
	files, err := rules.Read(c.RulesFiles)
	if err != nil {
		return nil, fmt.Errorf("reading the rules files: %w", err)
	}
	mapper, err := c.Kube.RESTMapper()
	if err != nil {
		return nil, fmt.Errorf("building the RESTMapper: %w", err)
	}
	ruleSet, err := c.loadRules(files, mapper, rules.Strict(c.Strict, ""))
	if err != nil {
		return nil, fmt.Errorf("loading the rules files: %w", err)
	}
	m := c.Metrics
	if m == nil {
		m = metrics.New()
	}
	newProviders := c.NewProviders
	if newProviders == nil {
		newProviders = DefaultProviders
	}
	gc := c.APIServer.GenericConfig
	// /metrics is ours (adapter registry + Kubernetes component metrics),
	// installed below instead of the generic server's.
	gc.EnableMetrics = false
	cacheClientCertVerification(gc, c.ClientCertCacheTTL, m)
	exemptHealthFromInFlightLimit(gc)
	// An API server that cannot authorize a request is a 503, not the
	// library's 500 naming its address (authz.go).
	recordAuthorizationFailures(gc)
	// Filled below, once the reload watcher exists.
	var details func() []string
	gc.BuildHandlerChainFunc = func(h http.Handler, gc *genericapiserver.Config) http.Handler {
		// Innermost, next to the API handler: the Prometheus wait
		// announced in Server-Timing, and a 400 for an unparsable
		// metricLabelSelector (selectors.go).
		chain := genericapiserver.DefaultBuildHandlerChain(servertiming.Handler(badMetricLabelSelector(h)), gc)
		// details is read per request: it is set once Complete has built
		// the watcher, before the server runs.
		chain = withReadyzDetails(chain, func() []string { return details() })
		return instrumentRequests(authorizationUnavailable(chain), m)
	}
	// Outermost: when each request reached the server, the time a "now"
	// query's shared answer must not be older than (arrival.go; the A/B
	// that keeps it is in docs/performance.md).
	arrival := stampArrivals(gc)
	backends, err := promclient.NewBackends(c.Backends, m, arrival)
	if err != nil {
		return nil, fmt.Errorf("building the Prometheus clients: %w", err)
	}
	providers, err := newProviders(ProviderDeps{
		Kube:      c.Kube,
		Backends:  backends,
		Metrics:   m,
		Rules:     ruleSet,
		Discovery: c.Discovery,
		TeamRules: c.TeamRules,
	})
	if err != nil {
		return nil, fmt.Errorf("building the metrics providers: %w", err)
	}
	if providers.Custom == nil || providers.External == nil {
		return nil, errors.New("building the metrics providers: custom and external providers are required")
	}

	custom := quietCustomProvider{providers.Custom}
	external := quietExternalProvider{providers.External}
	var libCustom cmprovider.CustomMetricsProvider
	var libExternal cmprovider.ExternalMetricsProvider
	if c.libraryMetricsAPIs {
		libCustom, libExternal = custom, external
	}
	// Without providers New installs neither metrics group: they are
	// installed below, as the library does but with the lists' serializer
	// wrapped.
	apiServer, err := c.APIServer.Complete(c.Informers).New(c.Name, libCustom, libExternal)
	if err != nil {
		return nil, fmt.Errorf("building the API server: %w", err)
	}
	gs := apiServer.GenericAPIServer
	if !c.libraryMetricsAPIs {
		serializer := c.MetricsSerializer
		if serializer == nil {
			serializer = apiencode.NewNegotiatedSerializer
		}
		if err := installMetricsAPIs(gs, serializer, custom, external); err != nil {
			return nil, err
		}
	}
	// The generic server registers its request metrics only when it serves
	// /metrics itself; register them for the merged /metrics below.
	apimetrics.Register()
	gs.Handler.NonGoRestfulMux.Handle("/metrics", promhttp.HandlerFor(
		prometheus.Gatherers{m.Registry, legacyregistry.DefaultGatherer},
		promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError},
	))
	ready := providers.Ready
	if ready == nil {
		ready = func() error { return nil }
	}
	kubeConfig, err := c.Kube.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes client configuration: %w", err)
	}
	reach, err := newAPIServerReachability(kubeConfig)
	if err != nil {
		return nil, err
	}
	// The rules are loaded (Complete fails otherwise): config-loaded
	// passes from the start and states it.
	if err := gs.AddReadyzChecks(
		healthz.NamedCheck("config-loaded", func(*http.Request) error { return nil }),
		healthz.NamedCheck("metrics-discovery", func(*http.Request) error { return ready() }),
		healthz.NamedCheck("kube-apiserver", reach.Check),
	); err != nil {
		return nil, fmt.Errorf("adding the readiness checks: %w", err)
	}
	if providers.InstallResourceMetrics != nil {
		if err := providers.InstallResourceMetrics(gs); err != nil {
			return nil, fmt.Errorf("installing metrics.k8s.io: %w", err)
		}
	}

	s := &Server{name: c.Name, api: apiServer, backends: backends, providers: providers, apiServer: reach}
	var report func(string, error)
	if c.Pod.Name != "" && c.Pod.Namespace != "" {
		kube, err := kubernetes.NewForConfig(kubeConfig)
		if err != nil {
			return nil, fmt.Errorf("the Kubernetes client for Events: %w", err)
		}
		s.events = newPodEvents(kube, c.Pod)
		report = s.events.configRejected
	}
	var rejected func() []reload.Rejection
	if c.ConfigReloadInterval > 0 {
		s.watcher, err = reload.New(reload.Config{
			Sources:  c.RulesFiles,
			Interval: c.ConfigReloadInterval,
			Metrics:  m,
			Report:   report,
			Apply: func(_ context.Context, files []rules.File, changed string) error {
				if providers.ApplyConfig == nil {
					return errors.New("the metrics providers cannot change rules without a restart")
				}
				// A changed file with a query Prometheus would reject is
				// never swapped in for rules that work.
				rs, err := c.loadRules(files, mapper, rules.Strict(true, changed))
				if err != nil {
					return err
				}
				return providers.ApplyConfig(rs)
			},
		})
		if err != nil {
			return nil, err
		}
		s.watcher.Prime(files)
		rejected = s.watcher.Rejected
	}
	details = readinessDetails(backends.Guards(), rejected)
	return s, nil
}

// Run serves until ctx ends, with the providers' loops and the config
// watcher running alongside; it returns once they have all stopped.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.events != nil {
		// Before the watcher: a rejection it reports is recorded.
		s.events.start(ctx)
		defer s.events.stop()
	}
	var wg sync.WaitGroup
	if s.providers.Run != nil {
		wg.Go(func() { s.providers.Run(ctx) })
	}
	if s.watcher != nil {
		wg.Go(func() { s.watcher.Run(ctx) })
	}
	wg.Go(func() { s.apiServer.run(ctx) })
	klog.InfoS("Serving the metrics APIs", "name", s.name)
	err := s.api.GenericAPIServer.PrepareRun().RunWithContext(ctx)
	cancel()
	wg.Wait()
	s.backends.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("running the API server: %w", err)
	}
	return nil
}

func logConfigWarnings(warnings []string) {
	for _, w := range warnings {
		klog.InfoS("Configuration warning", "warning", w)
	}
}

// apiOf classifies a request path by metrics API for the request metrics.
func apiOf(path string) string {
	switch {
	case strings.HasPrefix(path, "/apis/custom.metrics.k8s.io/"), path == "/apis/custom.metrics.k8s.io":
		return metrics.APICustom
	case strings.HasPrefix(path, "/apis/external.metrics.k8s.io/"), path == "/apis/external.metrics.k8s.io":
		return metrics.APIExternal
	case strings.HasPrefix(path, "/apis/metrics.k8s.io/"), path == "/apis/metrics.k8s.io":
		return metrics.APIResource
	}
	return metrics.APIOther
}

// instrumentRequests counts and times every request by metrics API and
// code. It also keeps a client hanging up from reaching the handler chain as
// a cancellation (see detachClientCancel).
func instrumentRequests(next http.Handler, m *metrics.Metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		// WrapForHTTP1Or2 keeps the optional interfaces (Flusher, Hijacker,
		// CloseNotifier) the API server's handlers rely on.
		next.ServeHTTP(responsewriter.WrapForHTTP1Or2(rec), detachClientCancel(r))
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		api := apiOf(r.URL.Path)
		m.APIRequests.WithLabelValues(api, strconv.Itoa(code)).Inc()
		m.APIRequestDuration.WithLabelValues(api).Observe(time.Since(start).Seconds())
	})
}

// cacheClientCertVerification puts certauth's fast path in front of the
// library's authenticator: a client certificate chain that verified is not
// verified again on every request for ttl. Without a clear client CA (see
// certauth.ClientCA) or with ttl 0, the library's authenticator is kept
// alone.
func cacheClientCertVerification(gc *genericapiserver.Config, ttl time.Duration, m *metrics.Metrics) {
	auth := &gc.Authentication
	if ttl <= 0 || auth.Authenticator == nil || gc.SecureServing == nil {
		return
	}
	var requestHeaderCA dynamiccertificates.CAContentProvider
	if auth.RequestHeaderConfig != nil {
		requestHeaderCA = auth.RequestHeaderConfig.CAContentProvider
	}
	clientCA, ok := certauth.ClientCA(gc.SecureServing.ClientCA, requestHeaderCA)
	if !ok {
		klog.InfoS("Client certificates are verified on every request: the serving CA providers are not the client CA and front-proxy CA the library builds")
		return
	}
	counts := make(map[certauth.Result]prometheus.Counter)
	for _, r := range []certauth.Result{certauth.Cached, certauth.Verified, certauth.Library} {
		counts[r] = m.ClientCertAuthentications.WithLabelValues(string(r))
	}
	auth.Authenticator = certauth.NewAuthenticator(certauth.Config{
		RequestHeader: auth.RequestHeaderConfig,
		ClientCA:      clientCA,
		Fallback:      auth.Authenticator,
		Cache:         certauth.NewCache(clock.RealClock{}, ttl),
		Observe:       func(r certauth.Result) { counts[r].Inc() },
	})
}
