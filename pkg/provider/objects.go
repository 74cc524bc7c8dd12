package provider

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/objectcache"
)

// ObjectLister lists the names of the objects a `*` request is about. The
// provider calls it on every such request, so implementations answer from
// a cache, never with a LIST against the API server: the adapter's
// *objectcache.Cache.
type ObjectLister interface {
	// ListObjects returns the names of the objects of resource gvr in
	// namespace ("" for a cluster-scoped resource, or every namespace)
	// whose labels match selector (nil matches everything), in any order.
	// The caller owns the returned slice.
	ListObjects(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]string, error)
}

// sharedLister is implemented by ObjectLister implementations that can
// hand out names without copying them (objectcache.Cache): the caller must
// not modify them. Along with kept names comes a function returning their
// index (name -> position), built once for all the requests that read
// them; it is nil for names that are not kept.
type sharedLister interface {
	ListObjectsShared(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]string, func() map[string]int, error)
}

var (
	_ ObjectLister = (*objectcache.Cache)(nil)
	_ sharedLister = (*objectcache.Cache)(nil)
)

// listObjects lists the names of the objects of a `*` request, sorted and
// unique, and, when the object cache keeps them, a function returning
// their index (see sharedLister). They may be shared with the object
// cache: read-only.
func (p *Provider) listObjects(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]string, func() map[string]int, error) {
	var names []string
	var index func() map[string]int
	var err error
	sl, shared := p.cfg.Objects.(sharedLister)
	if shared {
		names, index, err = sl.ListObjectsShared(ctx, gvr, namespace, selector)
	} else {
		names, err = p.cfg.Objects.ListObjects(ctx, gvr, namespace, selector)
	}
	if err != nil {
		return nil, nil, err
	}
	if isSortedUnique(names) {
		return names, index, nil
	}
	// Not in the kept order (a list over several namespaces can repeat
	// a name): the index would not match.
	if shared {
		names = slices.Clone(names)
	}
	return sortedUnique(names), nil, nil
}

// isSortedUnique reports whether names are in strictly increasing order.
func isSortedUnique(names []string) bool {
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			return false
		}
	}
	return true
}

// sortedUnique sorts names and removes duplicates in place.
func sortedUnique(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
}
