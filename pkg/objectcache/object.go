package objectcache

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Errors of the object cache.
var (
	// ErrNotRunning is returned before the cache runs or after it
	// stopped.
	ErrNotRunning = errors.New("object cache is not running")
	// ErrNotSynced is returned (wrapped) when a resource's cache did
	// not finish its first list within the sync timeout (for instance
	// because RBAC forbids listing the resource).
	ErrNotSynced = errors.New("object cache not synced")
)

// Object is what the cache keeps of an object: its name, namespace, UID,
// resource version and labels, and for a pod its phase (a pod's phase is
// not in its metadata: pods are watched whole and stripped to this).
// Cached objects are shared: read-only.
type Object struct {
	metav1.PartialObjectMetadata
	// Phase is a pod's status.phase; "" for other resources.
	Phase corev1.PodPhase
}

// DeepCopyObject implements runtime.Object, keeping the phase.
func (o *Object) DeepCopyObject() runtime.Object {
	c := &Object{Phase: o.Phase}
	o.PartialObjectMetadata.DeepCopyInto(&c.PartialObjectMetadata)
	return c
}

// Strip is the cache's informer transform: a *metav1.PartialObjectMetadata
// or a *corev1.Pod becomes an *Object keeping only what listing by name,
// namespace, label and (for pods) phase needs, so that a cache of many
// objects stays small. Anything else (tombstones,
// cache.DeletedFinalStateUnknown) passes through unchanged.
func Strip(obj any) (any, error) {
	var m *metav1.ObjectMeta
	var phase corev1.PodPhase
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		m = &o.ObjectMeta
	case *corev1.Pod:
		m, phase = &o.ObjectMeta, o.Status.Phase
	default:
		return obj, nil
	}
	return &Object{
		PartialObjectMetadata: metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name:            m.Name,
			Namespace:       m.Namespace,
			UID:             m.UID,
			ResourceVersion: m.ResourceVersion,
			Labels:          m.Labels,
		}},
		Phase: phase,
	}, nil
}
