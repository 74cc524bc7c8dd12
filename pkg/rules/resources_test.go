package rules

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
)

var (
	pods        = schema.GroupResource{Resource: "pods"}
	namespaces  = schema.GroupResource{Resource: "namespaces"}
	nodes       = schema.GroupResource{Resource: "nodes"}
	services    = schema.GroupResource{Resource: "services"}
	deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}
	ingresses   = schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}
	widgets     = schema.GroupResource{Group: "my-group.example.com", Resource: "widgets"}
)

// testMapper is the built-in mapper plus a CRD whose group has "-" and ".".
func testMapper() meta.RESTMapper {
	gv := schema.GroupVersion{Group: "my-group.example.com", Version: "v1"}
	crd := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	crd.AddSpecific(gv.WithKind("Widget"), gv.WithResource("widgets"), gv.WithResource("widget"), meta.RESTScopeNamespace)
	return meta.MultiRESTMapper{kubemapper.New(), crd}
}

// countingMapper counts resolution calls.
type countingMapper struct {
	meta.RESTMapper
	calls atomic.Int64
}

func (c *countingMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	c.calls.Add(1)
	return c.RESTMapper.ResourceFor(r)
}

func (c *countingMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	c.calls.Add(1)
	return c.RESTMapper.ResourcesFor(r)
}

func mustMapper(t *testing.T, cfg config.ResourceMapping) *ResourceMapper {
	t.Helper()
	m, _, err := NewResourceMapper(cfg, testMapper())
	if err != nil {
		t.Fatalf("NewResourceMapper(%+v): %v", cfg, err)
	}
	return m
}

func TestResourceForLabel(t *testing.T) {
	overrides := map[string]config.GroupResource{
		"namespace":  {Resource: "namespace"},
		"pod_name":   {Resource: "pod"},
		"deploy":     {Group: "apps", Resource: "deployment"},
		"kube_thing": {Resource: "services"},
	}
	tests := []struct {
		name    string
		mapping config.ResourceMapping
		label   string
		want    schema.GroupResource
		wantOK  bool
	}{
		{"override singular", config.ResourceMapping{Overrides: overrides}, "pod_name", pods, true},
		{"override namespace", config.ResourceMapping{Overrides: overrides}, "namespace", namespaces, true},
		{"override with group", config.ResourceMapping{Overrides: overrides}, "deploy", deployments, true},
		{"no override no template", config.ResourceMapping{Overrides: overrides}, "pod", schema.GroupResource{}, false},
		{"resource template core", config.ResourceMapping{Template: "<<.Resource>>"}, "pod", pods, true},
		{"resource template any group", config.ResourceMapping{Template: "<<.Resource>>"}, "deployment", deployments, true},
		{"resource template plural", config.ResourceMapping{Template: "<<.Resource>>"}, "nodes", nodes, true},
		{"resource template unknown", config.ResourceMapping{Template: "<<.Resource>>"}, "instance", schema.GroupResource{}, false},
		{"reserved label", config.ResourceMapping{Template: "<<.Resource>>"}, "__name__", schema.GroupResource{}, false},
		{"prefixed template", config.ResourceMapping{Template: "kube_<<.Resource>>"}, "kube_pod", pods, true},
		{"prefixed template no prefix", config.ResourceMapping{Template: "kube_<<.Resource>>"}, "pod", schema.GroupResource{}, false},
		{"group template", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube_apps_deployment", deployments, true},
		{"group template sanitised dots", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube_networking_k8s_io_ingress", ingresses, true},
		{"group template sanitised dash", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube_my_group_example_com_widget", widgets, true},
		{"group template wrong group", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube_batch_deployment", schema.GroupResource{}, false},
		{"group template no prefix match of groups", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube_app_deployment", schema.GroupResource{}, false},
		{"group template core rendering", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube__pod", pods, true},
		{"group template core rendering is core only", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, "kube__deployment", schema.GroupResource{}, false},
		{"conditional group core", config.ResourceMapping{Template: "<<if .Group>><<.Group>>_<<end>><<.Resource>>"}, "pod", pods, true},
		{"conditional group apps", config.ResourceMapping{Template: "<<if .Group>><<.Group>>_<<end>><<.Resource>>"}, "apps_deployment", deployments, true},
		{"conditional group, core form of a grouped resource", config.ResourceMapping{Template: "<<if .Group>><<.Group>>_<<end>><<.Resource>>"}, "deployment", schema.GroupResource{}, false},
		{"override wins over template", config.ResourceMapping{Template: "kube_<<.Resource>>", Overrides: overrides}, "kube_thing", services, true},
		{"template and overrides", config.ResourceMapping{Template: "kube_<<.Resource>>", Overrides: overrides}, "kube_node", nodes, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMapper(t, tc.mapping)
			got, ok := m.ResourceForLabel(tc.label)
			if ok != tc.wantOK {
				t.Fatalf("ResourceForLabel(%q) ok = %v, want %v (got %v)", tc.label, ok, tc.wantOK, got)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ResourceForLabel(%q) mismatch (-want +got):\n%s", tc.label, diff)
			}
			// A second lookup is answered from the memo, identically.
			again, ok2 := m.ResourceForLabel(tc.label)
			if again != got || ok2 != ok {
				t.Errorf("second ResourceForLabel(%q) = %v, %v; first %v, %v", tc.label, again, ok2, got, ok)
			}
		})
	}
}

func TestLabelForResource(t *testing.T) {
	overrides := map[string]config.GroupResource{
		"namespace": {Resource: "namespace"},
		"pod_name":  {Resource: "pod"},
	}
	tests := []struct {
		name     string
		mapping  config.ResourceMapping
		resource schema.GroupResource
		want     string
		wantErr  error
	}{
		{"override", config.ResourceMapping{Overrides: overrides}, pods, "pod_name", nil},
		{"override namespace", config.ResourceMapping{Overrides: overrides}, namespaces, "namespace", nil},
		{"no override no template", config.ResourceMapping{Overrides: overrides}, nodes, "", ErrNoLabelForResource},
		{"resource template singular", config.ResourceMapping{Template: "<<.Resource>>"}, pods, "pod", nil},
		{"group template core", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, pods, "kube__pod", nil},
		{"group template apps", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, deployments, "kube_apps_deployment", nil},
		{"group template dots", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, ingresses, "kube_networking_k8s_io_ingress", nil},
		{"group template dash", config.ResourceMapping{Template: "kube_<<.Group>>_<<.Resource>>"}, widgets, "kube_my_group_example_com_widget", nil},
		{"conditional group core", config.ResourceMapping{Template: "<<if .Group>><<.Group>>_<<end>><<.Resource>>"}, pods, "pod", nil},
		{"override wins over template", config.ResourceMapping{Template: "<<.Resource>>", Overrides: overrides}, pods, "pod_name", nil},
		{"unknown resource", config.ResourceMapping{Template: "<<.Resource>>"}, schema.GroupResource{Resource: "gadgets"}, "", ErrNoLabelForResource},
		{"template renders an invalid label", config.ResourceMapping{Template: "kube.<<.Resource>>"}, pods, "", ErrInvalidLabelName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMapper(t, tc.mapping)
			got, err := m.LabelForResource(tc.resource)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("LabelForResource(%v) error = %v, want %v", tc.resource, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("LabelForResource(%v) = %q, want %q", tc.resource, got, tc.want)
			}
		})
	}
}

// Rendering a resource and recognising the label must round-trip for every
// resource of the built-in mapper and every usual template.
func TestResourceLabelRoundTrip(t *testing.T) {
	templates := []string{"<<.Resource>>", "kube_<<.Resource>>", "kube_<<.Group>>_<<.Resource>>", "<<if .Group>><<.Group>>_<<end>><<.Resource>>", "<<.Resource>>_<<.Group>>_name"}
	resources := []schema.GroupResource{widgets}
	for _, r := range kubemapper.Resources() {
		resources = append(resources, schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Plural})
	}
	for _, tmpl := range templates {
		m := mustMapper(t, config.ResourceMapping{Template: tmpl})
		for _, gr := range resources {
			lbl, err := m.LabelForResource(gr)
			if err != nil {
				t.Errorf("template %q: LabelForResource(%v): %v", tmpl, gr, err)
				continue
			}
			got, ok := m.ResourceForLabel(lbl)
			if !ok || got != gr {
				t.Errorf("template %q: %v -> label %q -> %v, %v", tmpl, gr, lbl, got, ok)
			}
		}
	}
}

func TestResourcesForSeries(t *testing.T) {
	tests := []struct {
		name           string
		mapping        config.ResourceMapping
		labels         model.LabelSet
		want           []schema.GroupResource
		wantNamespaced bool
	}{
		{
			name:           "seed overrides",
			mapping:        config.ResourceMapping{Overrides: map[string]config.GroupResource{"namespace": {Resource: "namespace"}, "pod_name": {Resource: "pod"}}},
			labels:         model.LabelSet{"__name__": "pm_status", "namespace": "abtest", "pod_name": "a", "state": "active processes"},
			want:           []schema.GroupResource{namespaces, pods},
			wantNamespaced: true,
		},
		{
			name:    "template, several groups, sorted",
			mapping: config.ResourceMapping{Template: "<<.Resource>>"},
			labels:  model.LabelSet{"__name__": "x", "deployment": "d", "pod": "p", "node": "n", "instance": "i", "job": "j"},
			// "job" names batch jobs, as in prometheus-adapter.
			want:           []schema.GroupResource{nodes, pods, deployments, {Group: "batch", Resource: "jobs"}},
			wantNamespaced: false,
		},
		{
			name:    "no resource labels",
			mapping: config.ResourceMapping{Template: "<<.Resource>>"},
			labels:  model.LabelSet{"__name__": "x", "instance": "i"},
		},
		{
			name:    "two labels for one resource are reported once",
			mapping: config.ResourceMapping{Template: "<<.Resource>>", Overrides: map[string]config.GroupResource{"pod_name": {Resource: "pods"}}},
			labels:  model.LabelSet{"pod": "a", "pod_name": "a"},
			want:    []schema.GroupResource{pods},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMapper(t, tc.mapping)
			got, namespaced := m.ResourcesForSeries(tc.labels)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("resources mismatch (-want +got):\n%s", diff)
			}
			if namespaced != tc.wantNamespaced {
				t.Errorf("namespaced = %v, want %v", namespaced, tc.wantNamespaced)
			}
		})
	}
}

func TestNewResourceMapperErrors(t *testing.T) {
	tests := []struct {
		name    string
		mapping config.ResourceMapping
		want    []string // substrings of the error
	}{
		{"template does not parse", config.ResourceMapping{Template: "<<.Resource"}, []string{"template: parsing"}},
		{"template without resource", config.ResourceMapping{Template: "kube_<<.Group>>"}, []string{"template: must use <<.Resource>>"}},
		{"template with unknown field", config.ResourceMapping{Template: "<<.Kind>>"}, []string{"template: rendering"}},
		{"override empty resource", config.ResourceMapping{Overrides: map[string]config.GroupResource{"pod": {}}}, []string{"overrides[pod].resource: must not be empty"}},
		{"override invalid label", config.ResourceMapping{Overrides: map[string]config.GroupResource{"pod-name": {Resource: "pods"}}}, []string{"overrides[pod-name]: invalid Prometheus label name"}},
		{"all at once", config.ResourceMapping{Template: "<<.Group>>", Overrides: map[string]config.GroupResource{"a": {}, "b-c": {Resource: "pods"}}}, []string{"template:", "overrides[a]", "overrides[b-c]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := NewResourceMapper(tc.mapping, testMapper())
			if err == nil {
				t.Fatal("NewResourceMapper succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, _, err := NewResourceMapper(config.ResourceMapping{}, nil); err == nil {
		t.Error("NewResourceMapper with a nil RESTMapper succeeded")
	}
}

func TestNewResourceMapperWarnings(t *testing.T) {
	m, warnings, err := NewResourceMapper(config.ResourceMapping{Overrides: map[string]config.GroupResource{
		"gadget": {Group: "example.com", Resource: "Gadgets"},
		"pod":    {Resource: "pods"},
		"pod2":   {Resource: "pod"},
	}}, testMapper())
	if err != nil {
		t.Fatalf("NewResourceMapper: %v", err)
	}
	want := []string{
		"overrides[gadget]: resource gadgets.example.com is not known",
		`overrides[pod2]: resource pods is also mapped from label "pod"`,
	}
	if len(warnings) != len(want) {
		t.Fatalf("warnings = %q, want %d", warnings, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(warnings[i], w) {
			t.Errorf("warning[%d] = %q, want prefix %q", i, warnings[i], w)
		}
	}
	// The unknown override is kept as written (lower-cased).
	if gr, ok := m.ResourceForLabel("gadget"); !ok || gr != (schema.GroupResource{Group: "example.com", Resource: "gadgets"}) {
		t.Errorf("ResourceForLabel(gadget) = %v, %v", gr, ok)
	}
	// The first label (sorted) is the one queries use.
	if l, err := m.LabelForResource(pods); err != nil || l != "pod" {
		t.Errorf("LabelForResource(pods) = %q, %v; want pod", l, err)
	}
	if diff := cmp.Diff(map[string]schema.GroupResource{"gadget": {Group: "example.com", Resource: "gadgets"}, "pod": pods, "pod2": pods}, m.Overrides()); diff != "" {
		t.Errorf("Overrides mismatch (-want +got):\n%s", diff)
	}
}

func TestResolutionMemo(t *testing.T) {
	cm := &countingMapper{RESTMapper: testMapper()}
	m, _, err := NewResourceMapper(config.ResourceMapping{Template: "<<.Resource>>"}, cm)
	if err != nil {
		t.Fatal(err)
	}
	lbls := model.LabelSet{"pod": "a", "instance": "i"}
	m.ResourcesForSeries(lbls)
	first := cm.calls.Load()
	if first == 0 {
		t.Fatal("no RESTMapper call for the first series")
	}
	for range 10 {
		m.ResourcesForSeries(lbls)
	}
	if got := cm.calls.Load(); got != first {
		t.Errorf("RESTMapper calls grew from %d to %d for repeated label sets", first, got)
	}
	m.ForgetUnresolved()
	m.ResourcesForSeries(lbls)
	retried := cm.calls.Load() - first
	if retried == 0 {
		t.Error("ForgetUnresolved: the unresolved label was not resolved again")
	}
	m.ResourcesForSeries(lbls)
	if got := cm.calls.Load() - first; got != retried {
		t.Errorf("after ForgetUnresolved, repeated lookups still call the RESTMapper (%d then %d)", retried, got)
	}
	if gr, ok := m.ResourceForLabel("pod"); !ok || gr != pods {
		t.Errorf("resolved label forgotten: %v, %v", gr, ok)
	}
}

func TestCandidatesBounded(t *testing.T) {
	p := splitPattern(groupSentinel + resourceSentinel + groupSentinel + resourceSentinel)
	if got := p.candidates(strings.Repeat("a", 200)); len(got) > maxCandidates {
		t.Errorf("%d candidates, want at most %d", len(got), maxCandidates)
	}
	// A placeholder used twice must match the same text twice.
	p = splitPattern(resourceSentinel + "_" + resourceSentinel)
	if diff := cmp.Diff([][2]string{{"", "pod"}}, p.candidates("pod_pod")); diff != "" {
		t.Errorf("repeated placeholder mismatch (-want +got):\n%s", diff)
	}
	if got := p.candidates("pod_node"); len(got) != 0 {
		t.Errorf("repeated placeholder matched different text: %v", got)
	}
}
