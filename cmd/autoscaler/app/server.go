package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/internal/version"
	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/controller"
)

const (
	// mapperResetPeriod is how often the discovery RESTMapper forgets what
	// it learned, so new scalable kinds are found (kube-controller-manager
	// resets every 30s too).
	mapperResetPeriod = 30 * time.Second
	// informerResync is the shared informers' default resync; the HPA
	// handler asks for one every sync period.
	informerResync = 12 * time.Hour
	// leaderHealthTimeout is how long past a missed lease renewal /healthz
	// still reports healthy.
	leaderHealthTimeout = 20 * time.Second
	// shutdownTimeout bounds the HTTP server's graceful shutdown.
	shutdownTimeout = 5 * time.Second
)

// Config is the controller's plain configuration, built by Options.Config.
type Config struct {
	Kubeconfig string
	QPS        float32
	Burst      int

	// Mode, Selector and Namespaces: see controller.Config.
	Mode       controller.Mode
	Selector   labels.Selector
	Namespaces []string

	Autoscaler     autoscaler.Config
	SyncPeriod     time.Duration
	Workers        int
	RequestTimeout time.Duration
	DryRun         bool
	DryRunAnnotate bool
	// StaleReadCheck is the StaleControllerConsistencyHPA gate.
	StaleReadCheck bool

	// MetricsBindAddress serves /metrics, /healthz, /readyz; empty: none.
	MetricsBindAddress string
	// LeaderElection is nil when leader election is disabled.
	LeaderElection *LeaderElectionConfig
}

// LeaderElectionConfig configures the Lease-based leader election.
type LeaderElectionConfig struct {
	Name, Namespace string
	// Identity is this process's holder identity (hostname_uuid).
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// FenceMargin: writes are allowed until LeaseDuration - FenceMargin
	// after the last successful renewal (see controller.LeaseFence).
	FenceMargin time.Duration
}

// Completed is a Config with every client, informer and the controller
// built; Run starts them.
type Completed struct {
	cfg         *Config
	kube        kubernetes.Interface
	clients     clients
	factory     informers.SharedInformerFactory
	broadcaster events.EventBroadcaster
	registry    *prometheus.Registry
	telemetry   *controller.Metrics
	controller  *controller.Controller
	leaderCheck *leaderelection.HealthzAdaptor
	// lock is the leader election lock, wrapped by the fence that guards
	// the controller's writes; nil without leader election.
	lock *controller.LeaseFence
	// standby is true while leader election runs and this process does not
	// hold the lease.
	standby atomic.Bool
}

// clientConfig loads the client configuration: kubeconfig, else
// $KUBECONFIG and ~/.kube/config, else the in-cluster service account.
func clientConfig(kubeconfig, context string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
}

// restConfig is the controller's client configuration (--kubeconfig).
func (c *Config) restConfig() (*rest.Config, error) {
	rc, err := clientConfig(c.Kubeconfig, "").ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the Kubernetes client configuration: %w", err)
	}
	rc.QPS, rc.Burst = c.QPS, c.Burst
	rc.UserAgent = componentName
	return rc, nil
}

// Complete builds the clients, informers, event recorder, registry and the
// controller.
func (c *Config) Complete() (*Completed, error) {
	rc, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	kube, cl, err := newClients(rc, c.RequestTimeout)
	if err != nil {
		return nil, err
	}
	return complete(c, kube, cl)
}

// newClients builds the Kubernetes clientset and the clients the
// controller reads through (also those of "autoscaler explain"): a
// discovery-backed RESTMapper, /scale, and the three metrics APIs with
// requestTimeout per request.
func newClients(rc *rest.Config, requestTimeout time.Duration) (kubernetes.Interface, clients, error) {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, clients{}, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	// The scale kind resolver caches by itself; it reads discovery directly.
	scales, err := scale.NewForConfig(rc, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(kube.Discovery()))
	if err != nil {
		return nil, clients{}, fmt.Errorf("building the scale client: %w", err)
	}
	// The custom and external metrics clients take no context: the
	// request timeout is their rest.Config's.
	mc := rest.CopyConfig(rc)
	mc.Timeout = requestTimeout
	resource, err := resourceclient.NewForConfig(mc)
	if err != nil {
		return nil, clients{}, fmt.Errorf("building the resource metrics client: %w", err)
	}
	external, err := externalclient.NewForConfig(mc)
	if err != nil {
		return nil, clients{}, fmt.Errorf("building the external metrics client: %w", err)
	}
	apiVersions := customclient.NewAvailableAPIsGetter(kube.Discovery())
	custom := customclient.NewForConfig(mc, mapper, apiVersions)

	return kube, clients{
		mapper:      mapper,
		resetMapper: mapper.Reset,
		apiVersions: apiVersions,
		scales:      scales,
		metrics:     &controller.APIMetricsClient{Resource: resource, Custom: custom, External: external},
	}, nil
}

// clients are the API clients besides the Kubernetes clientset.
type clients struct {
	mapper controller.RESTMapper
	// resetMapper, if set, makes the mapper forget discovery (periodically).
	resetMapper func()
	// apiVersions, if set, is invalidated every sync period so the custom
	// metrics client notices a changed preferred version.
	apiVersions customclient.AvailableAPIsGetter
	scales      scale.ScalesGetter
	metrics     controller.MetricsClient
}

// complete wires the controller around already built clients.
func complete(c *Config, kube kubernetes.Interface, cl clients) (*Completed, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.NewCollector())
	tel, err := controller.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	core, err := autoscaler.New(c.Autoscaler, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, informerResync,
		informers.WithTransform(stripManagedFields))
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kube.EventsV1()})
	var fence *controller.LeaseFence
	if le := c.LeaderElection; le != nil {
		lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name,
			kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: le.Identity})
		if err != nil {
			return nil, fmt.Errorf("leader election lock %s/%s: %w", le.Namespace, le.Name, err)
		}
		if fence, err = controller.NewLeaseFence(lock, clock.RealClock{}, le.LeaseDuration, le.FenceMargin); err != nil {
			return nil, err
		}
	}
	ctrlCfg := controller.Config{
		Mode:           c.Mode,
		Selector:       c.Selector,
		Namespaces:     c.Namespaces,
		Autoscaler:     core,
		HPAs:           kube.AutoscalingV2(),
		Scales:         cl.scales,
		Mapper:         cl.mapper,
		Metrics:        cl.metrics,
		HPAInformer:    factory.Autoscaling().V2().HorizontalPodAutoscalers(),
		Recorder:       broadcaster.NewRecorder(scheme.Scheme, componentName),
		Telemetry:      tel,
		SyncPeriod:     c.SyncPeriod,
		Workers:        c.Workers,
		RequestTimeout: c.RequestTimeout,
		DryRun:         c.DryRun,
		DryRunAnnotate: c.DryRunAnnotate,
		StaleReadCheck: c.StaleReadCheck,
	}
	if fence != nil {
		ctrlCfg.Fence = fence
	}
	if c.Mode == controller.ModeFull {
		// Only the full controller lists pods (informers start lazily:
		// coexistence mode never watches pods).
		ctrlCfg.PodInformer = factory.Core().V1().Pods()
	}
	ctrl, err := controller.New(ctrlCfg)
	if err != nil {
		return nil, err
	}
	cc := &Completed{
		cfg:         c,
		kube:        kube,
		clients:     cl,
		factory:     factory,
		broadcaster: broadcaster,
		registry:    reg,
		telemetry:   tel,
		controller:  ctrl,
		lock:        fence,
	}
	if c.LeaderElection != nil {
		cc.leaderCheck = leaderelection.NewLeaderHealthzAdaptor(leaderHealthTimeout)
	}
	return cc, nil
}

// Run serves the HTTP endpoints and runs the controller (once leading, with
// leader election) until ctx is done. Losing the lease is an error: the
// process must exit so no two controllers act at once.
func (cc *Completed) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	serveErr := make(chan error, 1)
	if cc.cfg.MetricsBindAddress != "" {
		ln, err := net.Listen("tcp", cc.cfg.MetricsBindAddress)
		if err != nil {
			return fmt.Errorf("--metrics-bind-address %s: %w", cc.cfg.MetricsBindAddress, err)
		}
		srv := &http.Server{Handler: cc.handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { serveErr <- srv.Serve(ln) }()
		defer func() {
			sctx, scancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer scancel()
			_ = srv.Shutdown(sctx)
		}()
		logger.Info("Serving metrics and health", "address", ln.Addr().String())
	}
	go func() {
		select {
		case err := <-serveErr:
			if !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Metrics server failed")
				cancel()
			}
		case <-ctx.Done():
		}
	}()

	if err := cc.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("starting the event recorder: %w", err)
	}
	defer cc.broadcaster.Shutdown()

	if cc.cfg.LeaderElection == nil {
		return cc.runController(ctx)
	}
	return cc.runLeaderElection(ctx)
}

// runController starts the informers and the periodic discovery refreshes
// and runs the controller until ctx is done.
func (cc *Completed) runController(ctx context.Context) error {
	cc.telemetry.Leader.Set(1)
	defer cc.telemetry.Leader.Set(0)
	if reset := cc.clients.resetMapper; reset != nil {
		go wait.UntilWithContext(ctx, func(context.Context) { reset() }, mapperResetPeriod)
	}
	if av := cc.clients.apiVersions; av != nil {
		go customclient.PeriodicallyInvalidate(av, cc.cfg.SyncPeriod, ctx.Done())
	}
	// The informers stop with the controller, not only when the leading
	// context ends (client-go ends it when its renew loop gives up): a
	// controller stopped by its fence lets the process exit at once.
	ctx, cancel := context.WithCancel(ctx)
	cc.factory.Start(ctx.Done())
	defer func() {
		cancel()
		cc.factory.Shutdown()
	}()
	return cc.controller.Run(ctx)
}

// runLeaderElection campaigns for the Lease and runs the controller while
// holding it. When the controller stops on its own (its fence refused: the
// lease is lost or was not renewed in time), the election stops too and
// Run returns that error, so the process exits.
func (cc *Completed) runLeaderElection(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		started atomic.Bool
		lost    atomic.Bool
		// stopped receives the controller's result once it has stopped;
		// client-go does not wait for OnStartedLeading to return.
		stopped = make(chan error, 1)
	)
	cc.standby.Store(true)
	lec := leaderElectionConfig(cc.cfg.LeaderElection, cc.lock, cc.leaderCheck, leaderelection.LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context) {
			started.Store(true)
			cc.standby.Store(false)
			err := cc.runController(ctx)
			stopped <- err
			if err != nil {
				cancel()
			}
		},
		OnStoppedLeading: func() {
			if ctx.Err() == nil {
				lost.Store(true)
			}
		},
		OnNewLeader: func(identity string) {
			klog.FromContext(ctx).Info("New leader elected", "identity", identity, "self", identity == cc.cfg.LeaderElection.Identity)
		},
	})
	le, err := leaderelection.NewLeaderElector(lec)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	cc.leaderCheck.SetLeaderElection(le)
	le.Run(ctx)
	var runErr error
	if started.Load() {
		runErr = <-stopped
	}
	if runErr == nil && lost.Load() {
		return fmt.Errorf("leader election lost: lease %s/%s", cc.cfg.LeaderElection.Namespace, cc.cfg.LeaderElection.Name)
	}
	return runErr
}

// leaderElectionConfig builds client-go's leader election settings around
// lock (the Lease lock behind the controller's fence).
func leaderElectionConfig(c *LeaderElectionConfig, lock resourcelock.Interface, watchdog *leaderelection.HealthzAdaptor, cb leaderelection.LeaderCallbacks) leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   c.LeaseDuration,
		RenewDeadline:   c.RenewDeadline,
		RetryPeriod:     c.RetryPeriod,
		Callbacks:       cb,
		WatchDog:        watchdog,
		ReleaseOnCancel: true,
		Name:            componentName,
	}
}

// handler serves /metrics, /healthz and /readyz.
func (cc *Completed) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(cc.registry, promhttp.HandlerOpts{Registry: cc.registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if cc.leaderCheck != nil {
			if err := cc.leaderCheck.Check(r); err != nil {
				http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case cc.controller.Ready():
			fmt.Fprintln(w, "ok")
		case cc.standby.Load():
			fmt.Fprintln(w, "ok: standby, not the leader")
		default:
			http.Error(w, "informer caches not synced", http.StatusServiceUnavailable)
		}
	})
	return mux
}

// stripManagedFields drops metadata.managedFields from cached objects: the
// controller never reads them, and with many pods they are most of the
// informer's memory.
func stripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}
