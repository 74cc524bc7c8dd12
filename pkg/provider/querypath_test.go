package provider_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/objectcache"
	"github.com/promscaler/promscaler/pkg/objectcache/cachetest"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/provider"
)

// TestObjectCacheListsStayIntact checks that requests served from the object
// cache's kept lists (which the provider reads without copying) leave them
// as they were.
func TestObjectCacheListsStayIntact(t *testing.T) {
	// Created out of order: the informer hands them out in map order.
	var objs []runtime.Object
	var want []string
	for _, i := range []int{5, 2, 9, 0, 7, 1, 8, 3, 6, 4} {
		objs = append(objs, cachetest.Partial("v1", "Pod", "big", podName(i), map[string]string{"app": "worker"}))
	}
	for i := range 10 {
		want = append(want, podName(i))
	}
	c, _ := cachetest.Run(t, objectcache.Options{}, objs...)
	samples := make([]sample, 0, 10)
	for i := 9; i >= 0; i-- {
		samples = append(samples, sample{map[string]string{"pod_name": podName(i)}, fmt.Sprint(i), 1764493200})
	}
	e := newEnv(t, envOptions{answer: always(http.StatusOK, vector(samples...)), fpmNamespaces: []string{"big"}})
	p := cachedProvider(t, e, c, 3)
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for round := range 3 {
		list, err := p.GetMetricBySelector(context.Background(), "big", mustSelector(t, "app=worker"), fpmInfo, labels.Everything())
		if err != nil {
			t.Fatalf("round %d: GetMetricBySelector: %v", round, err)
		}
		var got []string
		for i, item := range list.Items {
			got = append(got, item.DescribedObject.Name)
			if v := item.Value.MilliValue(); v != int64(i)*1000 {
				t.Errorf("round %d: %s = %dm, want %dm", round, item.DescribedObject.Name, v, i*1000)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("round %d: items (-want +got):\n%s", round, diff)
		}
		listed, err := c.ListObjects(context.Background(), pods, "big", mustSelector(t, "app=worker"))
		if err != nil {
			t.Fatalf("ListObjects: %v", err)
		}
		if diff := cmp.Diff(want, listed); diff != "" {
			t.Errorf("round %d: kept list (-want +got):\n%s", round, diff)
		}
		// The caller owns what ListObjects returns: scribbling on it
		// must not reach the provider's next answer.
		slices.Reverse(listed)
		listed[0] = "scribbled"
	}
}

// TestObjectCacheScrambledAnswers checks answers in random order over a
// kept list (matched through the index kept with it), request after
// request.
func TestObjectCacheScrambledAnswers(t *testing.T) {
	const n = 300
	var objs []runtime.Object
	var samples []sample
	for i := range n {
		objs = append(objs, cachetest.Partial("v1", "Pod", "big", podName(i), map[string]string{"app": "worker"}))
		j := i * 7 % n
		samples = append(samples, sample{map[string]string{"pod_name": podName(j)}, fmt.Sprint(j), 1764493200})
		if i%3 == 0 {
			samples = append(samples, sample{map[string]string{"pod_name": fmt.Sprintf("unknown-%d", i)}, "1", 1764493200})
		}
	}
	c, _ := cachetest.Run(t, objectcache.Options{}, objs...)
	e := newEnv(t, envOptions{answer: always(http.StatusOK, vector(samples...)), fpmNamespaces: []string{"big"}})
	p := cachedProvider(t, e, c, 0)
	for round := range 3 {
		list, err := p.GetMetricBySelector(context.Background(), "big", mustSelector(t, "app=worker"), fpmInfo, labels.Everything())
		if err != nil {
			t.Fatalf("round %d: GetMetricBySelector: %v", round, err)
		}
		if len(list.Items) != n {
			t.Fatalf("round %d: %d items, want %d", round, len(list.Items), n)
		}
		for i, item := range list.Items {
			if item.DescribedObject.Name != podName(i) || item.Value.MilliValue() != int64(i)*1000 {
				t.Errorf("round %d: item %d is %s = %s, want %s = %d", round, i, item.DescribedObject.Name, item.Value.String(), podName(i), i)
			}
		}
	}
}

// cachedProvider is a provider over e's index and Prometheus listing `*`
// objects from c, naming at most maxNames objects in a query (0: the
// default).
func cachedProvider(t *testing.T, e *env, c provider.ObjectLister, maxNames int) *provider.Provider {
	t.Helper()
	p, err := provider.New(provider.Config{
		Index:           provider.IndexSource(func() *discovery.Index { return e.index }),
		Backends:        promclient.Single[promclient.SampleQuerier](e.prom.client(t, 5*time.Second, e.metrics)),
		Objects:         c,
		Mapper:          testMapper(),
		MaxNamesInQuery: maxNames,
	})
	if err != nil {
		t.Fatalf("provider.New: %v", err)
	}
	return p
}
