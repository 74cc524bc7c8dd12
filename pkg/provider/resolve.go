package provider

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// resolveTTL is how long a resolved group-resource is kept. The cluster's
// RESTMapper is itself rebuilt from discovery only periodically (the
// library's --discovery-interval, 10 minutes by default), so keeping its
// answers a minute more changes little; asking it on every request cost ~7 %
// of the adapter's CPU per pods/* request (its maps are walked three times).
const resolveTTL = time.Minute

// resolution is what resolve answers for a group-resource.
type resolution struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
	expires    time.Time
}

// resolver maps a request's group-resource (as written in the URL: "pods",
// "pod", "deployments.apps") to the preferred group-version-resource, its
// kind and whether it is namespaced, remembering successful answers for
// resolveTTL. Failures are not remembered: a resource the mapper learns
// later resolves on the next request. It is safe for concurrent use.
type resolver struct {
	mapper meta.RESTMapper
	clock  clock.PassiveClock
	// known maps schema.GroupResource to resolution. Bounded by the
	// spellings of the cluster's resources that resolve.
	known sync.Map
}

func newResolver(mapper meta.RESTMapper, clk clock.PassiveClock) *resolver {
	return &resolver{mapper: mapper, clock: clk}
}

func (r *resolver) resolve(gr schema.GroupResource) (schema.GroupVersionResource, schema.GroupVersionKind, bool, error) {
	now := r.clock.Now()
	if v, ok := r.known.Load(gr); ok {
		if res := v.(resolution); now.Before(res.expires) {
			return res.gvr, res.gvk, res.namespaced, nil
		}
	}
	gvr, gvk, namespaced, err := resolve(r.mapper, gr)
	if err != nil {
		r.known.Delete(gr)
		return gvr, gvk, namespaced, err
	}
	r.known.Store(gr, resolution{gvr: gvr, gvk: gvk, namespaced: namespaced, expires: now.Add(resolveTTL)})
	return gvr, gvk, namespaced, nil
}

// resolve asks mapper for gr's preferred group-version-resource, kind and
// scope.
func resolve(mapper meta.RESTMapper, gr schema.GroupResource) (schema.GroupVersionResource, schema.GroupVersionKind, bool, error) {
	gvr, err := mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		return schema.GroupVersionResource{}, schema.GroupVersionKind{}, false, err
	}
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return schema.GroupVersionResource{}, schema.GroupVersionKind{}, false, err
	}
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, schema.GroupVersionKind{}, false, err
	}
	return gvr, gvk, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
