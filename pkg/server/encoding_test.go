package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmv1beta1 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta1"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/apiencode"
)

// fixedProvider answers every metric with the same awkward lists (names
// encoding/json escapes, selectors, sub-second and zero timestamps, every
// kind of quantity); "empty" with no items, "missing" with a 404.
type fixedProvider struct{}

var (
	_ cmprovider.CustomMetricsProvider   = fixedProvider{}
	_ cmprovider.ExternalMetricsProvider = fixedProvider{}
)

func fixedCustomList() *custom_metrics.MetricValueList {
	win := int64(120)
	ts := metav1.NewTime(time.Date(2026, 11, 30, 14, 5, 6, 789_000_000, time.FixedZone("x", 3600)))
	return &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{
		{
			DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-<0>&\u2028", APIVersion: "/v1"},
			Metric:          custom_metrics.MetricIdentifier{Name: "m"},
			Timestamp:       ts,
			WindowSeconds:   &win,
			Value:           *resource.NewMilliQuantity(1500, resource.DecimalSI),
		},
		{
			DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", Namespace: "default", Name: `caf\u00e9 "quoted"`, UID: "u-1"},
			Metric: custom_metrics.MetricIdentifier{Name: "m", Selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"b": "2", "a": "<1>"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}}},
			}},
			Value: resource.MustParse("123456789012345678901234567890"),
		},
		{
			DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", Namespace: "default", Name: "pod-c"},
			Metric:          custom_metrics.MetricIdentifier{Name: "m", Selector: &metav1.LabelSelector{}},
			Timestamp:       metav1.NewTime(time.Unix(1_700_000_000, 0)),
			Value:           *resource.NewQuantity(3<<30, resource.BinarySI),
		},
	}}
}

func fixedExternalList() *external_metrics.ExternalMetricValueList {
	win := int64(30)
	return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{
		{MetricName: "queue", MetricLabels: map[string]string{"queue": "a&b", "region": "\u65e5\u672c"}, Timestamp: metav1.NewTime(time.Unix(1_700_000_000, 5)), WindowSeconds: &win, Value: resource.MustParse("+5")},
		{MetricName: "queue", MetricLabels: map[string]string{}, Value: *resource.NewScaledQuantity(-7, resource.Micro)},
		{MetricName: "queue", Timestamp: metav1.NewTime(time.Unix(1_700_000_001, 0)), Value: resource.MustParse("0")},
	}}
}

func (fixedProvider) GetMetricByName(_ context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValue, error) {
	if info.Metric == "missing" {
		return nil, cmprovider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	v := fixedCustomList().Items[1]
	return &v, nil
}

func (fixedProvider) GetMetricBySelector(_ context.Context, _ string, _ labels.Selector, info cmprovider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValueList, error) {
	switch info.Metric {
	case "missing":
		return nil, cmprovider.NewMetricNotFoundError(info.GroupResource, info.Metric)
	case "empty":
		return &custom_metrics.MetricValueList{}, nil
	case "big":
		// Over the API server's 128 KiB gzip threshold.
		l := fixedCustomList()
		for range 500 {
			l.Items = append(l.Items, fixedCustomList().Items...)
		}
		return l, nil
	}
	return fixedCustomList(), nil
}

func (fixedProvider) ListAllMetrics() []cmprovider.CustomMetricInfo {
	return []cmprovider.CustomMetricInfo{
		{GroupResource: schema.GroupResource{Resource: "pods"}, Metric: "m", Namespaced: true},
		{GroupResource: schema.GroupResource{Resource: "namespaces"}, Metric: "m"},
	}
}

func (fixedProvider) GetExternalMetric(_ context.Context, _ string, _ labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	switch info.Metric {
	case "missing":
		return nil, cmprovider.NewMetricNotFoundError(schema.GroupResource{Group: "external.metrics.k8s.io"}, info.Metric)
	case "empty":
		return &external_metrics.ExternalMetricValueList{}, nil
	}
	return fixedExternalList(), nil
}

func (fixedProvider) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo {
	return []cmprovider.ExternalMetricInfo{{Metric: "queue"}}
}

// countingSerializer counts the metric lists its codecs encode.
type countingSerializer struct {
	runtime.NegotiatedSerializer
	lists *atomic.Int64
}

func (s countingSerializer) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return countingEncoder{Encoder: s.NegotiatedSerializer.EncoderForVersion(e, gv), lists: s.lists}
}

type countingEncoder struct {
	runtime.Encoder
	lists *atomic.Int64
}

func (e countingEncoder) Encode(obj runtime.Object, w io.Writer) error {
	switch obj.(type) {
	case *custom_metrics.MetricValueList, *external_metrics.ExternalMetricValueList:
		e.lists.Add(1)
	}
	return e.Encoder.Encode(obj, w)
}

// answer is what a request got: status, content type and body.
type answer struct {
	Code        int
	ContentType string
	Encoding    string
	Body        string
}

type encodingRequest struct {
	name, path, accept, acceptEncoding string
	// direct: a metric list the direct encoder writes (compact JSON);
	// library: one the library's codec writes (pretty, YAML, protobuf).
	direct, library bool
}

func (ts *testServer) do(r encodingRequest) answer {
	ts.t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.base+r.path, nil)
	if err != nil {
		ts.t.Fatal(err)
	}
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	}
	if r.acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", r.acceptEncoding)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatalf("GET %s: %v", r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("GET %s: reading the body: %v", r.path, err)
	}
	body := string(b)
	if r.path == "/apis" {
		// Discovery names the server's address, a random port.
		body = strings.ReplaceAll(body, ts.base[strings.LastIndex(ts.base, ":"):]+`"`, `:PORT"`)
	}
	return answer{Code: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Encoding: resp.Header.Get("Content-Encoding"), Body: body}
}

const (
	cmV1beta1 = "/apis/custom.metrics.k8s.io/v1beta1"
	cmV1beta2 = "/apis/custom.metrics.k8s.io/v1beta2"
	emV1beta1 = "/apis/external.metrics.k8s.io/v1beta1"
)

var encodingRequests = []encodingRequest{
	{name: "custom v1beta1 pods", path: cmV1beta1 + "/namespaces/default/pods/*/m", direct: true},
	{name: "custom v1beta2 pods", path: cmV1beta2 + "/namespaces/default/pods/*/m", direct: true},
	{name: "custom v1beta2 pods json or anything", path: cmV1beta2 + "/namespaces/default/pods/*/m?metricLabelSelector=a%3Db", accept: "application/json, */*", direct: true},
	{name: "custom v1beta2 one pod", path: cmV1beta2 + "/namespaces/default/pods/pod-a/m", direct: true},
	{name: "custom v1beta1 namespace metric", path: cmV1beta1 + "/namespaces/default/metrics/m", direct: true},
	{name: "custom v1beta2 root-scoped", path: cmV1beta2 + "/nodes/*/m", direct: true},
	{name: "custom v1beta2 empty", path: cmV1beta2 + "/namespaces/default/pods/*/empty", direct: true},
	{name: "custom v1beta2 gzip", path: cmV1beta2 + "/namespaces/default/pods/*/big", acceptEncoding: "gzip", direct: true},
	{name: "custom v1beta1 big", path: cmV1beta1 + "/namespaces/default/pods/*/big", direct: true},
	{name: "custom v1beta2 missing", path: cmV1beta2 + "/namespaces/default/pods/*/missing"},
	{name: "custom v1beta1 pretty", path: cmV1beta1 + "/namespaces/default/pods/*/m?pretty=true", library: true},
	{name: "custom v1beta2 pretty", path: cmV1beta2 + "/namespaces/default/pods/*/m?pretty=true", library: true},
	{name: "custom v1beta2 yaml", path: cmV1beta2 + "/namespaces/default/pods/*/m", accept: "application/yaml", library: true},
	{name: "custom v1beta1 protobuf", path: cmV1beta1 + "/namespaces/default/pods/*/m", accept: "application/vnd.kubernetes.protobuf", library: true},
	{name: "external", path: emV1beta1 + "/namespaces/default/queue", direct: true},
	{name: "external empty", path: emV1beta1 + "/namespaces/default/empty", direct: true},
	{name: "external missing", path: emV1beta1 + "/namespaces/default/missing"},
	{name: "external pretty", path: emV1beta1 + "/namespaces/default/queue?pretty=true", library: true},
	{name: "external yaml", path: emV1beta1 + "/namespaces/default/queue", accept: "application/yaml", library: true},
	{name: "external partial metadata", path: emV1beta1 + "/namespaces/default/empty", accept: "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
	{name: "apis", path: "/apis"},
	{name: "apis aggregated", path: "/apis", accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"},
	{name: "custom group", path: "/apis/custom.metrics.k8s.io"},
	{name: "custom v1beta1 resources", path: cmV1beta1},
	{name: "custom v1beta2 resources", path: cmV1beta2},
	{name: "external group", path: "/apis/external.metrics.k8s.io"},
	{name: "external resources", path: emV1beta1},
	{name: "openapi v2", path: "/openapi/v2"},
	{name: "openapi v3", path: "/openapi/v3"},
	{name: "openapi v3 custom v1beta1", path: "/openapi/v3/apis/custom.metrics.k8s.io/v1beta1"},
	{name: "openapi v3 custom v1beta2", path: "/openapi/v3/apis/custom.metrics.k8s.io/v1beta2"},
	{name: "openapi v3 external", path: "/openapi/v3/apis/external.metrics.k8s.io/v1beta1"},
}

// TestServerEncodingUnchanged serves the same answers from the adapter as
// built (metrics groups installed by installMetricsAPIs, lists written by
// apiencode) and from the adapter with the library's own installer and
// serializer, and compares every answer byte for byte: metric lists in
// every version and media type, errors, discovery and OpenAPI. It also
// checks the direct encoder, not the library's, wrote the compact JSON
// lists, and that the answers decode to the provider's lists.
func TestServerEncodingUnchanged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two full API servers")
	}
	want := make(map[string]answer, len(encodingRequests))
	lib := startReadyServer(t, fixedProvider{}, fixedProvider{}, func(c *Config) { c.libraryMetricsAPIs = true })
	for _, r := range encodingRequests {
		want[r.name] = lib.do(r)
	}
	lib.stop()

	var libraryLists atomic.Int64
	ts := startReadyServer(t, fixedProvider{}, fixedProvider{}, func(c *Config) {
		c.MetricsSerializer = func(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
			return apiencode.NewNegotiatedSerializer(countingSerializer{NegotiatedSerializer: ns, lists: &libraryLists})
		}
	})
	for _, r := range encodingRequests {
		t.Run(r.name, func(t *testing.T) {
			before := libraryLists.Load()
			got := ts.do(r)
			byLibrary := libraryLists.Load() - before
			t.Logf("GET %s: %d %s, %d bytes", r.path, got.Code, got.ContentType, len(got.Body))
			if diff := cmp.Diff(want[r.name], got); diff != "" {
				t.Errorf("GET %s (Accept %q) differs from the library's answer (-library +adapter):\n%s", r.path, r.accept, diff)
			}
			switch {
			case r.direct && byLibrary != 0:
				t.Errorf("GET %s: the library's codec wrote %d lists, want the direct encoder", r.path, byLibrary)
			case r.library && byLibrary == 0:
				t.Errorf("GET %s: the library's codec wrote no list", r.path)
			}
			if r.direct || r.library {
				if got.Code != http.StatusOK {
					t.Fatalf("GET %s = %d %s, want 200", r.path, got.Code, truncateForLog(got.Body))
				}
				if got.Encoding != r.acceptEncoding {
					t.Errorf("GET %s: Content-Encoding %q, want %q", r.path, got.Encoding, r.acceptEncoding)
				}
				if got.Encoding == "" {
					checkDecodes(t, r, got)
				}
			}
		})
	}
	ts.stop()
}

// checkDecodes decodes a metric list answer with the API server's codecs
// and compares it with the provider's list converted to its version.
func checkDecodes(t *testing.T, r encodingRequest, got answer) {
	t.Helper()
	if got.ContentType == "application/json" && !json.Valid([]byte(got.Body)) {
		t.Fatalf("GET %s: invalid JSON: %s", r.path, truncateForLog(got.Body))
	}
	obj, gvk, err := cmapiserver.Codecs.UniversalDeserializer().Decode([]byte(got.Body), nil, nil)
	if err != nil {
		t.Fatalf("GET %s: decoding the %s answer: %v", r.path, got.ContentType, err)
	}
	var internal runtime.Object
	switch gvk.Group {
	case custom_metrics.GroupName:
		l := fixedCustomList()
		switch r.name {
		case "custom v1beta2 one pod", "custom v1beta1 namespace metric":
			l.Items = l.Items[1:2]
		case "custom v1beta2 empty":
			l.Items = nil
		case "custom v1beta1 big":
			for range 500 {
				l.Items = append(l.Items, fixedCustomList().Items...)
			}
		}
		internal = l
	default:
		l := fixedExternalList()
		if r.name == "external empty" {
			l.Items = []external_metrics.ExternalMetricValue{}
		}
		internal = l
	}
	var want runtime.Object
	switch gvk.GroupVersion() {
	case cmv1beta1.SchemeGroupVersion:
		want = &cmv1beta1.MetricValueList{}
	case cmv1beta2.SchemeGroupVersion:
		want = &cmv1beta2.MetricValueList{}
	case emv1beta1.SchemeGroupVersion:
		want = &emv1beta1.ExternalMetricValueList{}
	default:
		t.Fatalf("GET %s: decoded a %s", r.path, gvk)
	}
	if err := cmapiserver.Scheme.Convert(internal, want, nil); err != nil {
		t.Fatal(err)
	}
	want.GetObjectKind().SetGroupVersionKind(*gvk)
	// The wire keeps whole seconds; quantities compare by value.
	opts := []cmp.Option{
		cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
		cmp.Comparer(func(a, b metav1.Time) bool { return a.Unix() == b.Unix() }),
	}
	if diff := cmp.Diff(want, obj, opts...); diff != "" {
		t.Errorf("GET %s: decoded answer differs from the provider's list (-want +got):\n%s", r.path, diff)
	}
}
