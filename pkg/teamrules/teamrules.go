// Package teamrules serves rules that teams keep in their own namespace:
// ConfigMaps carrying the label promscaler.io/rules=true, each data key
// ending in .yaml (or .yml) a rules file in prometheus-adapter's format.
// Each ConfigMap is a configuration source of its own, compiled confined to
// its namespace (rules.RuleSet.ConfineTo): its metrics are served for
// that namespace only and every query rendered from it carries that
// namespace's matcher on every selector. A ConfigMap that does not load
// keeps its last good rules in service, gets a Warning event, is logged and
// counted with the configuration reload metrics, and never affects the
// other sources.
package teamrules

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/truncate"
	"github.com/promscaler/promscaler/pkg/reload"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/pkg/tenancy"
)

// Label marks a ConfigMap holding team rules; its value must be "true".
const Label = "promscaler.io/rules"

// Selector selects the ConfigMaps holding team rules.
const Selector = Label + "=true"

// Event reasons on a team rules ConfigMap.
const (
	ReasonLoaded   = "RulesLoaded"
	ReasonRejected = "RulesRejected"
)

// loadWorkers is how many ConfigMaps load at once: one ConfigMap's load
// (however long) never holds up another's, nor its deletion.
const loadWorkers = 4

// maxEventMessage bounds an event's message (the API server refuses
// longer notes of events.k8s.io; core events are kept as short).
const maxEventMessage = 1024

// Options select the team rules: where they are watched and which label
// confines their queries.
type Options struct {
	// Namespaces are the namespaces watched; empty means all.
	Namespaces []string
	// NamespaceLabel is the series label carrying the namespace, put on
	// every selector of a team's queries; "" means tenancy.DefaultLabel.
	NamespaceLabel string
	// NamespaceBackends lists, by namespace, the named backends (besides
	// the default one) that namespace's team rules may use
	// (--team-rules-backends). A namespace not listed gets the default
	// backend only.
	NamespaceBackends map[string][]string
	// MaxRulesPerConfigMap bounds the rules (custom and external) of one
	// ConfigMap; 0 means DefaultMaxRulesPerConfigMap.
	MaxRulesPerConfigMap int
	// MaxConfigMaps bounds the team ConfigMaps in service; 0 means
	// DefaultMaxConfigMaps.
	MaxConfigMaps int
}

// Defaults of the team rules limits.
const (
	DefaultMaxRulesPerConfigMap = 100
	DefaultMaxConfigMaps        = 200
)

// Sink receives each ConfigMap's rules: SetTeam installs a new rule set
// for the ConfigMap key ("namespace/name"), or removes it (nil), and
// returns an error, changing nothing, when it cannot be served with the
// other sources.
type Sink interface {
	SetTeam(key string, rs *rules.RuleSet) error
}

// Config configures a Watcher.
type Config struct {
	Options
	// Client reads the ConfigMaps and writes the events.
	Client kubernetes.Interface
	// Mapper resolves the rules' resources.
	Mapper meta.RESTMapper
	// Backends are the backends, besides the default one, that a rule's
	// backend key may name (--backends-config).
	Backends []string
	// Sink receives the rules.
	Sink Sink
	// Metrics receives the reload counters. Required.
	Metrics *metrics.Metrics
	// Recorder records the events; nil means one writing through Client.
	Recorder record.EventRecorder
	// Clock stamps successful loads; nil means the real clock.
	Clock clock.PassiveClock
}

// state is what the watcher knows of one ConfigMap.
type state struct {
	inService [sha256.Size]byte // data of the rules in service
	serving   bool
	rejected  [sha256.Size]byte // last data refused
	hasRej    bool
	// uid is the ConfigMap's; reported are the refusals of its rules in
	// service already recorded (RuleRefused).
	uid      types.UID
	reported map[string]bool
}

// Watcher watches the team rules ConfigMaps and hands their rules to the
// Sink.
type Watcher struct {
	opts     Options
	client   kubernetes.Interface
	mapper   meta.RESTMapper
	backends []string
	sink     Sink
	metrics  *metrics.Metrics
	rejected *prometheus.GaugeVec
	recorder record.EventRecorder
	bcast    record.EventBroadcaster
	clock    clock.PassiveClock
	// load compiles a ConfigMap's rules (Load; a test may slow it down).
	load func(*corev1.ConfigMap) (*rules.RuleSet, []string, error)

	mu     sync.Mutex
	states map[string]*state
}

// New returns a Watcher for cfg; Run starts it.
func New(cfg Config) (*Watcher, error) {
	if cfg.Client == nil || cfg.Mapper == nil || cfg.Sink == nil || cfg.Metrics == nil {
		return nil, errors.New("team rules: client, mapper, sink and metrics are required")
	}
	if cfg.NamespaceLabel == "" {
		cfg.NamespaceLabel = tenancy.DefaultLabel
	}
	if _, err := tenancy.New(cfg.NamespaceLabel, "probe"); err != nil {
		return nil, fmt.Errorf("team rules: %w", err)
	}
	g, err := reload.RejectedGauge(cfg.Metrics.Registry)
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		opts: cfg.Options, client: cfg.Client, mapper: cfg.Mapper, backends: slices.Clone(cfg.Backends), sink: cfg.Sink,
		metrics: cfg.Metrics, rejected: g, recorder: cfg.Recorder, clock: cfg.Clock,
		states: map[string]*state{},
	}
	w.load = func(cm *corev1.ConfigMap) (*rules.RuleSet, []string, error) {
		allowed := w.allowedBackends(cm.Namespace)
		rs, warnings, err := Load(cm, w.mapper, w.opts.NamespaceLabel, allowed)
		if err != nil && len(allowed) < len(w.backends) {
			err = fmt.Errorf("%w (namespace %s's team rules may use the backends %s; --team-rules-backends allows others)",
				err, cm.Namespace, strings.Join(append([]string{"default"}, allowed...), ", "))
		}
		return rs, warnings, err
	}
	if w.opts.MaxRulesPerConfigMap <= 0 {
		w.opts.MaxRulesPerConfigMap = DefaultMaxRulesPerConfigMap
	}
	if w.opts.MaxConfigMaps <= 0 {
		w.opts.MaxConfigMaps = DefaultMaxConfigMaps
	}
	w.opts.Namespaces = slices.Clone(cfg.Namespaces)
	if w.clock == nil {
		w.clock = clock.RealClock{}
	}
	if w.recorder == nil {
		w.bcast = record.NewBroadcaster(record.WithContext(context.Background()))
		w.recorder = w.bcast.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "promscaler-adapter"})
	}
	return w, nil
}

// Run watches the ConfigMaps until ctx ends. The informers' handlers only
// queue a ConfigMap's key; loadWorkers workers load them, each key by one
// worker at a time, so a slow load holds up no other ConfigMap.
func (w *Watcher) Run(ctx context.Context) {
	if w.bcast != nil {
		w.bcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: w.client.CoreV1().Events("")})
		defer w.bcast.Shutdown()
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "team-rules"})
	factories, stores, err := w.informers(queue)
	if err != nil {
		klog.ErrorS(err, "Team rules: adding the ConfigMap handler")
		return
	}
	klog.InfoS("Watching team rules ConfigMaps", "selector", Selector, "namespaces", w.opts.Namespaces, "namespaceLabel", w.opts.NamespaceLabel)
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	var wg sync.WaitGroup
	for range loadWorkers {
		wg.Go(func() {
			for w.processNext(queue, stores) {
			}
		})
	}
	<-ctx.Done()
	queue.ShutDown()
	for _, f := range factories {
		f.Shutdown()
	}
	wg.Wait()
}

// informers builds one informer per watched namespace, queueing the key of
// every labelled ConfigMap added, changed or deleted.
func (w *Watcher) informers(queue workqueue.TypedRateLimitingInterface[string]) ([]informers.SharedInformerFactory, []cache.Store, error) {
	namespaces := w.opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	var factories []informers.SharedInformerFactory
	var stores []cache.Store
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(w.client, 0,
			informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = Selector }))
		inf := f.Core().V1().ConfigMaps().Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue,
		}); err != nil {
			return nil, nil, fmt.Errorf("namespace %q: %w", ns, err)
		}
		factories = append(factories, f)
		stores = append(stores, inf.GetStore())
	}
	return factories, stores, nil
}

// processNext loads (or removes) the next queued ConfigMap; false once the
// queue is shut down.
func (w *Watcher) processNext(queue workqueue.TypedRateLimitingInterface[string], stores []cache.Store) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	for _, s := range stores {
		if obj, ok, err := s.GetByKey(key); err == nil && ok {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				w.Apply(cm)
				return true
			}
		}
	}
	w.Remove(key)
	return true
}

// Apply loads a ConfigMap's rules and hands them to the sink, unless its
// rules data is what is already in service or was already refused. A
// ConfigMap that does not load keeps its previous rules in service.
func (w *Watcher) Apply(cm *corev1.ConfigMap) {
	key := cm.Namespace + "/" + cm.Name
	sum := dataSum(cm)
	if !w.changed(key, sum) {
		return
	}
	// Loaded without the lock: another ConfigMap's load or removal does
	// not wait for this one.
	rs, warnings, err := w.load(cm)
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.states[key]
	if st == nil {
		st = &state{}
		w.states[key] = st
	}
	if err == nil {
		err = w.checkLimits(key, st, rs)
	}
	if err == nil {
		err = w.sink.SetTeam(key, rs)
	}
	if err != nil {
		st.rejected, st.hasRej = sum, true
		kept := "no previous version is in service"
		if st.serving {
			kept = "its previous version stays in service"
		}
		err = fmt.Errorf("team rules ConfigMap %s rejected, %s: %w", key, kept, err)
		w.rejected.WithLabelValues(sourceName(key)).Set(1)
		w.metrics.ConfigReloads.WithLabelValues(metrics.OutcomeFailure).Inc()
		klog.ErrorS(err, "Team rules rejected", "configmap", klog.KObj(cm))
		w.recorder.Event(cm, corev1.EventTypeWarning, ReasonRejected, truncate.String(err.Error(), maxEventMessage))
		return
	}
	st.inService, st.serving, st.hasRej = sum, true, false
	st.uid, st.reported = cm.UID, nil
	w.rejected.WithLabelValues(sourceName(key)).Set(0)
	w.metrics.ConfigReloads.WithLabelValues(metrics.OutcomeSuccess).Inc()
	w.metrics.ConfigLastReloadSuccess.Set(float64(w.clock.Now().Unix()))
	for _, warn := range warnings {
		klog.InfoS("Team rules warning", "configmap", klog.KObj(cm), "warning", warn)
	}
	msg := fmt.Sprintf("%d custom and %d external rules serve namespace %s", len(rs.CustomRules()), len(rs.ExternalRules()), cm.Namespace)
	klog.InfoS("Team rules loaded", "configmap", klog.KObj(cm), "custom", len(rs.CustomRules()), "external", len(rs.ExternalRules()))
	w.recorder.Event(cm, corev1.EventTypeNormal, ReasonLoaded, msg)
}

// RuleRefused records that discovery refused a team rule in service (err
// says why and names the limit) from file (rules.Rule.File:
// configmap/<namespace>/<name>/<key>): a RulesRejected event on its
// ConfigMap and a log line, once per message for each version in service.
func (w *Watcher) RuleRefused(file string, err error) {
	rest, ok := strings.CutPrefix(file, "configmap/")
	parts := strings.SplitN(rest, "/", 3)
	if !ok || len(parts) < 3 {
		return
	}
	key, msg := parts[0]+"/"+parts[1], err.Error()
	w.mu.Lock()
	st := w.states[key]
	if st == nil || !st.serving || st.reported[msg] {
		w.mu.Unlock()
		return
	}
	if st.reported == nil {
		st.reported = map[string]bool{}
	}
	st.reported[msg] = true
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: parts[0], Name: parts[1], UID: st.uid}}
	w.mu.Unlock()
	klog.ErrorS(err, "Team rule refused by discovery", "configmap", klog.KObj(cm))
	w.recorder.Event(cm, corev1.EventTypeWarning, ReasonRejected, truncate.String(msg, maxEventMessage))
}

// allowedBackends are the named backends ns's team rules may use: those of
// Options.NamespaceBackends that the adapter has.
func (w *Watcher) allowedBackends(ns string) []string {
	var out []string
	for _, b := range w.opts.NamespaceBackends[ns] {
		if slices.Contains(w.backends, b) {
			out = append(out, b)
		}
	}
	return out
}

// checkLimits refuses rs for key when it has more rules than
// MaxRulesPerConfigMap, or when key is not in service yet and
// MaxConfigMaps ConfigMaps are. Called with w.mu held.
func (w *Watcher) checkLimits(key string, st *state, rs *rules.RuleSet) error {
	if n := len(rs.CustomRules()) + len(rs.ExternalRules()); n > w.opts.MaxRulesPerConfigMap {
		return fmt.Errorf("%d rules, more than the limit of %d rules per team ConfigMap (--team-rules-max-rules-per-configmap)", n, w.opts.MaxRulesPerConfigMap)
	}
	if st.serving {
		return nil
	}
	serving := 0
	for k, other := range w.states {
		if k != key && other.serving {
			serving++
		}
	}
	if serving >= w.opts.MaxConfigMaps {
		return fmt.Errorf("%d team ConfigMaps are in service, the limit (--team-rules-max-configmaps)", w.opts.MaxConfigMaps)
	}
	return nil
}

// changed reports whether sum is neither the data in service for key nor
// data already refused.
func (w *Watcher) changed(key string, sum [sha256.Size]byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.states[key]
	return st == nil || !((st.serving && sum == st.inService) || (st.hasRej && sum == st.rejected))
}

// Remove takes a deleted (or unlabelled) ConfigMap's rules out of service.
func (w *Watcher) Remove(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.states[key]
	if !ok {
		return
	}
	if st.serving {
		if err := w.sink.SetTeam(key, nil); err != nil {
			klog.ErrorS(err, "Team rules: removing a ConfigMap's rules", "configmap", key)
			return
		}
		klog.InfoS("Team rules removed", "configmap", key)
	}
	delete(w.states, key)
	w.rejected.DeleteLabelValues(sourceName(key))
}

// sourceName names a ConfigMap in logs, rule paths and the file label of
// promscaler_config_file_rejected.
func sourceName(key string) string { return "configmap/" + key }

// Load compiles a ConfigMap's rules, confined to its namespace: each data
// key ending in .yaml or .yml is a rules file (parsed strictly: a query
// Prometheus would reject is an error), named
// configmap/<namespace>/<name>/<key> in errors and rule paths; the files'
// rules are merged in key order. A backend key naming neither the default
// backend nor one of backends is an error at its place.
func Load(cm *corev1.ConfigMap, mapper meta.RESTMapper, namespaceLabel string, backends []string) (*rules.RuleSet, []string, error) {
	prefix := sourceName(cm.Namespace + "/" + cm.Name)
	var files []rules.File
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		if strings.HasSuffix(k, ".yaml") || strings.HasSuffix(k, ".yml") {
			files = append(files, rules.File{Path: prefix + "/" + k, Data: []byte(cm.Data[k])})
		}
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%s: no data key ending in .yaml or .yml", prefix)
	}
	e, err := tenancy.New(namespaceLabel, cm.Namespace)
	if err != nil {
		return nil, nil, err
	}
	loaded, err := rules.Load(files, rules.Options{
		Mapper:   mapper,
		Strict:   rules.Strict(true, ""),
		Backends: backends,
		Confine:  e,
	})
	if err != nil {
		return nil, nil, err
	}
	return loaded.Set, loaded.Warnings, nil
}

// dataSum hashes the ConfigMap's data keys and values.
func dataSum(cm *corev1.ConfigMap) [sha256.Size]byte {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(cm.Data[k]), cm.Data[k])
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
