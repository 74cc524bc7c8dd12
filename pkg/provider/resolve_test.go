package provider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestResolve(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta1", Kind: "ClusterQueue"}, meta.RESTScopeRoot)
	type got struct {
		GVR        schema.GroupVersionResource
		GVK        schema.GroupVersionKind
		Namespaced bool
		Err        bool
	}
	pods := got{
		GVR:        schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		GVK:        schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Namespaced: true,
	}
	for _, tc := range []struct {
		gr   schema.GroupResource
		want got
	}{
		{gr: schema.GroupResource{Resource: "pods"}, want: pods},
		{gr: schema.GroupResource{Resource: "pod"}, want: pods},
		{gr: schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "clusterqueues"}, want: got{
			GVR: schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "clusterqueues"},
			GVK: schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta1", Kind: "ClusterQueue"},
		}},
		{gr: schema.GroupResource{Resource: "nodes"}, want: got{Err: true}},
	} {
		gvr, gvk, err := resolve(mapper, tc.gr)
		g := got{GVR: gvr, GVK: gvk, Err: err != nil}
		if err == nil {
			g.Namespaced = namespaced(mapper, gvk)
		}
		if diff := cmp.Diff(tc.want, g); diff != "" {
			t.Errorf("resolve(%s) (-want +got):\n%s", tc.gr, diff)
		}
	}
}
