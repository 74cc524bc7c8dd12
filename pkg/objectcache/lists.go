package objectcache

import (
	"maps"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Bounds of a resource's list cache: past either, it is emptied and
// refilled by the requests that follow (the working set is one entry per
// HPA selector, far below them).
const (
	maxCachedLists = 1024
	maxCachedNames = 1 << 18 // 4 MiB of string headers
)

// resourceCache is the started informer of one resource and the names last
// listed from it by namespace and selector.
//
// An entry is valid while the generation of its namespace (of the whole
// resource for a cluster-wide list) is the one read before it was listed.
// An event handler on the informer bumps the generations when an object is
// added or deleted or its labels change, the only changes that can change a
// list of names by selector; status and other updates (most of a pod's
// events) keep the entries. Handlers run just after the informer's store
// changes, so a list may lag the store by that moment, as the store itself
// lags the API server.
type resourceCache struct {
	inf cache.SharedIndexInformer
	// cacheable is false when the handler could not be added (the
	// informer stopped): lists then always go through the objects.
	cacheable bool

	all atomic.Uint64 // bumped on any change of a name or labels
	ns  sync.Map      // namespace -> *atomic.Uint64, bumped likewise

	mu    sync.RWMutex
	lists map[listKey]cachedList
	names int // total names held in lists
}

// listKey identifies a list: a namespace ("" for all) and the selector's
// canonical text ("" for everything).
type listKey struct {
	namespace, selector string
}

type cachedList struct {
	gen  uint64
	kept *keptNames
}

// keptNames is a kept list of names and, built the first time a request
// needs it, their index (see sampleMatcher): at most one map per list, so
// at most about maxCachedNames entries in all.
type keptNames struct {
	names []string // sorted; shared, never modified
	once  sync.Once
	index map[string]int
}

// nameIndex returns the index of each name in names, built once.
func (k *keptNames) nameIndex() map[string]int {
	k.once.Do(func() {
		k.index = make(map[string]int, len(k.names))
		for i, n := range k.names {
			k.index[n] = i
		}
	})
	return k.index
}

func newResourceCache(gvr schema.GroupVersionResource, inf cache.SharedIndexInformer) *resourceCache {
	rc := &resourceCache{inf: inf, lists: map[listKey]cachedList{}}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: rc.changed,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(metav1.Object)
			n, ok2 := newObj.(metav1.Object)
			if ok1 && ok2 && o.GetName() == n.GetName() && o.GetNamespace() == n.GetNamespace() &&
				maps.Equal(o.GetLabels(), n.GetLabels()) {
				return
			}
			rc.changed(newObj)
		},
		DeleteFunc: rc.changed,
	})
	if err != nil {
		klog.V(2).InfoS("Object lists not cached", "resource", gvr.String(), "err", err)
		return rc
	}
	rc.cacheable = true
	return rc
}

// changed bumps the generations an event about obj invalidates.
func (rc *resourceCache) changed(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, ok := obj.(metav1.Object); ok {
		rc.nsGen(m.GetNamespace()).Add(1)
	} else {
		// Unknown namespace: invalidate every namespace's lists.
		rc.ns.Range(func(_, g any) bool {
			g.(*atomic.Uint64).Add(1)
			return true
		})
	}
	rc.all.Add(1)
}

func (rc *resourceCache) nsGen(namespace string) *atomic.Uint64 {
	if g, ok := rc.ns.Load(namespace); ok {
		return g.(*atomic.Uint64)
	}
	g, _ := rc.ns.LoadOrStore(namespace, new(atomic.Uint64))
	return g.(*atomic.Uint64)
}

// generation returns the current generation of namespace's lists.
func (rc *resourceCache) generation(namespace string) uint64 {
	if namespace == "" {
		return rc.all.Load()
	}
	return rc.nsGen(namespace).Load()
}

// get returns the names listed for key at generation gen.
func (rc *resourceCache) get(key listKey, gen uint64) (*keptNames, bool) {
	rc.mu.RLock()
	l, ok := rc.lists[key]
	rc.mu.RUnlock()
	if !ok || l.gen != gen {
		return nil, false
	}
	return l.kept, true
}

// put keeps names as listed for key at generation gen, unless a list of a
// later generation is already there.
func (rc *resourceCache) put(key listKey, gen uint64, kept *keptNames) {
	names := kept.names
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if old, ok := rc.lists[key]; ok {
		if old.gen > gen {
			return
		}
		rc.names -= len(old.kept.names)
		delete(rc.lists, key)
	}
	if len(rc.lists) >= maxCachedLists || rc.names+len(names) > maxCachedNames {
		clear(rc.lists)
		rc.names = 0
	}
	if len(names) > maxCachedNames {
		return
	}
	rc.lists[key] = cachedList{gen: gen, kept: kept}
	rc.names += len(names)
}
