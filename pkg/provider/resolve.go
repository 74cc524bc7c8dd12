package provider

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// resolve asks mapper for gr's preferred group-version-resource (gr as
// written in the URL: "pods", "pod", "deployments.apps") and kind. The
// mapper is asked on every request: a cache of its answers saved about 7 %
// of the CPU of a pods/* request, below the 10 % a work-around of a library
// must show (docs/performance.md).
func resolve(mapper meta.RESTMapper, gr schema.GroupResource) (schema.GroupVersionResource, schema.GroupVersionKind, error) {
	gvr, err := mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		return schema.GroupVersionResource{}, schema.GroupVersionKind{}, err
	}
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return schema.GroupVersionResource{}, schema.GroupVersionKind{}, err
	}
	return gvr, gvk, nil
}

// namespaced reports whether mapper says the kind is namespaced; false
// when it cannot tell. Only the answers explaining a missing metric need
// it: each mapping allocates a few kilobytes in the library's mappers
// (an error per API group asked), which a request pays in garbage
// collection.
func namespaced(mapper meta.RESTMapper, gvk schema.GroupVersionKind) bool {
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil && m.Scope.Name() == meta.RESTScopeNameNamespace
}
