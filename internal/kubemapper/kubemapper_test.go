package kubemapper

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestResourceFor(t *testing.T) {
	m := New()
	tests := []struct {
		name  string
		input schema.GroupVersionResource
		want  schema.GroupVersionResource
	}{
		{"plural core", schema.GroupVersionResource{Resource: "pods"}, schema.GroupVersionResource{Version: "v1", Resource: "pods"}},
		{"singular core", schema.GroupVersionResource{Resource: "pod"}, schema.GroupVersionResource{Version: "v1", Resource: "pods"}},
		{"endpoints singular is plural", schema.GroupVersionResource{Resource: "endpoints"}, schema.GroupVersionResource{Version: "v1", Resource: "endpoints"}},
		{"apps without group", schema.GroupVersionResource{Resource: "deployment"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}},
		{"apps with group", schema.GroupVersionResource{Group: "apps", Resource: "statefulsets"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}},
		{"ingress", schema.GroupVersionResource{Group: "networking.k8s.io", Resource: "ingress"}, schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}},
		{"hpa", schema.GroupVersionResource{Resource: "horizontalpodautoscalers"}, schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}},
		{"pdb", schema.GroupVersionResource{Group: "policy", Resource: "poddisruptionbudget"}, schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}},
		{"cronjob", schema.GroupVersionResource{Resource: "cronjobs"}, schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.ResourceFor(tc.input)
			if err != nil {
				t.Fatalf("ResourceFor(%v): %v", tc.input, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ResourceFor(%v) mismatch (-want +got):\n%s", tc.input, diff)
			}
		})
	}
}

func TestUnknownResource(t *testing.T) {
	_, err := New().ResourceFor(schema.GroupVersionResource{Resource: "widgets"})
	if !meta.IsNoMatchError(err) {
		t.Fatalf("ResourceFor(widgets) error = %v, want a no-match error", err)
	}
}

func TestEveryResource(t *testing.T) {
	m := New()
	for _, r := range Resources() {
		t.Run(r.Plural, func(t *testing.T) {
			gk := schema.GroupKind{Group: r.GroupVersion.Group, Kind: r.Kind}
			mapping, err := m.RESTMapping(gk)
			if err != nil {
				t.Fatalf("RESTMapping(%v): %v", gk, err)
			}
			if got, want := mapping.Resource, r.GroupVersion.WithResource(r.Plural); got != want {
				t.Errorf("resource = %v, want %v", got, want)
			}
			if got, want := mapping.Scope.Name() == meta.RESTScopeNameNamespace, r.Namespaced; got != want {
				t.Errorf("namespaced = %v, want %v", got, want)
			}
			singular, err := m.ResourceSingularizer(r.Plural)
			if err != nil {
				t.Fatalf("ResourceSingularizer(%q): %v", r.Plural, err)
			}
			if singular != r.Singular {
				t.Errorf("singular = %q, want %q", singular, r.Singular)
			}
			kind, err := m.KindFor(schema.GroupVersionResource{Group: r.GroupVersion.Group, Resource: r.Singular})
			if err != nil {
				t.Fatalf("KindFor(%q): %v", r.Singular, err)
			}
			if kind != r.GroupVersion.WithKind(r.Kind) {
				t.Errorf("kind = %v, want %v", kind, r.GroupVersion.WithKind(r.Kind))
			}
		})
	}
}
