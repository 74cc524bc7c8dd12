package provider_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/provider"
)

// The pod metadata metrics.k8s.io shares: one pod by name, stripped like
// every cached object, from the same informer ListObjects reads.
func TestObjectCachePodMetadata(t *testing.T) {
	c, client := runCache(t, provider.ObjectCacheOptions{},
		partial("v1", "Pod", "shop", "web-1", map[string]string{"app": "web"}),
		partial("v1", "Pod", "ops", "agent", map[string]string{"app": "agent"}))
	ctx := context.Background()
	lookup, err := c.PodMetadata(ctx)
	if err != nil {
		t.Fatalf("PodMetadata: %v", err)
	}
	m, ok := lookup("shop", "web-1")
	if !ok {
		t.Fatal("no metadata for pod shop/web-1")
	}
	want := metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: map[string]string{"app": "web"}}
	if diff := cmp.Diff(want, m.ObjectMeta); diff != "" {
		t.Errorf("pod metadata (-want +got):\n%s", diff)
	}
	if _, ok := lookup("shop", "agent"); ok {
		t.Error("pod shop/agent found; it is in namespace ops")
	}
	if !c.PodsSynced() {
		t.Error("PodsSynced = false after a lookup")
	}
	if _, err := c.ListObjects(ctx, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "", nil); err != nil {
		t.Fatal(err)
	}
	lists := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("pods listed %d times by PodMetadata and ListObjects, want 1 (one informer)", lists)
	}
}
