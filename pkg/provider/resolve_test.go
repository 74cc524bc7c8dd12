package provider

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
)

// countingMapper counts the calls resolve makes, and fails every call while
// down is set (a resource the cluster's mapper does not know yet).
type countingMapper struct {
	meta.RESTMapper
	calls atomic.Int32
	down  atomic.Bool
}

func (m *countingMapper) ResourceFor(in schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	m.calls.Add(1)
	if m.down.Load() {
		return schema.GroupVersionResource{}, &meta.NoResourceMatchError{PartialResource: in}
	}
	return m.RESTMapper.ResourceFor(in)
}

func (m *countingMapper) KindFor(in schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	m.calls.Add(1)
	return m.RESTMapper.KindFor(in)
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.calls.Add(1)
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// resolved is what a resolve step gave, and how many mapper calls it made.
type resolved struct {
	GVR        schema.GroupVersionResource
	GVK        schema.GroupVersionKind
	Namespaced bool
	Err        bool
	Calls      int32
}

func (r resolved) with(calls int32) resolved { r.Calls = calls; return r }

func TestResolverRemembers(t *testing.T) {
	type got = resolved
	var (
		podsGR          = schema.GroupResource{Resource: "pods"}
		nodesGR         = schema.GroupResource{Resource: "nodes"}
		clusterQueuesGR = schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "clusterqueues"}
	)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Node"}, meta.RESTScopeRoot)
	mapper.Add(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta1", Kind: "ClusterQueue"}, meta.RESTScopeRoot)
	pods := got{
		GVR:        schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		GVK:        schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Namespaced: true,
	}
	steps := []struct {
		name    string
		gr      schema.GroupResource
		advance time.Duration
		down    bool
		want    got
	}{
		{name: "first request asks the mapper", gr: podsGR, want: pods.with(3)},
		{name: "then it is remembered", gr: podsGR, advance: resolveTTL - time.Second, want: pods.with(0)},
		{name: "the singular is its own entry", gr: schema.GroupResource{Resource: "pod"}, want: pods.with(3)},
		{name: "asked again once the entry is a minute old", gr: podsGR, advance: time.Second, want: pods.with(3)},
		{name: "cluster-scoped custom resource", gr: clusterQueuesGR, want: got{
			GVR:   schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "clusterqueues"},
			GVK:   schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta1", Kind: "ClusterQueue"},
			Calls: 3,
		}},
		{name: "unknown to the mapper", gr: nodesGR, down: true, want: got{Err: true, Calls: 1}},
		{name: "a failure is not remembered", gr: nodesGR, down: true, want: got{Err: true, Calls: 1}},
		{name: "known once the mapper learns it", gr: nodesGR, want: got{
			GVR:   schema.GroupVersionResource{Version: "v1", Resource: "nodes"},
			GVK:   schema.GroupVersionKind{Version: "v1", Kind: "Node"},
			Calls: 3,
		}},
		{name: "an expired entry the mapper lost is dropped", gr: podsGR, advance: resolveTTL, down: true, want: got{Err: true, Calls: 1}},
		{name: "and not served afterwards", gr: podsGR, down: true, want: got{Err: true, Calls: 1}},
	}
	m := &countingMapper{RESTMapper: mapper}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	r := newResolver(m, clk)
	for _, st := range steps {
		clk.SetTime(clk.Now().Add(st.advance))
		m.down.Store(st.down)
		before := m.calls.Load()
		gvr, gvk, namespaced, err := r.resolve(st.gr)
		g := got{GVR: gvr, GVK: gvk, Namespaced: namespaced, Err: err != nil, Calls: m.calls.Load() - before}
		if diff := cmp.Diff(st.want, g); diff != "" {
			t.Errorf("%s: resolve(%s) (-want +got):\n%s", st.name, st.gr, diff)
		}
	}
}
