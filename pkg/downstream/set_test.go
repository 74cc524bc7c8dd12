package downstream

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

func TestCustomPath(t *testing.T) {
	deploy := schema.GroupResource{Group: "apps", Resource: "deployments"}
	tests := []struct {
		name           string
		info           cmprovider.CustomMetricInfo
		namespace, obj string
		want           string
	}{
		{"namespaced object", cmprovider.CustomMetricInfo{GroupResource: pods, Metric: "m"}, "ns", "p", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/p/m"},
		{"grouped resource, selector", cmprovider.CustomMetricInfo{GroupResource: deploy, Metric: "m"}, "ns", "*", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/deployments.apps/*/m"},
		{"cluster-scoped", cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "nodes"}, Metric: "m"}, "", "n1", "/apis/custom.metrics.k8s.io/v1beta2/nodes/n1/m"},
		{"a namespace's metric", cmprovider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "namespaces"}, Metric: "m"}, "", "team-a", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/metrics/m"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := customPath("v1beta2", tc.info, tc.namespace, tc.obj); got != tc.want {
				t.Errorf("customPath = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTargetOfAPIService(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\n...\n")
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "v1beta1.external.metrics.k8s.io"},
		"spec": map[string]any{
			"service":  map[string]any{"namespace": "keda", "name": "keda-operator-metrics-apiserver", "port": int64(6443)},
			"caBundle": base64.StdEncoding.EncodeToString(ca),
		},
	}}
	got, err := targetOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := Target{Host: "https://keda-operator-metrics-apiserver.keda.svc:6443", ServerName: "keda-operator-metrics-apiserver.keda.svc", CAData: ca}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("targetOf (-want +got):\n%s", diff)
	}
	local := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "v1.apps"}, "spec": map[string]any{}}}
	if _, err := targetOf(local); err == nil || !strings.Contains(err.Error(), "no spec.service") {
		t.Errorf("targetOf a local APIService = %v, want an error", err)
	}
}

// fakeResolver answers each Resolve with the next target.
type fakeResolver struct {
	targets []Target
	err     error
	calls   int
}

func (r *fakeResolver) Resolve(_ context.Context, name string) (Target, error) {
	if r.err != nil {
		return Target{}, r.err
	}
	t := r.targets[min(r.calls, len(r.targets)-1)]
	r.calls++
	return t, nil
}

// An APIService handed over to promscaler keeps the downstream where it
// was; a CA rotation on the same Service is followed.
func TestAPIServiceFollowedUntilHandedOver(t *testing.T) {
	d := newFakeDownstream(t)
	ca := d.caPEM()
	res := &fakeResolver{targets: []Target{
		{Host: d.URL, CAData: ca},
		{Host: d.URL, CAData: append([]byte("# rotated\n"), ca...)},
		{Host: "https://promscaler.monitoring.svc:443", CAData: []byte("promscaler's CA")},
	}}
	path := filepath.Join(t.TempDir(), "d.yaml")
	must(t, os.WriteFile(path, []byte("downstreams:\n- name: keda\n  apiService: v1beta1.external.metrics.k8s.io\n  apis: [external]\n  credentials: {none: true}\n"), 0o600))
	ours := newOurs()
	s, err := New(Options{Path: path, Ours: ours, Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for range 3 {
		s.Refresh(t.Context())
		m := s.table.Load().member("keda")
		hosts = append(hosts, m.target.Host+" "+strings.SplitN(string(m.target.CAData), "\n", 2)[0])
		if _, err := s.WrapExternal(ours).GetExternalMetric(t.Context(), "ns", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "queue_depth"}); err != nil {
			t.Errorf("refresh %d: %v", len(hosts), err)
		}
	}
	want := []string{d.URL + " -----BEGIN CERTIFICATE-----", d.URL + " # rotated", d.URL + " # rotated"}
	if diff := cmp.Diff(want, hosts); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

func TestUnresolvedDownstreamStatus(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.yaml")
	must(t, os.WriteFile(path, []byte("downstreams:\n- name: keda\n  apiService: v1beta1.external.metrics.k8s.io\n"), 0o600))
	ours := newOurs()
	s, err := New(Options{Path: path, Ours: ours, Resolver: &fakeResolver{err: errors.New("apiservices.apiregistration.k8s.io is forbidden")}})
	if err != nil {
		t.Fatal(err)
	}
	s.Refresh(t.Context())
	got := s.Details()
	want := []string{`downstream "keda": down since 0001-01-01T00:00:00Z (last: not resolved); its metrics answer 503, promscaler's are unaffected; lists 0 custom and 0 external metrics; discovery never succeeded: downstream keda: apiservices.apiregistration.k8s.io is forbidden`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
	// Nothing is forwarded: ours serve what they serve.
	if _, err := s.WrapExternal(ours).GetExternalMetric(t.Context(), "ns", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "ours_ext"}); err != nil {
		t.Error(err)
	}
}

// Routes change with the file, re-read at each refresh; a broken file
// keeps the previous one.
func TestReloadMovesMetricsOver(t *testing.T) {
	d := newFakeDownstream(t)
	s, ours, _ := setup(t, d, "  routes: {external: [shared_ext]}\n")
	ext := s.WrapExternal(ours)
	ask := func() {
		t.Helper()
		_, _ = ext.GetExternalMetric(t.Context(), "ns", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "shared_ext"})
	}
	ask()
	data, err := os.ReadFile(s.opts.Path)
	must(t, err)
	must(t, os.WriteFile(s.opts.Path, []byte(strings.Replace(string(data), "  routes: {external: [shared_ext]}\n", "", 1)+"  bogus: 1\n"), 0o600))
	s.Refresh(t.Context())
	ask() // the broken file is not in service: still routed
	must(t, os.WriteFile(s.opts.Path, []byte(strings.Replace(string(data), "  routes: {external: [shared_ext]}\n", "", 1)), 0o600))
	s.Refresh(t.Context())
	ask() // moved over: promscaler's
	if got := len(d.metricRequests()); got != 2 {
		t.Errorf("downstream asked %d times, want 2 (before the move, and with the broken file)", got)
	}
	if diff := cmp.Diff([]string{"external ns shared_ext"}, ours.askedFor()); diff != "" {
		t.Errorf("promscaler asked (-want +got):\n%s", diff)
	}
}

// A downstream serving only custom metrics v1beta1 is asked in v1beta1.
func TestCustomV1beta1Downstream(t *testing.T) {
	d := newFakeDownstream(t)
	d.v1beta1Only = true
	s, ours, _ := setup(t, d, "  apis: [custom]\n")
	if got := s.table.Load().member("sample").discovered().CustomVersion; got != "v1beta1" {
		t.Errorf("custom version = %q, want v1beta1", got)
	}
	list, err := s.WrapCustom(ours).GetMetricBySelector(t.Context(), "ns", labels.Everything(), cmprovider.CustomMetricInfo{GroupResource: pods, Namespaced: true, Metric: "downstream_only"}, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Metric.Name != "downstream_only" || list.Items[0].Value.String() != "3" {
		t.Errorf("v1beta1 answer = %+v", list.Items)
	}
}

// A downstream listing the library's placeholders takes every metric
// promscaler does not serve (and the routed ones).
func TestCatchAllDownstream(t *testing.T) {
	d := newFakeDownstream(t)
	d.placeholders = true
	s, ours, _ := setup(t, d, "  routes: {external: [shared_ext]}\n")
	if got := s.table.Load().member("sample").discovered().CatchAll; !cmp.Equal(got, []API{Custom, External}) {
		t.Fatalf("catch-all = %v, want both APIs", got)
	}
	ext := s.WrapExternal(ours)
	for _, m := range []string{"queue_depth", "ours_ext", "shared_ext"} {
		_, _ = ext.GetExternalMetric(t.Context(), "ns", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: m})
	}
	if _, err := s.WrapCustom(ours).GetMetricBySelector(t.Context(), "ns", labels.Everything(), cmprovider.CustomMetricInfo{GroupResource: pods, Namespaced: true, Metric: "downstream_only"}, labels.Everything()); err != nil {
		t.Fatal(err)
	}
	wantDown := []string{
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue_depth",
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/shared_ext",
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/%2A/downstream_only",
	}
	if diff := cmp.Diff(wantDown, d.metricRequests()); diff != "" {
		t.Errorf("downstream asked (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"external ns ours_ext"}, ours.askedFor()); diff != "" {
		t.Errorf("promscaler asked (-want +got):\n%s", diff)
	}
	// The placeholders are not in the union.
	if diff := cmp.Diff([]cmprovider.ExternalMetricInfo{{Metric: "ours_ext"}, {Metric: "shared_ext"}}, ext.ListAllExternalMetrics()); diff != "" {
		t.Errorf("external union (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Overlap{{API: External, Name: "shared_ext", Downstream: "sample", ServedBy: "sample"}}, s.Overlaps()); diff != "" {
		t.Errorf("overlaps (-want +got):\n%s", diff)
	}
}
