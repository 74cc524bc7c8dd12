package provider

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podsGVR is the resource of the pod cache that metrics.k8s.io shares.
var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// PodMetadata returns a lookup of the cached metadata (name, namespace,
// labels) of pods by namespace and name, whatever their phase, once the
// pod cache holds its first list (it waits for it as ListObjects does).
// The resource metrics API (pkg/resourcemetrics) reads pod labels here, so
// that the adapter keeps one copy of every pod's metadata.
func (c *ObjectCache) PodMetadata(ctx context.Context) (func(namespace, name string) (*metav1.PartialObjectMetadata, bool), error) {
	rc, err := c.resource(podsGVR)
	if err != nil {
		return nil, err
	}
	if !rc.inf.HasSynced() {
		if err := c.waitSynced(ctx, podsGVR, rc.inf); err != nil {
			return nil, err
		}
	}
	store := rc.inf.GetStore()
	return func(namespace, name string) (*metav1.PartialObjectMetadata, bool) {
		obj, ok, err := store.GetByKey(namespace + "/" + name)
		if err != nil || !ok {
			return nil, false
		}
		m, ok := obj.(*metav1.PartialObjectMetadata)
		return m, ok
	}, nil
}

// PodsSynced reports whether the pod cache holds its first list, starting
// it when Run is running and it has not started yet.
func (c *ObjectCache) PodsSynced() bool {
	rc, err := c.resource(podsGVR)
	return err == nil && rc.inf.HasSynced()
}
