package resourcemetrics

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/objectcache"
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

// Objects is the adapter's object cache (a *objectcache.Cache), which
// the custom metrics path lists from too: the adapter watches pods and
// nodes once.
type Objects interface {
	// Objects returns the cached objects of gvr in namespace ("" for
	// all), pods with their phase, once the cache holds its first list.
	Objects(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]*objectcache.Object, error)
	// Object returns one cached object, nil when there is none.
	Object(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*objectcache.Object, error)
}

var (
	podsGVR  = corev1.SchemeGroupVersion.WithResource("pods")
	nodesGVR = corev1.SchemeGroupVersion.WithResource("nodes")
)

// objectLister is a PodLister and NodeLister over the adapter's object
// cache. Like metrics-server and prometheus-adapter, it reports only Running
// pods (the object cache holds pods of every phase).
type objectLister struct {
	objects Objects
}

var (
	_ PodLister  = objectLister{}
	_ NodeLister = objectLister{}
)

// ListPods implements PodLister: the Running pods.
func (c objectLister) ListPods(ctx context.Context, namespace string, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
	return c.list(ctx, podsGVR, namespace, selector)
}

// GetPod implements PodLister: a Running pod.
func (c objectLister) GetPod(ctx context.Context, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	return c.get(ctx, podsGVR, namespace, name)
}

// ListNodes implements NodeLister.
func (c objectLister) ListNodes(ctx context.Context, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
	return c.list(ctx, nodesGVR, "", selector)
}

// GetNode implements NodeLister.
func (c objectLister) GetNode(ctx context.Context, name string) (*metav1.PartialObjectMetadata, error) {
	return c.get(ctx, nodesGVR, "", name)
}

// reported reports whether the API reports o: every node, the Running pods.
func reported(gvr schema.GroupVersionResource, o *objectcache.Object) bool {
	return gvr != podsGVR || o.Phase == corev1.PodRunning
}

func (c objectLister) list(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
	objs, err := c.objects.Objects(ctx, gvr, namespace)
	if err != nil {
		return nil, err
	}
	if selector == nil {
		selector = labels.Everything()
	}
	everything := selector.Empty()
	out := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		if reported(gvr, o) && (everything || selector.Matches(labels.Set(o.Labels))) {
			out = append(out, &o.PartialObjectMetadata)
		}
	}
	return out, nil
}

func (c objectLister) get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	o, err := c.objects.Object(ctx, gvr, namespace, name)
	if err != nil {
		return nil, err
	}
	if o == nil || !reported(gvr, o) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: gvr.Resource}, name)
	}
	return &o.PartialObjectMetadata, nil
}
