// Package objectcache is the adapter's one cache of Kubernetes objects: an
// informer per resource, started when a request first needs it, keeping
// only names, namespaces, labels and (for pods) the phase. The custom
// metrics path lists names by label from it (provider), metrics.k8s.io its
// Running pods and its nodes (resourcemetrics).
package objectcache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// DefaultSyncTimeout bounds how long a request waits for the first list of
// a resource it is the first to ask for.
const DefaultSyncTimeout = 10 * time.Second

// podsGVR is the resource whose informer is typed: the one pod watch of the
// adapter, which metrics.k8s.io reads too.
var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// Cache is an ObjectLister over client-go informers: one per
// resource, created the first time a request needs it and kept (watching)
// for the life of Run. Only names, namespaces and labels are kept in memory,
// and for pods their phase (see Strip), so caching every pod of a
// large cluster costs a few hundred bytes per pod.
//
// Pods are watched whole (a pod's phase is not in its metadata), through
// the typed client, so that the custom metrics path (every pod, whatever
// its phase) and metrics.k8s.io (Running pods, through Objects and Object)
// share one watch. Every other resource has a metadata informer: it works
// for any resource the metadata API serves, including cluster-scoped ones
// (nodes, namespaces, persistentvolumes) and custom resources.
type Cache struct {
	factory     metadatainformer.SharedInformerFactory
	pods        informers.SharedInformerFactory
	syncTimeout time.Duration

	running atomic.Bool
	started sync.Map // schema.GroupVersionResource -> *resourceCache

	mu  sync.Mutex      // serialises starting informers and Run's state changes
	ctx context.Context // Run's context
}

// Options configure an Cache.
type Options struct {
	// Resync is the informers' resync period; 0 disables resyncs (the
	// watch keeps the cache current).
	Resync time.Duration
	// SyncTimeout bounds the wait for a resource's first list;
	// 0 means DefaultSyncTimeout.
	SyncTimeout time.Duration
}

// New returns an Cache listing pods through kube and every
// other resource through client. Call Run.
func New(client metadata.Interface, kube kubernetes.Interface, opts Options) (*Cache, error) {
	if client == nil || kube == nil {
		return nil, errors.New("object cache: a metadata client and a Kubernetes client are required")
	}
	if opts.Resync < 0 || opts.SyncTimeout < 0 {
		return nil, errors.New("object cache: resync and sync timeout must not be negative")
	}
	st := opts.SyncTimeout
	if st == 0 {
		st = DefaultSyncTimeout
	}
	return &Cache{
		factory:     metadatainformer.NewSharedInformerFactoryWithOptions(client, opts.Resync, metadatainformer.WithTransform(Strip)),
		pods:        informers.NewSharedInformerFactoryWithOptions(kube, opts.Resync, informers.WithTransform(Strip)),
		syncTimeout: st,
	}, nil
}

// informer returns the informer of gvr, created (not started) on first use.
func (c *Cache) informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	if gvr == podsGVR {
		return c.pods.Core().V1().Pods().Informer()
	}
	return c.factory.ForResource(gvr).Informer()
}

// start starts the informers created and not started yet.
func (c *Cache) start() {
	c.factory.Start(c.ctx.Done())
	c.pods.Start(c.ctx.Done())
}

// Run makes the cache serve until ctx is done, then stops every informer
// and returns once their goroutines have ended. Informers are started on
// first use of a resource by ListObjects, or ahead of use by Warm.
func (c *Cache) Run(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	c.running.Store(true)
	// Start the informers Warm asked for before Run.
	c.start()
	c.mu.Unlock()

	<-ctx.Done()

	c.mu.Lock()
	c.running.Store(false)
	c.mu.Unlock()
	c.factory.Shutdown()
	c.pods.Shutdown()
}

// Warm starts the informer of gvr (when Run is running; else as soon as it
// starts) without waiting for its first list, so that the first request
// for that resource does not wait for it: pods, which nearly every HPA
// asks for, are worth warming at start.
func (c *Cache) Warm(gvr schema.GroupVersionResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inf := c.informer(gvr)
	if c.running.Load() {
		c.start()
		if _, ok := c.started.Load(gvr); !ok {
			c.started.Store(gvr, newResourceCache(gvr, inf))
		}
	}
}

// resource returns the started informer of gvr and its list cache.
func (c *Cache) resource(gvr schema.GroupVersionResource) (*resourceCache, error) {
	if !c.running.Load() {
		return nil, ErrNotRunning
	}
	if rc, ok := c.started.Load(gvr); ok {
		return rc.(*resourceCache), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running.Load() {
		return nil, ErrNotRunning
	}
	if rc, ok := c.started.Load(gvr); ok {
		return rc.(*resourceCache), nil
	}
	inf := c.informer(gvr)
	c.start()
	rc := newResourceCache(gvr, inf)
	c.started.Store(gvr, rc)
	return rc, nil
}

// ListObjects lists the names of the objects of gvr in namespace ("" for
// a cluster-scoped resource, or every namespace) whose labels match
// selector (nil matches everything), from the informer cache. The first
// call for a resource starts its informer and waits (at most the sync
// timeout, and never beyond ctx) for its initial list.
//
// The names are returned sorted. The names listed for a namespace and
// selector are kept and given again, without going through the informer's
// objects, until an object of the namespace is added or deleted or has its
// labels changed (see resourceCache): an HPA asks the same question every
// sync period, and a `*` request over 5,000 pods would otherwise match
// 5,000 label sets each time.
func (c *Cache) ListObjects(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]string, error) {
	names, kept, err := c.list(ctx, gvr, namespace, selector)
	if kept != nil {
		return slices.Clone(kept.names), nil
	}
	return names, err
}

// ListObjectsShared is ListObjects without the copy
// of a kept list, and with the index of its names kept too.
func (c *Cache) ListObjectsShared(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]string, func() map[string]int, error) {
	names, kept, err := c.list(ctx, gvr, namespace, selector)
	if kept != nil {
		return kept.names, kept.nameIndex, nil
	}
	return names, nil, err
}

// list lists the names of ListObjects, sorted: in kept (shared, read-only)
// when the list can be kept, else in names (the caller's).
func (c *Cache) list(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) (names []string, kept *keptNames, err error) {
	rc, err := c.synced(ctx, gvr)
	if err != nil {
		return nil, nil, err
	}
	if selector == nil {
		selector = labels.Everything()
	}
	everything := selector.Empty()
	key := listKey{namespace: namespace}
	if !everything {
		key.selector = selector.String()
	}
	// labels.Nothing() prints as "" too: only a selector with a text of its
	// own, or the empty one, identifies its answer.
	cacheable := rc.cacheable && (everything || key.selector != "")
	var gen uint64
	if cacheable {
		// Read before listing: an event while listing makes the entry
		// stale at once.
		gen = rc.generation(namespace)
		if k, ok := rc.get(key, gen); ok {
			return nil, k, nil
		}
	}
	names, err = listNames(rc.inf, gvr, namespace, selector, everything)
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(names)
	if cacheable {
		k := &keptNames{names: names}
		rc.put(key, gen, k)
		return nil, k, nil
	}
	return names, nil, nil
}

// listNames lists the names of the informer's objects in namespace (every
// namespace when "") that selector matches.
func listNames(inf cache.SharedIndexInformer, gvr schema.GroupVersionResource, namespace string, selector labels.Selector, everything bool) ([]string, error) {
	objs, err := cached(inf, gvr, namespace)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		m, ok := o.(metav1.Object)
		if !ok {
			continue
		}
		if !everything && !selector.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		names = append(names, m.GetName())
	}
	return names, nil
}

// cached returns the informer's objects in namespace (every namespace when
// "").
func cached(inf cache.SharedIndexInformer, gvr schema.GroupVersionResource, namespace string) ([]any, error) {
	if namespace == "" {
		return inf.GetStore().List(), nil
	}
	objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, fmt.Errorf("listing cached %s in namespace %q: %w", gvr.GroupResource(), namespace, err)
	}
	return objs, nil
}

// Objects returns the cached objects of gvr in namespace ("" for every
// namespace, or a cluster-scoped resource), in any order, waiting for the
// first list as ListObjects does. Pods come with their phase, whatever it
// is. The objects are the cache's own: read-only.
func (c *Cache) Objects(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]*Object, error) {
	rc, err := c.synced(ctx, gvr)
	if err != nil {
		return nil, err
	}
	objs, err := cached(rc.inf, gvr, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]*Object, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*Object); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// Object returns the cached object of gvr named name in namespace ("" for
// a cluster-scoped resource), nil when there is none, waiting for the first
// list as ListObjects does. The object is the cache's own: read-only.
func (c *Cache) Object(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*Object, error) {
	rc, err := c.synced(ctx, gvr)
	if err != nil {
		return nil, err
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := rc.inf.GetStore().GetByKey(key)
	if err != nil {
		return nil, fmt.Errorf("reading cached %s %q: %w", gvr.GroupResource(), key, err)
	}
	m, _ := obj.(*Object)
	if !ok || m == nil {
		return nil, nil
	}
	return m, nil
}

// Synced reports whether the informer of gvr holds its first list,
// starting it when Run is running and it has not started yet.
func (c *Cache) Synced(gvr schema.GroupVersionResource) bool {
	rc, err := c.resource(gvr)
	return err == nil && rc.inf.HasSynced()
}

// synced returns the started informer of gvr once it holds its first list.
func (c *Cache) synced(ctx context.Context, gvr schema.GroupVersionResource) (*resourceCache, error) {
	rc, err := c.resource(gvr)
	if err != nil {
		return nil, err
	}
	if !rc.inf.HasSynced() {
		if err := c.waitSynced(ctx, gvr, rc.inf); err != nil {
			return nil, err
		}
	}
	return rc, nil
}

func (c *Cache) waitSynced(ctx context.Context, gvr schema.GroupVersionResource, inf cache.SharedIndexInformer) error {
	wctx, cancel := context.WithTimeout(ctx, c.syncTimeout)
	defer cancel()
	start := time.Now()
	err := wait.PollUntilContextCancel(wctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return inf.HasSynced(), nil
	})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("waiting for the %s cache: %w", gvr.GroupResource(), ctxErr)
		}
		return fmt.Errorf("%w: %s not listed within %s (can the adapter list and watch them?)", ErrNotSynced, gvr.GroupResource(), c.syncTimeout)
	}
	klog.V(2).InfoS("Object cache synced", "resource", gvr.String(), "duration", time.Since(start))
	return nil
}
