package provider

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resolve asks mapper for gr's preferred group-version-resource (gr as
// written in the URL: "pods", "pod", "deployments.apps"), kind and scope.
// The mapper is asked on every request: a cache of its answers saved about
// 7 % of the CPU of a pods/* request, below the 10 % a work-around of a
// library must show (docs/performance.md).
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
