package provider_test

import (
	"context"
	"fmt"
	"net/http"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/promscaler/promscaler/internal/cputime"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/objectcache"
	"github.com/promscaler/promscaler/pkg/objectcache/cachetest"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/provider"
	"github.com/promscaler/promscaler/pkg/rules"
)

// benchSelectorRequest measures the HPA's Pods-metric request (`pods/*`
// with a label selector) over n pods, through the real Prometheus client
// and an httptest Prometheus answering one sample per pod.
func benchSelectorRequest(b *testing.B, n int, parallel bool) {
	objs, answer := bigNamespace(n)
	e := newEnv(b, envOptions{answer: answer, objects: objs, fpmNamespaces: []string{"big"}})
	sel := mustSelector(b, "app=worker")
	run := func() {
		list, err := e.prov.GetMetricBySelector(context.Background(), "big", sel, fpmInfo, labels.Everything())
		if err != nil {
			b.Fatal(err)
		}
		if len(list.Items) != n {
			b.Fatalf("got %d items, want %d", len(list.Items), n)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	if !parallel {
		for b.Loop() {
			run()
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				run()
			}
		})
	}
	b.StopTimer()
	reportCPU(b, cpu0)
	b.ReportMetric(float64(len(e.prom.sent()))/float64(b.N), "promqueries/op")
}

func BenchmarkPodsStar100(b *testing.B)          { benchSelectorRequest(b, 100, false) }
func BenchmarkPodsStar100Parallel(b *testing.B)  { benchSelectorRequest(b, 100, true) }
func BenchmarkPodsStar5000(b *testing.B)         { benchSelectorRequest(b, 5000, false) }
func BenchmarkPodsStar5000Parallel(b *testing.B) { benchSelectorRequest(b, 5000, true) }

// staticQuerier answers every query with one decoded answer: it isolates
// the provider's own cost from HTTP and JSON.
type staticQuerier struct{ samples promclient.Samples }

func (q staticQuerier) QuerySamples(context.Context, string, time.Time) (promclient.Samples, error) {
	return q.samples, nil
}

// podSamples is an answer of one sample per pod, pods[i] with value i/4.
func podSamples(pods []string) promclient.Samples {
	out := make(promclient.Samples, 0, len(pods))
	for i, p := range pods {
		out = append(out, promclient.Sample{Labels: promclient.Labels{{Name: "namespace", Value: "big"}, {Name: "pod_name", Value: p}},
			Value: model.SampleValue(float64(i) / 4), Timestamp: 1764493200000})
	}
	return out
}

// benchOverhead measures the provider alone (index lookup, object listing
// from the fake lister, rendering, filtering, conversion) for n pods.
func benchOverhead(b *testing.B, n int) {
	objs, _ := bigNamespace(n)
	benchOverheadWith(b, n, objs, nil)
}

// BenchmarkOverheadPodsStar5000ObjectCache is BenchmarkOverheadPodsStar5000
// with the pods listed from the metadata informer cache, as in the adapter
// (which, unlike the fake lister, hands out names in map order).
func BenchmarkOverheadPodsStar5000ObjectCache(b *testing.B) {
	benchOverheadWith(b, 5000, bigObjectCache(b), nil)
}

// BenchmarkOverheadPodsStar5000ObjectCacheMiss is the same with a selector
// not asked before on each request: the object cache's list is not kept.
func BenchmarkOverheadPodsStar5000ObjectCacheMiss(b *testing.B) {
	benchOverheadWith(b, 5000, bigObjectCache(b), func(i int) labels.Selector {
		return mustSelector(b, fmt.Sprintf("app=worker,rev!=r%d", i))
	})
}

// bigObjectCache is a running ObjectCache of 5,000 pods labelled app=worker
// and ten others in namespace "big".
func bigObjectCache(b *testing.B) *objectcache.Cache {
	objs := make([]runtime.Object, 0, 5000)
	for i := range 5000 {
		objs = append(objs, cachetest.Partial("v1", "Pod", "big", podName(i), map[string]string{"app": "worker", "pod-template-hash": "7d9f8b6c5d"}))
	}
	for i := range 10 {
		objs = append(objs, cachetest.Partial("v1", "Pod", "big", fmt.Sprintf("other-%d", i), map[string]string{"app": "other"}))
	}
	c, _ := cachetest.Run(b, objectcache.Options{}, objs...)
	return c
}

// benchOverheadWith is benchOverhead over any lister of n selected pods,
// with the selector of request i from selFor (app=worker when nil).
func benchOverheadWith(b *testing.B, n int, objs provider.ObjectLister, selFor func(i int) labels.Selector) {
	pods := make([]string, n)
	for i := range n {
		pods[i] = podName(i)
	}
	runOverhead(b, n, objs, staticQuerier{podSamples(pods)}, selFor)
}

// runOverhead measures the provider's pods/* requests over objs (n pods
// selected) answered by q, with the selector of request i from selFor
// (app=worker when nil).
func runOverhead(b *testing.B, n int, objs provider.ObjectLister, q promclient.SampleQuerier, selFor func(i int) labels.Selector) {
	mapper := testMapper()
	rs, err := rules.Compile(testConfig(), mapper)
	if err != nil {
		b.Fatal(err)
	}
	series := testSeries(rs)
	series[0].Series = append(series[0].Series, rules.Series{Name: "pm_status", Labels: model.LabelSet{
		"__name__": "pm_status", "namespace": "big", "pod_name": "x", "state": "active processes"}})
	idx := discovery.BuildIndex(series, discovery.IndexOptions{Scoper: discovery.MapperScoper{Mapper: mapper}})
	p, err := provider.New(provider.Config{
		Index:    provider.IndexSource(func() *discovery.Index { return idx }),
		Backends: promclient.Single[promclient.SampleQuerier](q),
		Objects:  objs,
		Mapper:   mapper,
	})
	if err != nil {
		b.Fatal(err)
	}
	sel := mustSelector(b, "app=worker")
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for i := 0; b.Loop(); i++ {
		if selFor != nil {
			sel = selFor(i)
		}
		list, err := p.GetMetricBySelector(context.Background(), "big", sel, fpmInfo, labels.Everything())
		if err != nil || len(list.Items) != n {
			b.Fatalf("items %d, err %v", len(list.Items), err)
		}
	}
	reportCPU(b, cpu0)
}

// reportCPU reports the process CPU time per operation since cpu0 (the
// test's fake Prometheus included, when there is one).
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu := cputime.Process() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
	}
}

func BenchmarkOverheadPodsStar100(b *testing.B)  { benchOverhead(b, 100) }
func BenchmarkOverheadPodsStar5000(b *testing.B) { benchOverhead(b, 5000) }

func BenchmarkGetMetricByName(b *testing.B) {
	e := newEnv(b, envOptions{answer: always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "0.5", 1764493200}))})
	name := types.NamespacedName{Namespace: "shop", Name: "web-1"}
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		if _, err := e.prov.GetMetricByName(context.Background(), name, fpmInfo, labels.Everything()); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkObjectCacheList5000 measures listing 5,000 pods by label from
// the metadata informer cache (the namespace index, then the selector).
func BenchmarkObjectCacheList5000(b *testing.B) {
	objs := make([]runtime.Object, 0, 5000)
	for i := range 5000 {
		objs = append(objs, cachetest.Partial("v1", "Pod", "big", podName(i), map[string]string{"app": "worker", "pod-template-hash": "7d9f8b6c5d"}))
	}
	for i := range 5000 {
		objs = append(objs, cachetest.Partial("v1", "Pod", fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("p-%d", i), map[string]string{"app": "x"}))
	}
	c, _ := cachetest.Run(b, objectcache.Options{}, objs...)
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	sel := mustSelector(b, "app=worker")
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for b.Loop() {
		names, err := c.ListObjects(context.Background(), pods, "big", sel)
		if err != nil || len(names) != 5000 {
			b.Fatalf("names %d, err %v", len(names), err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkObjectCacheList5000Miss is BenchmarkObjectCacheList5000 with a
// selector never asked before on each iteration: the cost of a list the
// cache does not hold (after a change of the namespace's pods).
func BenchmarkObjectCacheList5000Miss(b *testing.B) {
	objs := make([]runtime.Object, 0, 5000)
	for i := range 5000 {
		objs = append(objs, cachetest.Partial("v1", "Pod", "big", podName(i), map[string]string{"app": "worker", "pod-template-hash": "7d9f8b6c5d"}))
	}
	c, _ := cachetest.Run(b, objectcache.Options{}, objs...)
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		sel := mustSelector(b, fmt.Sprintf("app=worker,rev!=r%d", i))
		b.StartTimer()
		names, err := c.ListObjects(context.Background(), pods, "big", sel)
		if err != nil || len(names) != 5000 {
			b.Fatalf("names %d, err %v", len(names), err)
		}
	}
	reportCPU(b, cpu0)
}

func BenchmarkQuantity(b *testing.B) {
	vals := []float64{0.5, 1234.5678, 2.0 / 3.0, 1e20}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := provider.Quantity(vals[i%len(vals)]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchOverheadCached is runOverhead over the object cache, samples in the
// order of the names or, when shuffled, scrambled.
func benchOverheadCached(b *testing.B, shuffled bool) {
	const n = 5000
	pods := make([]string, n)
	for i := range n {
		j := i
		if shuffled {
			j = i * 7919 % n
		}
		pods[i] = podName(j)
	}
	runOverhead(b, n, bigObjectCache(b), staticQuerier{podSamples(pods)}, nil)
}

// BenchmarkOverheadPodsStar5000Samples is the provider alone as the adapter
// runs it: names from the object cache, samples in the order of the names.
func BenchmarkOverheadPodsStar5000Samples(b *testing.B) { benchOverheadCached(b, false) }

// BenchmarkOverheadPodsStar5000SamplesShuffled is the same with the samples
// in random order (pods with generated names).
func BenchmarkOverheadPodsStar5000SamplesShuffled(b *testing.B) { benchOverheadCached(b, true) }

// deploymentPod is a Running pod as a Deployment and the kubelet make it:
// the labels, annotations, owner, managed fields, spec and status the pod
// informer receives.
func deploymentPod(ns, name string) *corev1.Pod {
	fields := metav1.NewFieldsV1(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{},"f:resources":{}}}}}`)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + ns + "-" + name), ResourceVersion: "12345",
			GenerateName: "web-7d4b9c8f6-",
			Labels: map[string]string{
				"app": "web", "pod-template-hash": "7d4b9c8f6", "app.kubernetes.io/name": "web",
				"app.kubernetes.io/instance": "web-prod", "app.kubernetes.io/version": "1.2.3",
			},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z", "prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c8f6", UID: "x"}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fields},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: fields, Subresource: "status"},
			},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1", ServiceAccountName: "web",
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/web:1.2.3", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
			}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1", HostIP: "192.168.0.1",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.example/web:1.2.3", ImageID: "sha256:0123456789abcdef"}},
		},
	}
}

func liveHeap() uint64 {
	var ms goruntime.MemStats
	goruntime.GC()
	goruntime.GC()
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkPodCache5000 measures what the adapter keeps for 5,000 Running
// pods, the one pod cache both metrics paths read: the live heap it adds
// once synced (heap-bytes/pod), and the time to read every pod with its
// phase and labels, as metrics.k8s.io does (objects-us).
func BenchmarkPodCache5000(b *testing.B) {
	const n = 5000
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for range b.N {
		b.StopTimer()
		client := cachetest.NewCluster(b)
		for i := range n {
			if err := client.Kube.Tracker().Add(deploymentPod(fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("web-7d4b9c8f6-%05d", i))); err != nil {
				b.Fatal(err)
			}
		}
		base := liveHeap()
		c, err := objectcache.New(client.Meta, client.Kube, objectcache.Options{SyncTimeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Run(ctx)
		}()
		for !c.Synced(pods) {
			time.Sleep(time.Millisecond)
		}
		if names, err := c.ListObjects(ctx, pods, "", nil); err != nil || len(names) != n {
			b.Fatalf("custom metrics path: %d pods, %v", len(names), err)
		}
		held := liveHeap() - base
		b.StartTimer()
		const lists = 20
		start := time.Now()
		for range lists {
			if objs, err := c.Objects(ctx, pods, ""); err != nil || len(objs) != n {
				b.Fatalf("resource metrics path: %d pods, %v", len(objs), err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/lists, "objects-us")
		b.ReportMetric(float64(held)/n, "heap-bytes/pod")
		b.ReportMetric(float64(held)/(1<<20), "heap-MiB")
		b.StopTimer()
		cancel()
		<-done
		b.StartTimer()
	}
}
