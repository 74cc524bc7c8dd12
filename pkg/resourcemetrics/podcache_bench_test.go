package resourcemetrics_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/promscaler/promscaler/pkg/resourcemetrics"
)

// deploymentPod is the metadata of a pod as a Deployment makes it: the
// labels, annotations, owner and managed fields the informers receive.
func deploymentPod(ns, name string) *metav1.PartialObjectMetadata {
	fields := metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"x\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{},"f:resources":{}}}}}`)
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + ns + "-" + name), ResourceVersion: "12345",
			GenerateName: "web-7d4b9c8f6-",
			Labels: map[string]string{
				"app": "web", "pod-template-hash": "7d4b9c8f6", "app.kubernetes.io/name": "web",
				"app.kubernetes.io/instance": "web-prod", "app.kubernetes.io/version": "1.2.3",
			},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z",
				"prometheus.io/scrape":              "true",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c8f6", UID: "x"}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fields},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fields, Subresource: "status"},
			},
		},
	}
}

func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkPodCaches5000 measures what the adapter keeps for 5,000 Running
// pods when both metrics paths serve them (the object cache of the custom
// metrics path and the Running pods of metrics.k8s.io): the live heap they
// add once synced (heap-bytes/pod), and the time to list the Running pods
// with their labels (listpods-us).
func BenchmarkPodCaches5000(b *testing.B) {
	const n = 5000
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	podsGVR := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for range b.N {
		b.StopTimer()
		client := metadatafake.NewSimpleMetadataClient(scheme)
		for i := range n {
			if err := client.Tracker().Add(deploymentPod(fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("web-7d4b9c8f6-%05d", i))); err != nil {
				b.Fatal(err)
			}
		}
		base := liveHeap()
		shared, stopShared := sharedPods(b, client)
		c, err := resourcemetrics.NewCache(client, shared, resourcemetrics.CacheOptions{SyncTimeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Run(ctx)
		}()
		if names, err := shared.ListObjects(ctx, podsGVR, "", nil); err != nil || len(names) != n {
			b.Fatalf("custom metrics path: %d pods, %v", len(names), err)
		}
		if pods, err := c.ListPods(ctx, "", labels.Everything()); err != nil || len(pods) != n {
			b.Fatalf("resource metrics path: %d pods, %v", len(pods), err)
		}
		held := liveHeap() - base
		b.StartTimer()
		const lists = 20
		start := time.Now()
		for range lists {
			if _, err := c.ListPods(ctx, "", labels.SelectorFromSet(labels.Set{"app": "web"})); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/lists, "listpods-us")
		b.ReportMetric(float64(held)/n, "heap-bytes/pod")
		b.ReportMetric(float64(held)/(1<<20), "heap-MiB")
		b.StopTimer()
		cancel()
		<-done
		stopShared()
		b.StartTimer()
	}
}
