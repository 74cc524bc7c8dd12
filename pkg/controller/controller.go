// Package controller is the HorizontalPodAutoscaler controller shell around
// the decision cores in pkg/autoscaler and pkg/scaletozero: informers for
// HPAs (and pods), a rate-limited workqueue resyncing each HPA every sync
// period, the /scale subresource of any scalable target, the three metrics
// APIs, events, status writes and the per-HPA state the cores need between
// reconciles. In ModeFull it behaves like kube-controller-manager's
// horizontal-pod-autoscaler controller (Kubernetes 1.37), plus a dry-run
// mode that decides and records without writing /scale or the HPA status;
// in ModeCoexist (the default) it runs beside that controller and acts only
// on annotated HPAs (scale to zero and back, fallback replicas). With a
// Fence (leader election) no write is made unless the lease is ours.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	autoscalinginformers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	autoscalingclient "k8s.io/client-go/kubernetes/typed/autoscaling/v2"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

// DefaultRequestTimeout bounds each API request of a reconcile (scale,
// metrics, status).
const DefaultRequestTimeout = 30 * time.Second

// RESTMapper resolves a scale target's group and kind to its resources; a
// discovery-backed mapper (restmapper.DeferredDiscoveryRESTMapper) refreshes
// itself when a kind is not found.
type RESTMapper interface {
	RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error)
}

var _ RESTMapper = meta.RESTMapper(nil)

// Config is everything a Controller is built from.
type Config struct {
	// Mode is ModeCoexist (beside kube-controller-manager's HPA controller;
	// the zero value means it) or ModeFull.
	Mode Mode
	// Selector and Namespaces choose the HPAs the controller owns (label
	// selector on the HPA; nil: every HPA; empty Namespaces: all). Others
	// are never read beyond the informer nor written.
	Selector   labels.Selector
	Namespaces []string

	// Autoscaler is the decision core (flags: tolerance, stabilization,
	// CPU initialization, readiness delay, feature gates).
	Autoscaler *autoscaler.Autoscaler
	// HPAs writes HPA status (and, in dry-run with DryRunAnnotate, the
	// decision annotation).
	HPAs autoscalingclient.HorizontalPodAutoscalersGetter
	// Scales reads and updates the /scale subresource of scale targets.
	Scales scale.ScalesGetter
	// Mapper maps a scale target's group and kind to its resources.
	Mapper RESTMapper
	// Metrics reads the metrics APIs.
	Metrics MetricsClient
	// HPAInformer and PodInformer are shared informers; the caller starts
	// them (the controller registers its handlers in New). ModeCoexist
	// lists no pods: PodInformer may be nil there.
	HPAInformer autoscalinginformers.HorizontalPodAutoscalerInformer
	PodInformer coreinformers.PodInformer
	// Recorder records events on HPAs (events.k8s.io).
	Recorder events.EventRecorder
	// Clock times reconciles; nil means the real clock.
	Clock clock.PassiveClock
	// Telemetry receives the controller's Prometheus metrics.
	Telemetry *Metrics

	// SyncPeriod is --horizontal-pod-autoscaler-sync-period: each HPA is
	// reconciled this often.
	SyncPeriod time.Duration
	// Workers is --concurrent-horizontal-pod-autoscaler-syncs.
	Workers int
	// RequestTimeout bounds each API request (scale read and update, metrics
	// reads, status write); zero means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// DryRun decides and records without updating /scale or HPA status.
	DryRun bool
	// DryRunAnnotate, with DryRun, writes each changed decision to the
	// HPA's DryRunAnnotation.
	DryRunAnnotate bool
	// StaleReadCheck skips reconciling an HPA from a cache older than the
	// controller's own last write to it (kube-controller-manager's
	// StaleControllerConsistencyHPA gate, on by default in 1.37).
	StaleReadCheck bool
	// Fence, when set (leader election), is asked right before every write
	// (/scale, HPA status and annotations, events); when it refuses, the
	// write is not made and the workers stop (Run returns an error wrapping
	// ErrNotLeader). Nil: every write is allowed.
	Fence Fence
	// FencePollInterval is how often Run asks the Fence between writes, so
	// a lost lease stops the workers even when nothing is written; zero
	// means DefaultFencePollInterval.
	FencePollInterval time.Duration
}

// DefaultFencePollInterval is how often a running controller checks its
// Fence between writes.
const DefaultFencePollInterval = 250 * time.Millisecond

// Validate reports every missing dependency and invalid setting.
func (c *Config) Validate() []error {
	var errs []error
	for _, dep := range []struct {
		name string
		nil  bool
	}{
		{"Autoscaler", c.Autoscaler == nil},
		{"HPAs", c.HPAs == nil},
		{"Scales", c.Scales == nil},
		{"Mapper", c.Mapper == nil},
		{"Metrics", c.Metrics == nil},
		{"HPAInformer", c.HPAInformer == nil},
		{"PodInformer", c.PodInformer == nil && c.Mode == ModeFull},
		{"Recorder", c.Recorder == nil},
		{"Telemetry", c.Telemetry == nil},
	} {
		if dep.nil {
			errs = append(errs, fmt.Errorf("controller config: %s is required", dep.name))
		}
	}
	if c.SyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("controller config: SyncPeriod %v must be positive", c.SyncPeriod))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("controller config: Workers %d must be at least 1", c.Workers))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("controller config: RequestTimeout %v must not be negative", c.RequestTimeout))
	}
	if c.DryRunAnnotate && !c.DryRun {
		errs = append(errs, errors.New("controller config: DryRunAnnotate needs DryRun"))
	}
	switch c.Mode {
	case "", ModeCoexist, ModeFull:
	default:
		errs = append(errs, fmt.Errorf("controller config: Mode %q: want %q or %q", c.Mode, ModeCoexist, ModeFull))
	}
	if c.FencePollInterval < 0 {
		errs = append(errs, fmt.Errorf("controller config: FencePollInterval %v must not be negative", c.FencePollInterval))
	}
	return errs
}

// Controller reconciles autoscaling/v2 HorizontalPodAutoscalers.
type Controller struct {
	cfg       Config
	core      *autoscaler.Autoscaler
	clock     clock.PassiveClock
	tel       *Metrics
	hpaLister autoscalinglisters.HorizontalPodAutoscalerLister
	podLister corelisters.PodLister
	hpaStore  cache.Store
	// podIndexer, when set, has the podLabelIndex.
	podIndexer cache.Indexer
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	selectors  *selectorStore
	metrics    *MetricsReader

	mu     sync.Mutex
	states map[string]*hpaEntry // per HPA key; see entryFor

	ready atomic.Bool
	// lost is closed, once, when the Fence refused a write or a poll;
	// lostErr says why.
	lostOnce sync.Once
	lost     chan struct{}
	lostErr  error
	// reconciled, when set (tests and benchmarks), is called after each
	// reconcile with the key.
	reconciled func(key string)
}

// New builds a Controller and registers its event handlers on the
// informers. It does not start anything; see Run.
func New(cfg Config) (*Controller, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeCoexist
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	c := &Controller{
		cfg:       cfg,
		core:      cfg.Autoscaler,
		clock:     cfg.Clock,
		tel:       cfg.Telemetry,
		hpaLister: cfg.HPAInformer.Lister(),
		hpaStore:  cfg.HPAInformer.Informer().GetStore(),
		synced:    []cache.InformerSynced{cfg.HPAInformer.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			newFixedIntervalRateLimiter(cfg.SyncPeriod),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "promscaler_hpa"},
		),
		selectors: newSelectorStore(),
		states:    map[string]*hpaEntry{},
		lost:      make(chan struct{}),
	}
	if c.cfg.FencePollInterval == 0 {
		c.cfg.FencePollInterval = DefaultFencePollInterval
	}
	c.metrics = &MetricsReader{
		Client:  cfg.Metrics,
		Timeout: cfg.RequestTimeout,
		Clock:   cfg.Clock,
		Observed: func(source string, d time.Duration) {
			c.tel.MetricFetchDuration.WithLabelValues(source).Observe(d.Seconds())
		},
		Failed: func(source autoscalingv2.MetricSourceType) {
			c.tel.MetricFetchErrors.WithLabelValues(string(source)).Inc()
		},
	}
	reg, err := cfg.HPAInformer.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addHPA,
		UpdateFunc: c.updateHPA,
		DeleteFunc: c.deleteHPA,
	}, cfg.SyncPeriod)
	if err != nil {
		return nil, fmt.Errorf("registering HPA event handler: %w", err)
	}
	// Synced also waits for the handler to have seen every HPA of the
	// initial list, so each is registered before its first reconcile.
	c.synced = append(c.synced, reg.HasSynced)
	if cfg.Mode == ModeFull {
		c.podLister = cfg.PodInformer.Lister()
		c.synced = append(c.synced, cfg.PodInformer.Informer().HasSynced)
		if c.podIndexer, err = addPodIndex(cfg.PodInformer.Informer()); err != nil {
			klog.InfoS("Listing pods without the label index", "err", err)
		}
	}
	return c, nil
}

// HasSynced reports whether the HPA and pod caches are filled and the
// controller's handler has seen every HPA of the initial list.
func (c *Controller) HasSynced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// Ready reports whether the informer caches have synced and workers run.
func (c *Controller) Ready() bool { return c.ready.Load() }

// Run waits for the informer caches, then reconciles with cfg.Workers
// workers until ctx is done or the Fence refuses. It returns once every
// worker has stopped: nil when ctx ended, an error wrapping ErrNotLeader
// when the fence stopped it.
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	logger := klog.FromContext(ctx)
	logger.Info("Starting HPA controller", "mode", c.cfg.Mode, "workers", c.cfg.Workers, "syncPeriod", c.cfg.SyncPeriod, "dryRun", c.cfg.DryRun)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer func() {
		cancel()
		c.queue.ShutDown()
		wg.Wait()
		c.ready.Store(false)
		logger.Info("Stopped HPA controller")
	}()
	// A refused fence cancels the workers' context first of all.
	go func() {
		select {
		case <-c.lost:
			cancel()
		case <-ctx.Done():
		}
	}()
	if c.cfg.Fence != nil {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(context.Context) {
				if _, err := c.cfg.Fence.ValidUntil(); err != nil {
					c.fenceLost(err)
				}
			}, c.cfg.FencePollInterval)
		})
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		if err := c.lostError(); err != nil {
			return err
		}
		return fmt.Errorf("waiting for HPA and pod caches to sync: %w", ctx.Err())
	}
	for range c.cfg.Workers {
		wg.Go(func() {
			wait.UntilWithContext(ctx, c.worker, time.Second)
		})
	}
	c.ready.Store(true)
	<-ctx.Done()
	return c.lostError()
}

// fenceLost stops the workers because the fence refused (once).
func (c *Controller) fenceLost(err error) {
	c.lostOnce.Do(func() {
		c.lostErr = err
		close(c.lost)
		c.tel.FenceRefusals.Inc()
		klog.ErrorS(err, "Stopping the workers: this replica may no longer write")
	})
}

// lostError returns why the fence stopped the controller, nil if it did not.
func (c *Controller) lostError() error {
	select {
	case <-c.lost:
		return fmt.Errorf("controller stopped: %w", c.lostErr)
	default:
		return nil
	}
}

// writeContext returns the context for one write: bounded by the request
// timeout and by the time the fence allows writes until. When the fence
// refuses, it stops the workers and returns an error wrapping ErrNotLeader.
func (c *Controller) writeContext(ctx context.Context) (context.Context, context.CancelFunc, error) {
	timeout := c.cfg.RequestTimeout
	if c.cfg.Fence != nil {
		until, err := c.cfg.Fence.ValidUntil()
		if err != nil {
			c.fenceLost(err)
			return nil, nil, fmt.Errorf("refusing to write: %w", err)
		}
		if left := until.Sub(c.clock.Now()); left < timeout {
			timeout = left
		}
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	return wctx, cancel, nil
}

// mayWrite reports whether the fence allows a write now (events, which
// take no context); a refusal stops the workers.
func (c *Controller) mayWrite() bool {
	if c.cfg.Fence == nil {
		return true
	}
	if _, err := c.cfg.Fence.ValidUntil(); err != nil {
		c.fenceLost(err)
		return false
	}
	return true
}

// owns reports whether the HPA is the controller's (Selector, Namespaces).
func (c *Controller) owns(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	if len(c.cfg.Namespaces) > 0 && !slices.Contains(c.cfg.Namespaces, hpa.Namespace) {
		return false
	}
	return c.cfg.Selector == nil || c.cfg.Selector.Matches(labels.Set(hpa.Labels))
}

func (c *Controller) addHPA(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("getting key of added HPA: %w", err))
		return
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	// Registered with a selector matching nothing until its reconcile sets
	// the real one, so a reconcile starting now finds it present.
	c.selectors.putIfAbsent(ns, name, labels.Nothing())
	c.queue.Add(key)
}

func (c *Controller) updateHPA(oldObj, curObj any) {
	oldHPA, ok1 := oldObj.(*autoscalingv2.HorizontalPodAutoscaler)
	curHPA, ok2 := curObj.(*autoscalingv2.HorizontalPodAutoscaler)
	// With the HPAGeneration gate the API server bumps metadata.generation
	// on spec changes only: those are reconciled now, status-only updates
	// (our own writes included) wait for the next period.
	if ok1 && ok2 && c.core.Config().Features.ObservedGeneration && oldHPA.Generation != curHPA.Generation {
		c.addHPA(curHPA)
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(curObj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("getting key of updated HPA: %w", err))
		return
	}
	c.queue.AddRateLimited(key)
}

func (c *Controller) deleteHPA(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("getting key of deleted HPA: %w", err))
		return
	}
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	c.queue.Forget(key)
	c.selectors.delete(ns, name)
	// Reconcile now: it finds the HPA gone and drops its state.
	c.queue.Add(key)
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	deleted, err := c.reconcileKey(ctx, key)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Reconciling HPA", "hpa", key)
	}
	// Every HPA comes back one sync period later, whatever happened; a
	// key already waiting keeps its earlier time.
	if !deleted {
		c.queue.AddRateLimited(key)
	}
	if c.reconciled != nil {
		c.reconciled(key)
	}
	return true
}

// reconcileKey reconciles the HPA named by key, or drops its state when it
// no longer exists (deleted reports that).
func (c *Controller) reconcileKey(ctx context.Context, key string) (deleted bool, err error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return true, fmt.Errorf("invalid HPA key %q: %w", key, err)
	}
	hpa, err := c.hpaLister.HorizontalPodAutoscalers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Info("Horizontal Pod Autoscaler has been deleted", "hpa", klog.KRef(ns, name))
		c.dropState(ns, name)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading HPA %s from cache: %w", key, err)
	}
	if !c.owns(hpa) {
		// Not ours (or no longer: its labels changed); forget it, and the
		// next period looks again.
		c.dropState(ns, name)
		c.selectors.putIfAbsent(ns, name, labels.Nothing())
		return false, nil
	}
	e := c.entryFor(key)
	if err := c.ensureFresh(e, hpa); err != nil {
		return false, err
	}
	start := c.clock.Now()
	if c.cfg.Mode == ModeCoexist {
		err = c.reconcileCoexist(ctx, e, hpa)
	} else {
		err = c.reconcile(ctx, e, hpa)
	}
	result := ResultSuccess
	if err != nil {
		result = ResultError
	}
	c.tel.ReconcileDuration.WithLabelValues(result).Observe(c.clock.Since(start).Seconds())
	return false, err
}

// hpaEntry is what the controller keeps per HPA between reconciles.
type hpaEntry struct {
	// state is the decision core's history (recommendations, scale events).
	state autoscaler.State
	// zero is the coexistence mode's state (idle since, failures, phase).
	zero scaletozero.State
	// uid and wroteRV are the HPA's UID and the resourceVersion our last
	// write to it returned, until the informer has caught up with it.
	uid     types.UID
	wroteRV string
}

// entryFor returns the entry of the HPA key, creating it. The workqueue
// hands a key to one worker at a time, so an entry needs no lock of its
// own; the map does.
func (c *Controller) entryFor(key string) *hpaEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.states[key]
	if !ok {
		e = &hpaEntry{}
		c.states[key] = e
		c.tel.HPAs.Set(float64(len(c.states)))
	}
	return e
}

// ensureFresh is upstream's consistency check (StaleControllerConsistencyHPA,
// beta and on in 1.37): after the controller wrote an HPA, it is not
// reconciled again from a cache that has not yet seen that write; the
// reconcile is skipped and comes back a sync period later.
func (c *Controller) ensureFresh(e *hpaEntry, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if e.wroteRV == "" {
		return nil
	}
	if e.uid != hpa.UID {
		e.wroteRV = "" // a new HPA of the same name
		return nil
	}
	readRV := c.hpaStore.LastStoreSyncResourceVersion()
	if readRV == "" {
		return nil
	}
	cmp, err := resourceversion.CompareResourceVersion(e.wroteRV, readRV)
	if err != nil || cmp <= 0 {
		e.wroteRV = ""
		return nil
	}
	return fmt.Errorf("skipping %s/%s: read version %s is not as new as written version %s", hpa.Namespace, hpa.Name, readRV, e.wroteRV)
}

// wrote records the resourceVersion a write to the HPA returned.
func (c *Controller) wrote(e *hpaEntry, updated *autoscalingv2.HorizontalPodAutoscaler) {
	if c.cfg.StaleReadCheck && updated != nil && updated.ResourceVersion != "" {
		e.uid, e.wroteRV = updated.UID, updated.ResourceVersion
	}
}

// dropState forgets everything kept for a deleted HPA.
func (c *Controller) dropState(ns, name string) {
	key := ns + "/" + name
	c.mu.Lock()
	delete(c.states, key)
	c.tel.HPAs.Set(float64(len(c.states)))
	c.mu.Unlock()
	c.selectors.delete(ns, name)
	c.tel.DesiredReplicas.DeleteLabelValues(ns, name)
}

// hasState reports whether state is kept for key.
func (c *Controller) hasState(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.states[key]
	return ok
}
