package downstream

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmv1beta1 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta1"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// fakeDownstream is a downstream metrics server over TLS: it lists
// custom (v1beta2) and external metrics and answers them with fixed values,
// recording each request.
type fakeDownstream struct {
	*httptest.Server
	custom   []metav1.APIResource
	external []metav1.APIResource
	// block, when set, holds metric requests until closed.
	block chan struct{}
	// v1beta1Only: custom metrics are served in v1beta1 only.
	v1beta1Only bool
	// placeholders: the discovery documents list the library's
	// placeholders, not the metrics.
	placeholders bool

	mu       sync.Mutex
	requests []string // path?query
	auth     []string
}

func newFakeDownstream(t *testing.T) *fakeDownstream {
	d := &fakeDownstream{
		custom: []metav1.APIResource{
			{Name: "pods/downstream_only", Namespaced: true, Kind: "MetricValueList", Verbs: []string{"get"}},
			{Name: "pods/shared", Namespaced: true, Kind: "MetricValueList", Verbs: []string{"get"}},
		},
		external: []metav1.APIResource{
			{Name: "queue_depth", Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}},
			{Name: "shared_ext", Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}},
		},
	}
	d.Server = httptest.NewTLSServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.Close)
	return d
}

func (d *fakeDownstream) serve(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.requests = append(d.requests, r.URL.RequestURI())
	d.auth = append(d.auth, r.Header.Get("Authorization"))
	block := d.block
	d.mu.Unlock()
	if d.placeholders && strings.Count(r.URL.Path, "/") == 3 {
		// A discovery document of the library's default provider.
		name := "/custommetrics"
		if strings.HasPrefix(r.URL.Path, "/apis/external") {
			name = "externalmetrics"
		}
		writeJSON(w, http.StatusOK, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: strings.TrimPrefix(r.URL.Path, "/apis/"), APIResources: []metav1.APIResource{{Name: name, Namespaced: true}}})
		return
	}
	if d.v1beta1Only {
		d.serveV1beta1(w, r)
		return
	}
	switch r.URL.Path {
	case "/apis/custom.metrics.k8s.io/v1beta2":
		writeJSON(w, http.StatusOK, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "custom.metrics.k8s.io/v1beta2", APIResources: d.custom})
		return
	case "/apis/external.metrics.k8s.io/v1beta1":
		writeJSON(w, http.StatusOK, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "external.metrics.k8s.io/v1beta1", APIResources: d.external})
		return
	}
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
			return
		}
	}
	switch r.URL.Path {
	case "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/downstream_only",
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/web-1/downstream_only":
		writeJSON(w, http.StatusOK, customList(r.URL.Query().Get("labelSelector")))
	case "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue_depth":
		writeJSON(w, http.StatusOK, externalList(r.URL.Query().Get("labelSelector")))
	case "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/shared":
		writeJSON(w, http.StatusOK, customList(""))
	case "/apis/external.metrics.k8s.io/v1beta1/namespaces/forbidden/queue_depth":
		writeJSON(w, http.StatusForbidden, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: "downstream says no"})
	default:
		writeJSON(w, http.StatusNotFound, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound, Message: "no such metric at the downstream"})
	}
}

// serveV1beta1 is a server of custom metrics v1beta1 only.
func (d *fakeDownstream) serveV1beta1(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/apis/custom.metrics.k8s.io/v1beta1":
		writeJSON(w, http.StatusOK, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: "custom.metrics.k8s.io/v1beta1", APIResources: d.custom})
	case "/apis/custom.metrics.k8s.io/v1beta1/namespaces/ns/pods/*/downstream_only":
		writeJSON(w, http.StatusOK, cmv1beta1.MetricValueList{TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: "custom.metrics.k8s.io/v1beta1"},
			Items: []cmv1beta1.MetricValue{{DescribedObject: corev1ObjectRef("web-1"), MetricName: "downstream_only", Timestamp: metav1.Unix(1700000000, 0), Value: resource.MustParse("3")}}})
	default:
		writeJSON(w, http.StatusNotFound, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// customList is the downstream's answer for downstream_only: two pods.
func customList(selector string) cmv1beta2.MetricValueList {
	ts := metav1.Unix(1700000000, 0)
	w := int64(60)
	item := func(pod, v string) cmv1beta2.MetricValue {
		return cmv1beta2.MetricValue{
			DescribedObject: corev1ObjectRef(pod), Timestamp: ts, WindowSeconds: &w,
			Metric: cmv1beta2.MetricIdentifier{Name: "downstream_only", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"sel": selector}}},
			Value:  resource.MustParse(v),
		}
	}
	return cmv1beta2.MetricValueList{TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: "custom.metrics.k8s.io/v1beta2"},
		Items: []cmv1beta2.MetricValue{item("web-1", "1500m"), item("web-2", "7")}}
}

func corev1ObjectRef(pod string) (r corev1.ObjectReference) {
	r.Kind, r.Namespace, r.Name, r.APIVersion = "Pod", "ns", pod, "v1"
	return r
}

func externalList(selector string) emv1beta1.ExternalMetricValueList {
	return emv1beta1.ExternalMetricValueList{TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: "external.metrics.k8s.io/v1beta1"},
		Items: []emv1beta1.ExternalMetricValue{{MetricName: "queue_depth", MetricLabels: map[string]string{"queue": "jobs", "sel": selector},
			Timestamp: metav1.Unix(1700000000, 0), Value: resource.MustParse("42")}}}
}

func (d *fakeDownstream) metricRequests() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, r := range d.requests {
		if r != "/apis/custom.metrics.k8s.io/v1beta2" && r != "/apis/external.metrics.k8s.io/v1beta1" && r != "/apis/custom.metrics.k8s.io/v1beta1" {
			out = append(out, r)
		}
	}
	return out
}

// caPEM is the downstream's certificate as a CA file's content.
func (d *fakeDownstream) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d.Certificate().Raw})
}

// fakeOurs is promscaler's side: the metrics it serves and a record of
// what it was asked.
type fakeOurs struct {
	custom   []cmprovider.CustomMetricInfo
	external []cmprovider.ExternalMetricInfo

	mu    sync.Mutex
	asked []string
}

var (
	_ Ours                               = (*fakeOurs)(nil)
	_ cmprovider.CustomMetricsProvider   = (*fakeOurs)(nil)
	_ cmprovider.ExternalMetricsProvider = (*fakeOurs)(nil)
)

func (o *fakeOurs) ServesCustom(info cmprovider.CustomMetricInfo, _ string) bool {
	return slices.ContainsFunc(o.custom, func(i cmprovider.CustomMetricInfo) bool { return customKey(i) == customKey(info) })
}

func (o *fakeOurs) ServesExternal(_, metric string) bool {
	return slices.ContainsFunc(o.external, func(i cmprovider.ExternalMetricInfo) bool { return i.Metric == metric })
}

func (o *fakeOurs) record(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asked = append(o.asked, s)
}

func (o *fakeOurs) GetMetricByName(_ context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValue, error) {
	o.record("custom " + name.String() + " " + info.Metric)
	return &custom_metrics.MetricValue{Metric: custom_metrics.MetricIdentifier{Name: info.Metric}, Value: resource.MustParse("1")}, nil
}

func (o *fakeOurs) GetMetricBySelector(_ context.Context, ns string, _ labels.Selector, info cmprovider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValueList, error) {
	o.record("custom " + ns + "/* " + info.Metric)
	return &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{{Metric: custom_metrics.MetricIdentifier{Name: info.Metric}, Value: resource.MustParse("1")}}}, nil
}

func (o *fakeOurs) ListAllMetrics() []cmprovider.CustomMetricInfo { return o.custom }

func (o *fakeOurs) GetExternalMetric(_ context.Context, ns string, _ labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	o.record("external " + ns + " " + info.Metric)
	return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{{MetricName: info.Metric, Value: resource.MustParse("1")}}}, nil
}

func (o *fakeOurs) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo { return o.external }

func (o *fakeOurs) lists() ([]cmprovider.CustomMetricInfo, []cmprovider.ExternalMetricInfo) {
	return o.custom, o.external
}

func (o *fakeOurs) askedFor() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.asked)
}

var pods = schema.GroupResource{Resource: "pods"}

// newOurs serves pods/ours, pods/shared, external ours_ext and shared_ext.
func newOurs() *fakeOurs {
	return &fakeOurs{
		custom: []cmprovider.CustomMetricInfo{
			{GroupResource: pods, Namespaced: true, Metric: "ours"},
			{GroupResource: pods, Namespaced: true, Metric: "shared"},
		},
		external: []cmprovider.ExternalMetricInfo{{Metric: "ours_ext"}, {Metric: "shared_ext"}},
	}
}

// setup writes a configuration naming d (extra is appended to its entry),
// with a token file, and returns the refreshed Set, ours and the registry.
func setup(t *testing.T, d *fakeDownstream, extra string) (*Set, *fakeOurs, *prometheus.Registry) {
	t.Helper()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	token := filepath.Join(dir, "token")
	must(t, os.WriteFile(ca, d.caPEM(), 0o600))
	must(t, os.WriteFile(token, []byte("adapter-token"), 0o600))
	cfg := fmt.Sprintf("downstreams:\n- name: sample\n  url: %s\n  tls: {caFile: %s}\n  credentials: {tokenFile: %s}\n%s", d.URL, ca, token, extra)
	path := filepath.Join(dir, "downstream.yaml")
	must(t, os.WriteFile(path, []byte(cfg), 0o600))
	ours := newOurs()
	reg := prometheus.NewRegistry()
	s, err := New(Options{Path: path, Ours: ours, OurMetrics: ours.lists, Registerer: reg, Base: &rest.Config{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Refresh(t.Context())
	return s, ours, reg
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
