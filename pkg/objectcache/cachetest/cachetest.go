// Package cachetest runs an objectcache.Cache over a fake API server, for
// the tests of the packages reading the cache.
package cachetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/promscaler/promscaler/pkg/objectcache"
)

// Partial is an object's metadata, with the fields the cache drops
// (annotations, managed fields) set.
func Partial(apiVersion, kind, ns, name string, lbls map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, Labels: lbls,
			Annotations:   map[string]string{"big": "annotation"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
	}
}

// AsPod is the pod p describes, in phase Running.
func AsPod(p *metav1.PartialObjectMetadata) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: p.ObjectMeta, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// Cluster is the fake API server of a Cache: pods are listed through the
// typed client, everything else through the metadata client.
type Cluster struct {
	Meta *metadatafake.FakeMetadataClient
	Kube *kubefake.Clientset
}

// NewCluster is a Cluster serving objs (PartialObjectMetadata of kind
// Pod are served as Running pods).
func NewCluster(t testing.TB, objs ...runtime.Object) *Cluster {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var pods, others []runtime.Object
	for _, o := range objs {
		if p, ok := o.(*metav1.PartialObjectMetadata); ok && p.Kind == "Pod" {
			pods = append(pods, AsPod(p))
		} else {
			others = append(others, o)
		}
	}
	return &Cluster{Meta: metadatafake.NewSimpleMetadataClient(scheme, others...), Kube: kubefake.NewClientset(pods...)}
}

// Lists counts the LIST calls by resource.
func (f *Cluster) Lists() map[string]int {
	n := map[string]int{}
	for _, a := range append(f.Meta.Actions(), f.Kube.Actions()...) {
		if a.GetVerb() == "list" {
			n[a.GetResource().Resource]++
		}
	}
	return n
}

// Run starts a Cache over objs (pods given as
// PartialObjectMetadata of kind Pod are Running pods) and stops it (waiting
// for its informers) at the end of the test.
func Run(t testing.TB, opts objectcache.Options, objs ...runtime.Object) (*objectcache.Cache, *Cluster) {
	t.Helper()
	client := NewCluster(t, objs...)
	c, err := objectcache.New(client.Meta, client.Kube, opts)
	if err != nil {
		t.Fatalf("objectcache.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	// Run marks the cache running asynchronously; wait for it.
	deadline := time.Now().Add(10 * time.Second)
	probe := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for {
		_, err := c.ListObjects(context.Background(), probe, "", nil)
		if !errors.Is(err, objectcache.ErrNotRunning) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("object cache did not start")
		}
		time.Sleep(time.Millisecond)
	}
	return c, client
}
