package objectcache_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/promscaler/promscaler/pkg/objectcache"
	"github.com/promscaler/promscaler/pkg/objectcache/cachetest"
)

func TestObjectCacheListsFromInformers(t *testing.T) {
	web := map[string]string{"app": "web"}
	c, client := cachetest.Run(t, objectcache.Options{},
		cachetest.Partial("v1", "Pod", "shop", "web-2", web),
		cachetest.Partial("v1", "Pod", "shop", "web-1", web),
		cachetest.Partial("v1", "Pod", "shop", "db-1", map[string]string{"app": "db"}),
		cachetest.Partial("v1", "Pod", "blog", "b-1", web),
		cachetest.Partial("v1", "Node", "", "n1", map[string]string{"role": "worker"}),
		cachetest.Partial("v1", "Node", "", "n2", nil),
		cachetest.Partial("kueue.x-k8s.io/v1beta1", "ClusterQueue", "", "cq-a", nil),
	)
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	cqs := schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "clusterqueues"}
	tests := []struct {
		name      string
		gvr       schema.GroupVersionResource
		namespace string
		selector  string
		want      []string
	}{
		{"pods of a namespace by label", pods, "shop", "app=web", []string{"web-1", "web-2"}},
		{"every pod of a namespace", pods, "shop", "", []string{"db-1", "web-1", "web-2"}},
		{"other namespace", pods, "blog", "app=web", []string{"b-1"}},
		{"empty namespace", pods, "ops", "", []string{}},
		{"nodes (cluster-scoped) by label", nodes, "", "role=worker", []string{"n1"}},
		{"every node", nodes, "", "", []string{"n1", "n2"}},
		{"cluster-scoped custom resource", cqs, "", "", []string{"cq-a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.ListObjects(context.Background(), tc.gvr, tc.namespace, mustSelector(t, tc.selector))
			if err != nil {
				t.Fatalf("ListObjects: %v", err)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}

	// Requests are answered from the cache: one LIST (and one WATCH) per
	// resource, whatever the number of requests.
	for range 50 {
		if _, err := c.ListObjects(context.Background(), pods, "shop", mustSelector(t, "app=web")); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(map[string]int{"pods": 1, "nodes": 1, "clusterqueues": 1}, client.Lists()); diff != "" {
		t.Errorf("LIST calls per resource (-want +got):\n%s", diff)
	}

	// The cache follows the cluster (through the watch).
	if _, err := client.Kube.CoreV1().Pods("shop").Create(context.Background(),
		cachetest.AsPod(cachetest.Partial("v1", "Pod", "shop", "web-3", web)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.ListObjects(context.Background(), pods, "shop", mustSelector(t, "app=web"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new pod never appeared in the cache: %v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestObjectCacheNotRunning(t *testing.T) {
	client := cachetest.NewCluster(t)
	c, err := objectcache.New(client.Meta, client.Kube, objectcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListObjects(context.Background(), schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "a", nil)
	if !errors.Is(err, objectcache.ErrNotRunning) {
		t.Errorf("ListObjects before Run: error = %v, want ErrCacheNotRunning", err)
	}
}

func TestObjectCacheSyncTimeout(t *testing.T) {
	c, client := cachetest.Run(t, objectcache.Options{SyncTimeout: 100 * time.Millisecond})
	// A resource the adapter may not list: the informer never syncs.
	client.Meta.PrependReactor("list", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	_, err := c.ListObjects(context.Background(), schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "a", nil)
	if !errors.Is(err, objectcache.ErrNotSynced) {
		t.Errorf("ListObjects of an unlistable resource: error = %v, want ErrCacheNotSynced", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	client := cachetest.NewCluster(t)
	if _, err := objectcache.New(nil, client.Kube, objectcache.Options{}); err == nil {
		t.Error("objectcache.New(nil metadata client) succeeded")
	}
	if _, err := objectcache.New(client.Meta, nil, objectcache.Options{}); err == nil {
		t.Error("objectcache.New(nil Kubernetes client) succeeded")
	}
	if _, err := objectcache.New(client.Meta, client.Kube, objectcache.Options{Resync: -1}); err == nil {
		t.Error("objectcache.New(negative resync) succeeded")
	}
}

func TestObjectCacheWarmBeforeRun(t *testing.T) {
	client := cachetest.NewCluster(t, cachetest.Partial("v1", "Node", "", "n1", nil))
	c, err := objectcache.New(client.Meta, client.Kube, objectcache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	c.Warm(nodes) // before Run: started when Run starts
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if client.Lists()["nodes"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("warmed informer never listed nodes")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestObjectCacheListsFollowChanges checks that the lists kept by
// namespace and selector follow adds, deletes and label changes, in the
// namespace asked and cluster-wide, and that callers own what they get.
func TestObjectCacheListsFollowChanges(t *testing.T) {
	web := map[string]string{"app": "web"}
	c, client := cachetest.Run(t, objectcache.Options{},
		cachetest.Partial("v1", "Pod", "shop", "web-2", web),
		cachetest.Partial("v1", "Pod", "shop", "web-1", web),
		cachetest.Partial("v1", "Pod", "shop", "db-1", map[string]string{"app": "db"}),
		cachetest.Partial("v1", "Pod", "blog", "web-1", web),
	)
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	shop := client.Kube.CoreV1().Pods("shop")
	ctx := context.Background()

	list := func(ns, sel string) []string {
		t.Helper()
		var s labels.Selector
		switch sel {
		case "<nothing>":
			s = labels.Nothing()
		case "<nil>":
		default:
			s = mustSelector(t, sel)
		}
		got, err := c.ListObjects(ctx, pods, ns, s)
		if err != nil {
			t.Fatalf("ListObjects(%q, %q): %v", ns, sel, err)
		}
		return got
	}
	// eventually waits for the watch to deliver a change.
	eventually := func(ns, sel string, want []string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := list(ns, sel)
			if cmp.Equal(want, got) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("ListObjects(%q, %q) = %v, want %v", ns, sel, got, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	check := func(ns, sel string, want []string) {
		t.Helper()
		if diff := cmp.Diff(want, list(ns, sel)); diff != "" {
			t.Errorf("ListObjects(%q, %q) (-want +got):\n%s", ns, sel, diff)
		}
	}

	check("shop", "app=web", []string{"web-1", "web-2"})
	check("shop", "", []string{"db-1", "web-1", "web-2"})
	check("shop", "<nil>", []string{"db-1", "web-1", "web-2"})
	check("shop", "<nothing>", []string{})
	check("", "app=web", []string{"web-1", "web-1", "web-2"})

	// The caller owns the slice.
	got := list("shop", "app=web")
	got[0] = "mutated"
	check("shop", "app=web", []string{"web-1", "web-2"})

	// An add, in the namespace and cluster-wide.
	if _, err := shop.Create(ctx, cachetest.AsPod(cachetest.Partial("v1", "Pod", "shop", "web-3", web)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("shop", "app=web", []string{"web-1", "web-2", "web-3"})
	eventually("", "app=web", []string{"web-1", "web-1", "web-2", "web-3"})
	check("blog", "app=web", []string{"web-1"})

	// A label change takes a pod out of one selector and into another.
	if _, err := shop.Update(ctx, cachetest.AsPod(cachetest.Partial("v1", "Pod", "shop", "web-2", map[string]string{"app": "db"})), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("shop", "app=web", []string{"web-1", "web-3"})
	eventually("shop", "app=db", []string{"db-1", "web-2"})
	eventually("", "app=web", []string{"web-1", "web-1", "web-3"})

	// An update that keeps the labels (a phase change here) changes
	// nothing.
	same := cachetest.AsPod(cachetest.Partial("v1", "Pod", "shop", "web-1", web))
	same.Status.Phase = corev1.PodSucceeded
	if _, err := shop.Update(ctx, same, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	check("shop", "app=web", []string{"web-1", "web-3"})

	// A delete.
	if err := shop.Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("shop", "app=web", []string{"web-3"})
	eventually("shop", "", []string{"db-1", "web-2", "web-3"})
	eventually("", "app=web", []string{"web-1", "web-3"})
	check("blog", "app=web", []string{"web-1"})
}

// Objects and Object read the same informers as ListObjects, pods with
// their phase.
func TestObjectCacheObjects(t *testing.T) {
	pending := cachetest.AsPod(cachetest.Partial("v1", "Pod", "shop", "web-2", nil))
	pending.Status.Phase = corev1.PodPending
	c, client := cachetest.Run(t, objectcache.Options{},
		cachetest.Partial("v1", "Pod", "shop", "web-1", map[string]string{"app": "web"}),
		cachetest.Partial("v1", "Node", "", "n1", map[string]string{"role": "worker"}))
	if _, err := client.Kube.CoreV1().Pods("shop").Create(context.Background(), pending, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		objs, err := c.Objects(ctx, pods, "shop")
		if err != nil {
			t.Fatalf("Objects: %v", err)
		}
		got := map[string]corev1.PodPhase{}
		for _, o := range objs {
			got[o.Name] = o.Phase
		}
		want := map[string]corev1.PodPhase{"web-1": corev1.PodRunning, "web-2": corev1.PodPending}
		if cmp.Equal(want, got) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods of shop and their phases = %v, want %v", got, want)
		}
	}
	if o, err := c.Object(ctx, pods, "shop", "web-1"); err != nil || o == nil || o.Labels["app"] != "web" || len(o.Annotations) != 0 {
		t.Errorf("Object(shop/web-1) = %+v, %v; want it with its labels, without annotations", o, err)
	}
	if o, err := c.Object(ctx, pods, "ops", "web-1"); err != nil || o != nil {
		t.Errorf("Object(ops/web-1) = %+v, %v; want nil, nil", o, err)
	}
	if o, err := c.Object(ctx, nodes, "", "n1"); err != nil || o == nil || o.Labels["role"] != "worker" {
		t.Errorf("Object(n1) = %+v, %v", o, err)
	}
	if !c.Synced(pods) || !c.Synced(nodes) {
		t.Error("Synced = false after reads")
	}
}

func mustSelector(t testing.TB, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}
