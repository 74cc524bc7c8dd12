package resourcemetrics_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/promscaler/promscaler/pkg/naming"
	"github.com/promscaler/promscaler/pkg/provider"
	"github.com/promscaler/promscaler/pkg/resourcemetrics"
)

// sharedPods runs the object cache of the custom metrics path over client,
// the pod metadata the resource metrics cache shares; stop ends it.
func sharedPods(t testing.TB, client *metadatafake.FakeMetadataClient) (pods *provider.ObjectCache, stop func()) {
	t.Helper()
	pods, err := provider.NewObjectCache(client, provider.ObjectCacheOptions{SyncTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("NewObjectCache: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		pods.Run(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	// Run marks the cache running asynchronously; wait for it (a
	// cancelled lookup fails at once, with ErrCacheNotRunning until then).
	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := pods.PodMetadata(cancelled); !errors.Is(err, provider.ErrCacheNotRunning) {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatal("the shared pod cache did not start")
		}
	}
	return pods, stop
}

func metaObject(kind, ns, name string, lbls map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, Labels: lbls,
			Annotations: map[string]string{"big": "annotation"},
		},
	}
}

func names(objs []*metav1.PartialObjectMetadata) []string {
	out := []string{}
	for _, o := range objs {
		if o.Namespace != "" {
			out = append(out, o.Namespace+"/"+o.Name)
		} else {
			out = append(out, o.Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestCache(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := metadatafake.NewSimpleMetadataClient(scheme,
		metaObject("Pod", "a", "web-1", map[string]string{"app": "web"}),
		metaObject("Pod", "a", "db-0", map[string]string{"app": "db"}),
		metaObject("Pod", "b", "web-1", map[string]string{"app": "web"}),
		metaObject("Node", "", "node-1", map[string]string{"zone": "x"}),
		metaObject("Node", "", "node-2", map[string]string{"zone": "y"}),
	)
	shared, stopPods := sharedPods(t, client)
	defer stopPods()
	c, err := resourcemetrics.NewCache(client, shared, resourcemetrics.CacheOptions{SyncTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	ctx := context.Background()

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(runCtx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	pods, err := c.ListPods(ctx, "a", labels.Everything())
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if diff := cmp.Diff([]string{"a/db-0", "a/web-1"}, names(pods)); diff != "" {
		t.Errorf("pods in a (-want +got):\n%s", diff)
	}
	for _, p := range pods {
		if len(p.Annotations) != 0 || p.Labels["app"] == "" {
			t.Errorf("cached pod %s/%s keeps annotations %v or lost labels %v", p.Namespace, p.Name, p.Annotations, p.Labels)
		}
	}
	pods, err = c.ListPods(ctx, "", labels.SelectorFromSet(labels.Set{"app": "web"}))
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if diff := cmp.Diff([]string{"a/web-1", "b/web-1"}, names(pods)); diff != "" {
		t.Errorf("web pods (-want +got):\n%s", diff)
	}
	if p, err := c.GetPod(ctx, "b", "web-1"); err != nil || p.Name != "web-1" || p.Namespace != "b" {
		t.Errorf("GetPod(b, web-1) = %v, %v", p, err)
	}
	if _, err := c.GetPod(ctx, "b", "db-0"); !apierrors.IsNotFound(err) {
		t.Errorf("GetPod(b, db-0) error = %v, want NotFound", err)
	}
	nodes, err := c.ListNodes(ctx, labels.SelectorFromSet(labels.Set{"zone": "y"}))
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	if diff := cmp.Diff([]string{"node-2"}, names(nodes)); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if n, err := c.GetNode(ctx, "node-1"); err != nil || n.Name != "node-1" {
		t.Errorf("GetNode(node-1) = %v, %v", n, err)
	}
	if _, err := c.GetNode(ctx, "nope"); !apierrors.IsNotFound(err) {
		t.Errorf("GetNode(nope) error = %v, want NotFound", err)
	}
	if !c.HasSynced() {
		t.Error("HasSynced = false after serving lists")
	}

	// Which pods are Running is listed and watched with a field selector,
	// as in metrics-server; their metadata comes from the shared cache,
	// which lists and watches every pod.
	var podSelectors []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "pods" {
			continue
		}
		switch a := a.(type) {
		case clienttesting.ListActionImpl:
			podSelectors = append(podSelectors, "list "+a.GetListRestrictions().Fields.String())
		case clienttesting.WatchActionImpl:
			podSelectors = append(podSelectors, "watch "+a.GetWatchRestrictions().Fields.String())
		}
	}
	slices.Sort(podSelectors)
	if diff := cmp.Diff([]string{"list ", "list status.phase=Running", "watch ", "watch status.phase=Running"}, podSelectors); diff != "" {
		t.Errorf("pod list/watch field selectors (-want +got):\n%s", diff)
	}
}

func TestCacheSyncTimeout(t *testing.T) {
	scheme := metadatafake.NewTestScheme()
	client := metadatafake.NewSimpleMetadataClient(scheme)
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC says no"))
	})
	pods, stopPods := sharedPods(t, client)
	defer stopPods()
	c, err := resourcemetrics.NewCache(client, pods, resourcemetrics.CacheOptions{SyncTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
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
	if _, err := c.ListPods(context.Background(), "", labels.Everything()); !errors.Is(err, resourcemetrics.ErrCacheNotSynced) {
		t.Errorf("ListPods with pods forbidden = %v, want ErrCacheNotSynced", err)
	}
}

func TestCacheNotRunning(t *testing.T) {
	client := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	pods, stopPods := sharedPods(t, client)
	defer stopPods()
	c, err := resourcemetrics.NewCache(client, pods, resourcemetrics.CacheOptions{SyncTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("NewCache: %v", err)
	}
	if _, err := c.ListNodes(context.Background(), labels.Everything()); !errors.Is(err, resourcemetrics.ErrCacheNotRunning) {
		t.Errorf("ListNodes without Run = %v, want ErrCacheNotRunning", err)
	}
}

func TestNewCacheErrors(t *testing.T) {
	client := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	pods, err := provider.NewObjectCache(client, provider.ObjectCacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resourcemetrics.NewCache(nil, pods, resourcemetrics.CacheOptions{}); err == nil {
		t.Error("NewCache(nil) succeeded")
	}
	if _, err := resourcemetrics.NewCache(client, nil, resourcemetrics.CacheOptions{}); err == nil {
		t.Error("NewCache without pod metadata succeeded")
	}
	if _, err := resourcemetrics.NewCache(client, pods, resourcemetrics.CacheOptions{SyncTimeout: -time.Second}); err == nil {
		t.Error("NewCache with a negative sync timeout succeeded")
	}
}

// The API answers from the caches: however many requests, pods and nodes
// are listed once per informer and then only watched.
func TestAdapterServesFromCache(t *testing.T) {
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := metadatafake.NewSimpleMetadataClient(scheme,
		metaObject("Pod", "shop", "web-1", map[string]string{"app": "web"}),
		metaObject("Node", "", "node-a", nil),
	)
	_, fp := testCluster()
	rs := compileRules(t, testConfig)
	pods, stopPods := sharedPods(t, client)
	defer stopPods()
	a, err := resourcemetrics.NewAdapter(resourcemetrics.AdapterConfig{
		Metadata: client,
		Pods:     pods,
		Rules:    func() *naming.RuleSet { return rs },
		Querier:  newPromClient(t, fp.answer),
	})
	if err != nil {
		t.Fatalf("NewAdapter: %v", err)
	}
	gs := newGenericServer(t)
	if err := a.Install(gs); err != nil {
		t.Fatalf("Install: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitReady := time.Now().Add(10 * time.Second)
	for a.Ready() != nil {
		if time.Now().After(waitReady) {
			t.Fatalf("Ready: %v", a.Ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		for _, path := range []string{
			"/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods",
			"/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-1",
			"/apis/metrics.k8s.io/v1beta1/nodes",
			"/apis/metrics.k8s.io/v1beta1/nodes/node-a",
		} {
			code, body := do(t, gs.Handler, path, "")
			if code != http.StatusOK || !strings.Contains(string(body), `"cpu"`) {
				t.Fatalf("GET %s = %d %s", path, code, body)
			}
		}
	}
	lists := map[string]int{}
	for _, act := range client.Actions() {
		if act.GetVerb() == "list" {
			lists[act.GetResource().Resource]++
		}
	}
	// One list per informer: the shared pod cache, the Running pods, the
	// nodes.
	if diff := cmp.Diff(map[string]int{"pods": 2, "nodes": 1}, lists); diff != "" {
		t.Errorf("LIST calls after 12 requests (-want +got):\n%s", diff)
	}
}
