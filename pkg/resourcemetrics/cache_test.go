package resourcemetrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/promscaler/promscaler/pkg/objectcache"
	"github.com/promscaler/promscaler/pkg/resourcemetrics"
)

var (
	podsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

func kubePod(ns, name string, phase corev1.PodPhase, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, Annotations: map[string]string{"big": "annotation"}},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func nodeMeta(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
	}
}

// adapterCluster is the adapter's object cache over fake API clients, and
// the metrics.k8s.io API reading it (with testCluster's Prometheus).
type adapterCluster struct {
	objects *objectcache.Cache
	kube    *kubefake.Clientset
	meta    *metadatafake.FakeMetadataClient
	api     http.Handler
}

// newAdapterCluster builds an adapterCluster over pods and nodes; the
// cache runs (until the test ends) when run is true.
func newAdapterCluster(t *testing.T, opts objectcache.Options, run bool, pods []runtime.Object, nodes ...runtime.Object) *adapterCluster {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := &adapterCluster{kube: kubefake.NewClientset(pods...), meta: metadatafake.NewSimpleMetadataClient(scheme, nodes...)}
	var err error
	if c.objects, err = objectcache.New(c.meta, c.kube, opts); err != nil {
		t.Fatalf("objectcache.New: %v", err)
	}
	_, fp := testCluster()
	api, err := resourcemetrics.NewAdapter(resourcemetrics.AdapterConfig{Objects: c.objects, SourceConfig: sourceConfig(t, fp.client(t))})
	if err != nil {
		t.Fatalf("NewAdapter: %v", err)
	}
	gs := newGenericServer(t)
	if err := api.Install(gs); err != nil {
		t.Fatalf("Install: %v", err)
	}
	c.api = gs.Handler
	if run {
		// t.Context ends before the cleanups, which wait for Run.
		ctx := t.Context()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.objects.Run(ctx)
		}()
		t.Cleanup(func() { <-done })
		// Run marks the cache running asynchronously: wait for it.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, err := c.objects.Object(ctx, nodesGVR, "", "probe"); !errors.Is(err, objectcache.ErrNotRunning) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the object cache did not start")
			}
		}
	}
	return c
}

// names GETs a list of metrics.k8s.io and returns namespace/name of its
// items, sorted.
func (c *adapterCluster) names(t *testing.T, path string) []string {
	t.Helper()
	code, body := c.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, code, body)
	}
	var list struct {
		Items []metav1.PartialObjectMetadata `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, it := range list.Items {
		out = append(out, strings.TrimPrefix(it.Namespace+"/"+it.Name, "/"))
	}
	slices.Sort(out)
	return out
}

func (c *adapterCluster) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	return do(t, c.api, path, "")
}

// calls counts the LIST and WATCH calls by verb and resource on both
// clients.
func (c *adapterCluster) calls() map[string]int {
	n := map[string]int{}
	for _, a := range append(c.meta.Actions(), c.kube.Actions()...) {
		if v := a.GetVerb(); v == "list" || v == "watch" {
			n[v+" "+a.GetResource().Resource]++
		}
	}
	return n
}

// One pod cache, two answers: the custom metrics path lists pods of every
// phase, metrics.k8s.io only the Running ones, as metrics-server does.
func TestPodPhases(t *testing.T) {
	c := newAdapterCluster(t, objectcache.Options{}, true, []runtime.Object{
		kubePod("shop", "web-1", corev1.PodRunning, map[string]string{"app": "web"}),
		kubePod("shop", "web-2", corev1.PodPending, map[string]string{"app": "web"}),
		kubePod("shop", "db-0", corev1.PodSucceeded, map[string]string{"app": "db"}),
		kubePod("ops", "agent", corev1.PodRunning, map[string]string{"app": "agent"}),
	}, nodeMeta("node-a"), nodeMeta("node-b"))

	custom, err := c.objects.ListObjects(context.Background(), podsGVR, "shop", nil)
	if err != nil {
		t.Fatalf("ListObjects: %v", err)
	}
	if diff := cmp.Diff([]string{"db-0", "web-1", "web-2"}, custom); diff != "" {
		t.Errorf("custom metrics path's pods in shop (-want +got):\n%s", diff)
	}
	const base = "/apis/metrics.k8s.io/v1beta1/"
	if diff := cmp.Diff([]string{"shop/web-1"}, c.names(t, base+"namespaces/shop/pods")); diff != "" {
		t.Errorf("podmetrics in shop (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ops/agent", "shop/web-1"}, c.names(t, base+"pods")); diff != "" {
		t.Errorf("podmetrics of every namespace (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"shop/web-1"}, c.names(t, base+"namespaces/shop/pods?labelSelector=app%3Dweb")); diff != "" {
		t.Errorf("podmetrics app=web (-want +got):\n%s", diff)
	}
	for path, want := range map[string]int{
		"namespaces/shop/pods/web-1": http.StatusOK,
		"namespaces/shop/pods/web-2": http.StatusNotFound, // Pending
		"namespaces/shop/pods/db-0":  http.StatusNotFound, // Succeeded
		"namespaces/ops/pods/web-1":  http.StatusNotFound,
		"nodes/node-b":               http.StatusOK,
		"nodes/node-c":               http.StatusNotFound,
	} {
		if code, body := c.get(t, base+path); code != want {
			t.Errorf("GET %s = %d %s, want %d", path, code, body, want)
		}
	}
	if diff := cmp.Diff([]string{"node-a", "node-b"}, c.names(t, base+"nodes")); diff != "" {
		t.Errorf("nodemetrics (-want +got):\n%s", diff)
	}
}

// A pod turning Running is reported once its watch event arrives.
func TestPodTurningRunning(t *testing.T) {
	pending := kubePod("shop", "web-2", corev1.PodPending, map[string]string{"app": "web"})
	c := newAdapterCluster(t, objectcache.Options{}, true, []runtime.Object{pending})
	const path = "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-2"
	if code, body := c.get(t, path); code != http.StatusNotFound {
		t.Fatalf("GET of a Pending pod = %d %s, want 404", code, body)
	}
	running := pending.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	if _, err := c.kube.CoreV1().Pods("shop").UpdateStatus(context.Background(), running, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		code, body := c.get(t, path)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET after the pod turned Running = %d %s, want 200", code, body)
		}
	}
	if diff := cmp.Diff([]string{"shop/web-2"}, c.names(t, "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods")); diff != "" {
		t.Errorf("podmetrics after the pod turned Running (-want +got):\n%s", diff)
	}
}

// Both paths read one cache: whatever the requests, the adapter lists and
// watches pods once, and nodes once.
func TestOneWatchForBothPaths(t *testing.T) {
	c := newAdapterCluster(t, objectcache.Options{}, true, []runtime.Object{
		kubePod("shop", "web-1", corev1.PodRunning, map[string]string{"app": "web"}),
		kubePod("shop", "web-2", corev1.PodPending, map[string]string{"app": "web"}),
	}, nodeMeta("node-a"))
	for range 3 {
		for _, path := range []string{
			"/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods",
			"/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-1",
			"/apis/metrics.k8s.io/v1beta1/nodes",
			"/apis/metrics.k8s.io/v1beta1/nodes/node-a",
		} {
			if code, body := c.get(t, path); code != http.StatusOK {
				t.Fatalf("GET %s = %d %s", path, code, body)
			}
		}
		for _, gvr := range []schema.GroupVersionResource{podsGVR, nodesGVR} {
			if _, err := c.objects.ListObjects(context.Background(), gvr, "", nil); err != nil {
				t.Fatalf("ListObjects(%s): %v", gvr.Resource, err)
			}
		}
	}
	// A watch is opened just after its list: wait for it.
	want := map[string]int{"list pods": 1, "watch pods": 1, "list nodes": 1, "watch nodes": 1}
	for deadline := time.Now().Add(10 * time.Second); c.calls()["watch nodes"] == 0 || c.calls()["watch pods"] == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	if diff := cmp.Diff(want, c.calls()); diff != "" {
		t.Errorf("LIST and WATCH calls after 12 requests of each path (-want +got):\n%s", diff)
	}
}

// Before the cache runs, and when pods cannot be listed, the API answers
// 503 saying why.
func TestCacheUnavailable(t *testing.T) {
	notRunning := newAdapterCluster(t, objectcache.Options{}, false, nil)
	code, body := do(t, notRunning.api, "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "listing pods: not available") {
		t.Errorf("GET before the cache runs = %d %s, want 503", code, body)
	}

	// The pod informer starts with the first request for pods: after the
	// reactor.
	forbidden := newAdapterCluster(t, objectcache.Options{SyncTimeout: 100 * time.Millisecond}, true, nil)
	forbidden.kube.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC says no"))
	})
	if _, err := forbidden.objects.Objects(context.Background(), podsGVR, ""); !errors.Is(err, objectcache.ErrNotSynced) {
		t.Errorf("Objects(pods) with pods forbidden = %v, want ErrCacheNotSynced", err)
	}
	code, body = forbidden.get(t, "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-1")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "getting pod shop/web-1: not available") {
		t.Errorf("GET with pods forbidden = %d %s, want 503", code, body)
	}
}
