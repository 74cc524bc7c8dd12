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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	apimetrics "k8s.io/apiserver/pkg/endpoints/metrics"
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
	"github.com/promscaler/promscaler/internal/turns"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/downstream"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/provider"
	"github.com/promscaler/promscaler/pkg/reload"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/pkg/teamrules"
)

// Providers is the seam between the server and the metrics providers
// (pkg/provider): what the server installs and runs. Everything the
// providers need comes in through the Config and ProviderDeps.
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
	// Ours and OurMetrics say, from memory, which metrics Custom and
	// External serve, for the downstream metrics servers behind them
	// (Config.DownstreamConfig). Nil: downstreams cannot be configured.
	Ours       downstream.Ours
	OurMetrics downstream.OurMetrics
}

// ProviderDeps is what the server builds for the providers factory; their
// settings the factory reads from the server's Config itself (Kube,
// Discovery, Shared, TeamRules), not from a copy.
type ProviderDeps struct {
	// Backends are the shared, coalescing clients of the default backend
	// and the named ones, built once by the server.
	Backends *promclient.Backends
	// Metrics is the adapter's registry of metrics.
	Metrics *metrics.Metrics
	// Rules are the rules files loaded at startup (rules.Load).
	Rules *rules.RuleSet
}

// ProvidersFactory builds the providers for a server from its Config and
// what Complete built for them.
type ProvidersFactory func(*Config, ProviderDeps) (*Providers, error)

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
	// AllowEmptyRulesReload lets a reload take the rules from some to none
	// (reload.Config.AllowEmptyRules).
	AllowEmptyRulesReload bool
	// Strict refuses to start on a query Prometheus would reject (loaded
	// with an error logged otherwise, as prometheus-adapter does).
	Strict bool
	// Backends are the default backend (the --prometheus-* flags, the one
	// rules without a backend key read from) then the named ones
	// (--backends-config), which rules name with their backend key.
	Backends []promclient.Backend
	// BackendsFile is the --backends-config file the named Backends came
	// from: watched (ConfigReloadInterval) and reloaded when it changes.
	BackendsFile string
	// backendNames, once the backends are built, lists the named ones in
	// service (they change with BackendsFile) for the rules' backend keys.
	backendNames func() []string
	// Discovery's Interval, MaxAge and Strategy configure discovery; the
	// providers fill in its backends, rules and the rest.
	Discovery discovery.Options
	// Shared configures the custom metrics provider's shared evaluation
	// (--shared-evaluation-max-age).
	Shared provider.SharedConfig
	// Pod is the adapter's own Pod (POD_NAMESPACE and POD_NAME from the
	// downward API); when set, a configuration file rejected on reload is
	// also an Event on it. Empty: logged and counted only.
	Pod types.NamespacedName
	// ClientCertCacheTTL is how long a client certificate chain that
	// verified is trusted without verifying it again (certauth); zero
	// verifies on every request, as the library does.
	ClientCertCacheTTL time.Duration
	// MaxConcurrentAnswers bounds how many requests build and encode their
	// answers at once, once their data is in hand (internal/turns); 0: no
	// bound. The adapter's default is turns.Default.
	MaxConcurrentAnswers int
	// TeamRules, when set, also serves the rules of the team rules
	// ConfigMaps, each confined to its namespace (--team-rules).
	TeamRules *teamrules.Options
	// DownstreamConfig, when set, is the file of the downstream metrics
	// servers (pkg/downstream) put behind the providers: the metrics they
	// list and promscaler does not serve are forwarded to them.
	DownstreamConfig string

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
	if c.backendNames != nil {
		names = c.backendNames()
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
	// backendsWatcher reloads BackendsFile (backends_reload.go).
	backendsWatcher *reload.Watcher
	apiServer       *apiServerReachability
	events          *podEvents
}

// startupRules are the rules files as read and loaded at startup, and the
// RESTMapper they were loaded against (reloads use it too).
type startupRules struct {
	files  []rules.File
	mapper meta.RESTMapper
	set    *rules.RuleSet
}

// Complete loads the rules files and builds the Prometheus clients, the
// providers and the API server (with the metrics APIs, /metrics, the
// readiness checks, the handler chain of handlers.go and the reload
// watcher), in that order.
func (c *Config) Complete() (*Server, error) {
	if c.APIServer == nil || c.APIServer.GenericConfig == nil {
		return nil, errors.New("no API server configuration")
	}
	start, err := c.loadStartupRules()
	if err != nil {
		return nil, err
	}
	m := c.Metrics
	if m == nil {
		m = metrics.New()
	}
	// details is set once the reload watcher exists, before the server
	// runs; the handler chain reads it per request.
	var details func() []string
	c.configureGenericServer(m, func() []string { return details() })
	backends, err := promclient.NewBackends(c.Backends, m, arrivalTime)
	if err != nil {
		return nil, fmt.Errorf("building the Prometheus clients: %w", err)
	}
	providers, err := c.buildProviders(ProviderDeps{Backends: backends, Metrics: m, Rules: start.set})
	if err != nil {
		return nil, err
	}
	downstreamDetails, err := c.addDownstreams(providers, m)
	if err != nil {
		return nil, err
	}
	apiServer, err := c.newAPIServer(providers, m)
	if err != nil {
		return nil, err
	}
	kubeConfig, err := c.Kube.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes client configuration: %w", err)
	}
	reach, err := addReadinessChecks(apiServer.GenericAPIServer, providers.Ready, kubeConfig, c.APIServer.GenericConfig.Authentication.RequestHeaderConfig)
	if err != nil {
		return nil, err
	}
	s := &Server{name: c.Name, api: apiServer, backends: backends, providers: providers, apiServer: reach}
	if c.Pod.Name != "" && c.Pod.Namespace != "" {
		kube, err := kubernetes.NewForConfig(kubeConfig)
		if err != nil {
			return nil, fmt.Errorf("the Kubernetes client for Events: %w", err)
		}
		s.events = newPodEvents(kube, c.Pod)
	}
	c.backendNames = backends.Names
	if err := c.watchRules(s, start, m); err != nil {
		return nil, err
	}
	if err := c.watchBackends(s, m); err != nil {
		return nil, err
	}
	var rejected, backendsRejected func() []reload.Rejection
	if s.watcher != nil {
		rejected = s.watcher.Rejected
	}
	if s.backendsWatcher != nil {
		backendsRejected = s.backendsWatcher.Rejected
	}
	details = joinDetails(readinessDetails(backends.Guards, rejected, backendsRejected), downstreamDetails)
	return s, nil
}

// loadStartupRules reads and loads the rules files (strict as c.Strict
// says) against the cluster's resources.
func (c *Config) loadStartupRules() (startupRules, error) {
	files, err := rules.Read(c.RulesFiles)
	if err != nil {
		return startupRules{}, fmt.Errorf("reading the rules files: %w", err)
	}
	mapper, err := c.Kube.RESTMapper()
	if err != nil {
		return startupRules{}, fmt.Errorf("building the RESTMapper: %w", err)
	}
	set, err := c.loadRules(files, mapper, rules.Strict(c.Strict, ""))
	if err != nil {
		return startupRules{}, fmt.Errorf("loading the rules files: %w", err)
	}
	return startupRules{files: files, mapper: mapper, set: set}, nil
}

// configureGenericServer sets up the generic API server's configuration:
// /metrics left to the adapter, the client certificate cache, the health
// endpoints outside the in-flight limit, authorization failures recorded
// (authz.go) and the handler chain (handlers.go) with its answer turns
// (internal/turns).
func (c *Config) configureGenericServer(m *metrics.Metrics, details func() []string) {
	gc := c.APIServer.GenericConfig
	// /metrics is ours (adapter registry + Kubernetes component metrics),
	// installed by newAPIServer instead of the generic server's.
	gc.EnableMetrics = false
	cacheClientCertVerification(gc, c.ClientCertCacheTTL, m)
	exemptHealthFromInFlightLimit(gc)
	recordAuthorizationFailures(gc)
	gc.BuildHandlerChainFunc = buildHandlerChain(m, turns.New(c.MaxConcurrentAnswers, m.AnswerTurnWait), details)
}

// buildProviders builds the metrics providers with c.NewProviders (nil:
// DefaultProviders) and checks that the required ones are there.
func (c *Config) buildProviders(deps ProviderDeps) (*Providers, error) {
	newProviders := c.NewProviders
	if newProviders == nil {
		newProviders = DefaultProviders
	}
	providers, err := newProviders(c, deps)
	if err != nil {
		return nil, fmt.Errorf("building the metrics providers: %w", err)
	}
	if providers.Custom == nil || providers.External == nil {
		return nil, errors.New("building the metrics providers: custom and external providers are required")
	}
	return providers, nil
}

// newAPIServer builds the API server serving the providers' metrics APIs
// (their calls run quietly, handlers.go), metrics.k8s.io when the
// providers install it, and the adapter's /metrics.
func (c *Config) newAPIServer(providers *Providers, m *metrics.Metrics) (*cmapiserver.CustomMetricsAdapterServer, error) {
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
	if providers.InstallResourceMetrics != nil {
		if err := providers.InstallResourceMetrics(gs); err != nil {
			return nil, fmt.Errorf("installing metrics.k8s.io: %w", err)
		}
	}
	// The generic server registers its request metrics only when it serves
	// /metrics itself; register them for the merged /metrics.
	apimetrics.Register()
	gs.Handler.NonGoRestfulMux.Handle("/metrics", promhttp.HandlerFor(
		prometheus.Gatherers{m.Registry, legacyregistry.DefaultGatherer},
		promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError},
	))
	return apiServer, nil
}

// addReadinessChecks adds the readiness checks: config-loaded (the rules
// are loaded, Complete fails otherwise: it passes from the start and
// states it), metrics-discovery (ready; nil: always ready),
// kube-apiserver (the returned probe, run by Server.Run) and
// front-proxy-ca (frontProxyCALoaded of requestHeader).
func addReadinessChecks(gs *genericapiserver.GenericAPIServer, ready func() error, kubeConfig *rest.Config, requestHeader *authenticatorfactory.RequestHeaderConfig) (*apiServerReachability, error) {
	if ready == nil {
		ready = func() error { return nil }
	}
	reach, err := newAPIServerReachability(kubeConfig)
	if err != nil {
		return nil, err
	}
	if err := gs.AddReadyzChecks(
		healthz.NamedCheck("config-loaded", func(*http.Request) error { return nil }),
		healthz.NamedCheck("metrics-discovery", func(*http.Request) error { return ready() }),
		healthz.NamedCheck("kube-apiserver", reach.Check),
		frontProxyCALoaded(requestHeader),
	); err != nil {
		return nil, fmt.Errorf("adding the readiness checks: %w", err)
	}
	return reach, nil
}

// watchRules sets s.watcher, the reload watcher of the rules files, when
// c.ConfigReloadInterval asks for one: a changed file is loaded (strictly:
// one with a query Prometheus would reject never replaces rules that work)
// and handed to the providers; a rejection is also an Event on the Pod
// when s.events is set.
func (c *Config) watchRules(s *Server, start startupRules, m *metrics.Metrics) error {
	if c.ConfigReloadInterval <= 0 {
		return nil
	}
	var report func(string, error)
	if s.events != nil {
		report = s.events.configRejected
	}
	apply := s.providers.ApplyConfig
	w, err := reload.New(reload.Config{
		Sources:  c.RulesFiles,
		Interval: c.ConfigReloadInterval,
		Metrics:  m,
		Report:   report,
		// A reload from some rules to none is refused unless allowed.
		AllowEmptyRules: c.AllowEmptyRulesReload,
		Apply: func(_ context.Context, files []rules.File, changed string) error {
			if apply == nil {
				return errors.New("the metrics providers cannot change rules without a restart")
			}
			rs, err := c.loadRules(files, start.mapper, rules.Strict(true, changed))
			if err != nil {
				return err
			}
			return apply(rs)
		},
	})
	if err != nil {
		return err
	}
	w.Prime(start.files)
	s.watcher = w
	return nil
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
	if s.backendsWatcher != nil {
		wg.Go(func() { s.backendsWatcher.Run(ctx) })
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
