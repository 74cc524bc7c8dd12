package resourcemetrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/promscaler/promscaler/internal/objmeta"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// PodLister answers which pods the API reports, from a cache.
type PodLister interface {
	// ListPods returns the pods in namespace ("" for all) whose labels
	// match selector.
	ListPods(ctx context.Context, namespace string, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error)
	// GetPod returns one pod, or a NotFound API error.
	GetPod(ctx context.Context, namespace, name string) (*metav1.PartialObjectMetadata, error)
}

// NodeLister answers which nodes the API reports, from a cache.
type NodeLister interface {
	// ListNodes returns the nodes whose labels match selector.
	ListNodes(ctx context.Context, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error)
	// GetNode returns one node, or a NotFound API error.
	GetNode(ctx context.Context, name string) (*metav1.PartialObjectMetadata, error)
}

// PodMetadata holds the metadata of every pod whatever its phase: the
// object cache the custom metrics path lists pods from
// (provider.ObjectCache), shared so that the adapter keeps one copy of
// each pod's labels.
type PodMetadata interface {
	// PodMetadata returns a lookup of pods' metadata by namespace and
	// name (ok false: no such pod in the cache), once the cache holds its
	// first list.
	PodMetadata(ctx context.Context) (lookup func(namespace, name string) (m *metav1.PartialObjectMetadata, ok bool), err error)
	// PodsSynced reports whether the cache holds its first list of pods.
	PodsSynced() bool
}

// Errors of Cache.
var (
	// ErrCacheNotRunning is returned when Cache.Run is not running.
	ErrCacheNotRunning = errors.New("pod and node cache is not running")
	// ErrCacheNotSynced is returned (wrapped) when a cache did not finish
	// its initial list within the sync timeout.
	ErrCacheNotSynced = errors.New("pod and node cache not synced")
)

// DefaultSyncTimeout bounds how long a request waits for the caches'
// initial lists.
const DefaultSyncTimeout = 10 * time.Second

// RunningPodsFieldSelector is the field selector of the pod cache: like
// metrics-server, only Running pods are reported.
const RunningPodsFieldSelector = "status.phase=Running"

var (
	podsGVR  = corev1.SchemeGroupVersion.WithResource("pods")
	nodesGVR = corev1.SchemeGroupVersion.WithResource("nodes")
)

// CacheOptions configure a Cache.
type CacheOptions struct {
	// Resync is the informers' resync period; 0 disables resyncs.
	Resync time.Duration
	// SyncTimeout bounds a request's wait for the initial lists; 0 means
	// DefaultSyncTimeout.
	SyncTimeout time.Duration
}

// Cache is a PodLister and NodeLister. Which pods are Running comes from a
// metadata informer with the field selector status.phase=Running, as in
// metrics-server and prometheus-adapter (a pod's phase is not part of its
// metadata), which keeps only their names; their labels come from the
// shared PodMetadata. Nodes come from a metadata informer keeping names and
// labels. It needs list and watch on pods and nodes.
type Cache struct {
	runningPods, nodes cache.SharedIndexInformer
	meta               PodMetadata
	syncTimeout        time.Duration

	mu      sync.Mutex
	running bool
}

var (
	_ PodLister  = (*Cache)(nil)
	_ NodeLister = (*Cache)(nil)
)

// NewCache returns a Cache listing through client, with the pods' labels
// from meta. Call Run (and run meta).
func NewCache(client metadata.Interface, meta PodMetadata, opts CacheOptions) (*Cache, error) {
	if client == nil {
		return nil, errors.New("resource metrics cache: no metadata client given")
	}
	if meta == nil {
		return nil, errors.New("resource metrics cache: no pod metadata cache given")
	}
	if opts.Resync < 0 || opts.SyncTimeout < 0 {
		return nil, errors.New("resource metrics cache: resync and sync timeout must not be negative")
	}
	st := opts.SyncTimeout
	if st == 0 {
		st = DefaultSyncTimeout
	}
	nsIndex := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	running := metadatainformer.NewFilteredMetadataInformer(client, podsGVR, metav1.NamespaceAll, opts.Resync, nsIndex,
		func(o *metav1.ListOptions) { o.FieldSelector = RunningPodsFieldSelector }).Informer()
	if err := running.SetTransform(objmeta.Identity); err != nil {
		return nil, fmt.Errorf("resource metrics cache: %w", err)
	}
	nodes := metadatainformer.NewFilteredMetadataInformer(client, nodesGVR, metav1.NamespaceAll, opts.Resync, cache.Indexers{}, nil).Informer()
	if err := nodes.SetTransform(objmeta.Strip); err != nil {
		return nil, fmt.Errorf("resource metrics cache: %w", err)
	}
	return &Cache{runningPods: running, nodes: nodes, meta: meta, syncTimeout: st}, nil
}

// Run runs the informers until ctx is done and returns once they stopped.
func (c *Cache) Run(ctx context.Context) {
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()
	var wg sync.WaitGroup
	wg.Go(func() { c.runningPods.RunWithContext(ctx) })
	wg.Go(func() { c.nodes.RunWithContext(ctx) })
	wg.Wait()
}

// HasSynced reports whether the caches hold their initial lists.
func (c *Cache) HasSynced() bool {
	return c.runningPods.HasSynced() && c.nodes.HasSynced() && c.meta.PodsSynced()
}

// ListPods implements PodLister: the Running pods, with their metadata
// from the shared pod cache. A pod the shared cache does not hold yet (its
// watch event is on its way) is left out.
func (c *Cache) ListPods(ctx context.Context, namespace string, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
	if err := c.ready(ctx, "pods", c.runningPods); err != nil {
		return nil, err
	}
	var objs []any
	if namespace == "" {
		objs = c.runningPods.GetStore().List()
	} else {
		var err error
		objs, err = c.runningPods.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
		if err != nil {
			return nil, fmt.Errorf("listing cached pods in namespace %q: %w", namespace, err)
		}
	}
	lookup, err := c.meta.PodMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the pods' metadata: %w", err)
	}
	joined := make([]any, 0, len(objs))
	for _, o := range objs {
		if r, ok := o.(*metav1.PartialObjectMetadata); ok {
			if m, ok := lookup(r.Namespace, r.Name); ok {
				joined = append(joined, m)
			}
		}
	}
	return filterLabels(joined, selector), nil
}

// GetPod implements PodLister: a Running pod, with its metadata from the
// shared pod cache.
func (c *Cache) GetPod(ctx context.Context, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	if err := c.ready(ctx, "pods", c.runningPods); err != nil {
		return nil, err
	}
	gr := schema.GroupResource{Resource: "pods"}
	if _, err := getCached(c.runningPods, namespace+"/"+name, gr, name); err != nil {
		return nil, err
	}
	lookup, err := c.meta.PodMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the pods' metadata: %w", err)
	}
	m, ok := lookup(namespace, name)
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	return m, nil
}

// ListNodes implements NodeLister.
func (c *Cache) ListNodes(ctx context.Context, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
	if err := c.ready(ctx, "nodes", c.nodes); err != nil {
		return nil, err
	}
	return filterLabels(c.nodes.GetStore().List(), selector), nil
}

// GetNode implements NodeLister.
func (c *Cache) GetNode(ctx context.Context, name string) (*metav1.PartialObjectMetadata, error) {
	if err := c.ready(ctx, "nodes", c.nodes); err != nil {
		return nil, err
	}
	return getCached(c.nodes, name, schema.GroupResource{Resource: "nodes"}, name)
}

// ready waits (at most the sync timeout, never beyond ctx) for an
// informer's initial list; a request arriving just before Run started
// waits for it too.
func (c *Cache) ready(ctx context.Context, what string, inf cache.SharedIndexInformer) error {
	if inf.HasSynced() {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, c.syncTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(wctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return inf.HasSynced(), nil
	})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("waiting for the %s cache: %w", what, ctxErr)
		}
		c.mu.Lock()
		running := c.running
		c.mu.Unlock()
		if !running {
			return ErrCacheNotRunning
		}
		return fmt.Errorf("%w: %s not listed within %s (can the adapter list and watch them?)", ErrCacheNotSynced, what, c.syncTimeout)
	}
	return nil
}

func getCached(inf cache.SharedIndexInformer, key string, gr schema.GroupResource, name string) (*metav1.PartialObjectMetadata, error) {
	obj, ok, err := inf.GetStore().GetByKey(key)
	if err != nil {
		return nil, fmt.Errorf("reading cached %s %q: %w", gr.Resource, key, err)
	}
	if !ok {
		return nil, apierrors.NewNotFound(gr, name)
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("cached %s %q is a %T, not object metadata", gr.Resource, key, obj)
	}
	return m, nil
}

func filterLabels(objs []any, selector labels.Selector) []*metav1.PartialObjectMetadata {
	if selector == nil {
		selector = labels.Everything()
	}
	everything := selector.Empty()
	out := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			continue
		}
		if !everything && !selector.Matches(labels.Set(m.Labels)) {
			continue
		}
		out = append(out, m)
	}
	return out
}
