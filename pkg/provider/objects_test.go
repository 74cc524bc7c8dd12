package provider_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/promscaler/promscaler/pkg/provider"
)

func partial(apiVersion, kind, ns, name string, lbls map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, Labels: lbls,
			Annotations:   map[string]string{"big": "annotation"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
	}
}

// asPod is the pod p describes, in phase Running.
func asPod(p *metav1.PartialObjectMetadata) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: p.ObjectMeta, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// fakeCluster is the fake API server of an ObjectCache: pods are listed
// through the typed client, everything else through the metadata client.
type fakeCluster struct {
	meta *metadatafake.FakeMetadataClient
	kube *kubefake.Clientset
}

func newFakeCluster(t testing.TB, objs ...runtime.Object) *fakeCluster {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var pods, others []runtime.Object
	for _, o := range objs {
		if p, ok := o.(*metav1.PartialObjectMetadata); ok && p.Kind == "Pod" {
			pods = append(pods, asPod(p))
		} else {
			others = append(others, o)
		}
	}
	return &fakeCluster{meta: metadatafake.NewSimpleMetadataClient(scheme, others...), kube: kubefake.NewClientset(pods...)}
}

// lists counts the LIST calls by resource.
func (f *fakeCluster) lists() map[string]int {
	n := map[string]int{}
	for _, a := range append(f.meta.Actions(), f.kube.Actions()...) {
		if a.GetVerb() == "list" {
			n[a.GetResource().Resource]++
		}
	}
	return n
}

// runCache starts an ObjectCache over objs (pods given as
// PartialObjectMetadata of kind Pod are Running pods) and stops it (waiting
// for its informers) at the end of the test.
func runCache(t testing.TB, opts provider.ObjectCacheOptions, objs ...runtime.Object) (*provider.ObjectCache, *fakeCluster) {
	t.Helper()
	client := newFakeCluster(t, objs...)
	c, err := provider.NewObjectCache(client.meta, client.kube, opts)
	if err != nil {
		t.Fatalf("NewObjectCache: %v", err)
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
		if !errors.Is(err, provider.ErrCacheNotRunning) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("object cache did not start")
		}
		time.Sleep(time.Millisecond)
	}
	return c, client
}

func TestObjectCacheListsFromInformers(t *testing.T) {
	web := map[string]string{"app": "web"}
	c, client := runCache(t, provider.ObjectCacheOptions{},
		partial("v1", "Pod", "shop", "web-2", web),
		partial("v1", "Pod", "shop", "web-1", web),
		partial("v1", "Pod", "shop", "db-1", map[string]string{"app": "db"}),
		partial("v1", "Pod", "blog", "b-1", web),
		partial("v1", "Node", "", "n1", map[string]string{"role": "worker"}),
		partial("v1", "Node", "", "n2", nil),
		partial("kueue.x-k8s.io/v1beta1", "ClusterQueue", "", "cq-a", nil),
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
	if diff := cmp.Diff(map[string]int{"pods": 1, "nodes": 1, "clusterqueues": 1}, client.lists()); diff != "" {
		t.Errorf("LIST calls per resource (-want +got):\n%s", diff)
	}

	// The cache follows the cluster (through the watch).
	if _, err := client.kube.CoreV1().Pods("shop").Create(context.Background(),
		asPod(partial("v1", "Pod", "shop", "web-3", web)), metav1.CreateOptions{}); err != nil {
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
	client := newFakeCluster(t)
	c, err := provider.NewObjectCache(client.meta, client.kube, provider.ObjectCacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListObjects(context.Background(), schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "a", nil)
	if !errors.Is(err, provider.ErrCacheNotRunning) {
		t.Errorf("ListObjects before Run: error = %v, want ErrCacheNotRunning", err)
	}
}

func TestObjectCacheSyncTimeout(t *testing.T) {
	c, client := runCache(t, provider.ObjectCacheOptions{SyncTimeout: 100 * time.Millisecond})
	// A resource the adapter may not list: the informer never syncs.
	client.meta.PrependReactor("list", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	_, err := c.ListObjects(context.Background(), schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "a", nil)
	if !errors.Is(err, provider.ErrCacheNotSynced) {
		t.Errorf("ListObjects of an unlistable resource: error = %v, want ErrCacheNotSynced", err)
	}
}

func TestNewObjectCacheRejectsBadOptions(t *testing.T) {
	client := newFakeCluster(t)
	if _, err := provider.NewObjectCache(nil, client.kube, provider.ObjectCacheOptions{}); err == nil {
		t.Error("NewObjectCache(nil metadata client) succeeded")
	}
	if _, err := provider.NewObjectCache(client.meta, nil, provider.ObjectCacheOptions{}); err == nil {
		t.Error("NewObjectCache(nil Kubernetes client) succeeded")
	}
	if _, err := provider.NewObjectCache(client.meta, client.kube, provider.ObjectCacheOptions{Resync: -1}); err == nil {
		t.Error("NewObjectCache(negative resync) succeeded")
	}
}

func TestObjectCacheWarmBeforeRun(t *testing.T) {
	client := newFakeCluster(t, partial("v1", "Node", "", "n1", nil))
	c, err := provider.NewObjectCache(client.meta, client.kube, provider.ObjectCacheOptions{})
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
		if client.lists()["nodes"] > 0 {
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
	c, client := runCache(t, provider.ObjectCacheOptions{},
		partial("v1", "Pod", "shop", "web-2", web),
		partial("v1", "Pod", "shop", "web-1", web),
		partial("v1", "Pod", "shop", "db-1", map[string]string{"app": "db"}),
		partial("v1", "Pod", "blog", "web-1", web),
	)
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	shop := client.kube.CoreV1().Pods("shop")
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
	if _, err := shop.Create(ctx, asPod(partial("v1", "Pod", "shop", "web-3", web)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("shop", "app=web", []string{"web-1", "web-2", "web-3"})
	eventually("", "app=web", []string{"web-1", "web-1", "web-2", "web-3"})
	check("blog", "app=web", []string{"web-1"})

	// A label change takes a pod out of one selector and into another.
	if _, err := shop.Update(ctx, asPod(partial("v1", "Pod", "shop", "web-2", map[string]string{"app": "db"})), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("shop", "app=web", []string{"web-1", "web-3"})
	eventually("shop", "app=db", []string{"db-1", "web-2"})
	eventually("", "app=web", []string{"web-1", "web-1", "web-3"})

	// An update that keeps the labels (a phase change here) changes
	// nothing.
	same := asPod(partial("v1", "Pod", "shop", "web-1", web))
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
	pending := asPod(partial("v1", "Pod", "shop", "web-2", nil))
	pending.Status.Phase = corev1.PodPending
	c, client := runCache(t, provider.ObjectCacheOptions{},
		partial("v1", "Pod", "shop", "web-1", map[string]string{"app": "web"}),
		partial("v1", "Node", "", "n1", map[string]string{"role": "worker"}))
	if _, err := client.kube.CoreV1().Pods("shop").Create(context.Background(), pending, metav1.CreateOptions{}); err != nil {
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
