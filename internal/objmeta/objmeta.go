// Package objmeta holds what the adapter's metadata informer caches share.
package objmeta

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Strip is an informer transform that keeps what listing by name, namespace
// and label needs (plus the type, UID and resource version informers rely on)
// and drops the rest, so a cache of many objects stays small. Tombstones
// (cache.DeletedFinalStateUnknown) and anything that is not a
// *metav1.PartialObjectMetadata pass through unchanged.
func Strip(obj any) (any, error) { return keep(obj, true), nil }

// Identity is Strip without the labels: the transform of a cache that only
// says which objects exist (the Running pods of metrics.k8s.io), their
// labels being kept in another cache.
func Identity(obj any) (any, error) { return keep(obj, false), nil }

func keep(obj any, withLabels bool) any {
	p, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj
	}
	m := &metav1.PartialObjectMetadata{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            p.Name,
			Namespace:       p.Namespace,
			UID:             p.UID,
			ResourceVersion: p.ResourceVersion,
		},
	}
	if withLabels {
		m.Labels = p.Labels
	}
	return m
}
