package resourcemetrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/rest"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"

	"github.com/promscaler/promscaler/pkg/objectcache"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/resourcemetrics"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/promtest"
)

// fakeObjects is an in-memory PodLister and NodeLister.
type fakeObjects struct {
	mu    sync.Mutex
	pods  []*metav1.PartialObjectMetadata
	nodes []*metav1.PartialObjectMetadata
	err   error
	lists int
}

func (f *fakeObjects) ListPods(_ context.Context, ns string, sel labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.err != nil {
		return nil, f.err
	}
	var out []*metav1.PartialObjectMetadata
	for _, p := range f.pods {
		if (ns == "" || p.Namespace == ns) && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeObjects) GetPod(_ context.Context, ns, name string) (*metav1.PartialObjectMetadata, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	for _, p := range f.pods {
		if p.Namespace == ns && p.Name == name {
			return p, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

func (f *fakeObjects) ListNodes(_ context.Context, sel labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []*metav1.PartialObjectMetadata
	for _, n := range f.nodes {
		if sel.Matches(labels.Set(n.Labels)) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (f *fakeObjects) GetNode(_ context.Context, name string) (*metav1.PartialObjectMetadata, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
}

// newPromClient returns the project's Prometheus client talking to the
// test kit's Prometheus answering instant queries with answer.
func newPromClient(t testing.TB, answer func(query string) (int, string)) *promclient.Client {
	t.Helper()
	srv := promtest.New(nil)
	srv.HandleQuery(answer)
	t.Cleanup(srv.Close)
	c, err := promclient.New(promclient.Config{Address: srv.URL, HTTPClient: srv.Client(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("promclient.New: %v", err)
	}
	return c
}

// newServer serves testConfig's metrics of objs from q: see serve.
func newServer(t testing.TB, objs *fakeObjects, q promclient.SampleQuerier) http.Handler {
	t.Helper()
	return serve(t, objs, sourceConfig(t, q))
}

// testServer serves the metrics of testCluster.
func testServer(t testing.TB) http.Handler {
	t.Helper()
	objs, fp := testCluster()
	return newServer(t, objs, fp.client(t))
}

// serve installs the API over objs and a Source of cfg on a new generic
// API server (see newGenericServer) and returns its handler.
func serve(t testing.TB, objs *fakeObjects, cfg resourcemetrics.SourceConfig) http.Handler {
	t.Helper()
	gs := newGenericServer(t)
	if err := newAPI(t, objs, cfg).Install(gs); err != nil {
		t.Fatalf("Install: %v", err)
	}
	return gs.Handler
}

// newAPI is the API over objs and a Source of cfg.
func newAPI(t testing.TB, objs *fakeObjects, cfg resourcemetrics.SourceConfig) *resourcemetrics.API {
	t.Helper()
	src := mustSource(t, cfg)
	api, err := resourcemetrics.New(resourcemetrics.Config{Pods: objs, Nodes: objs, PodMetrics: src, NodeMetrics: src})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return api
}

// genericConfig configures a generic API server (no authentication or
// authorization, not listening); base holds the OpenAPI configuration
// SetOpenAPIConfig gives an adapter of that name, not yet in cfg.
func genericConfig(name string) (cfg *genericapiserver.Config, base *basecmd.AdapterBase) {
	cfg = genericapiserver.NewConfig(resourcemetrics.Codecs)
	cfg.LoopbackClientConfig = &rest.Config{}
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	cfg.ExternalAddress = "127.0.0.1:443"
	base = &basecmd.AdapterBase{Name: name}
	resourcemetrics.SetOpenAPIConfig(base)
	return cfg, base
}

// newGenericServer builds a generic API server with the OpenAPI
// configuration SetOpenAPIConfig gives an adapter.
func newGenericServer(t testing.TB) *genericapiserver.GenericAPIServer {
	t.Helper()
	cfg, base := genericConfig("test-adapter")
	cfg.OpenAPIConfig, cfg.OpenAPIV3Config = base.OpenAPIConfig, base.OpenAPIV3Config
	return completeServer(t, cfg)
}

func completeServer(t testing.TB, cfg *genericapiserver.Config) *genericapiserver.GenericAPIServer {
	t.Helper()
	gs, err := cfg.Complete(nil).New("test", genericapiserver.NewEmptyDelegate())
	if err != nil {
		t.Fatalf("building the generic API server: %v", err)
	}
	return gs
}

func do(t testing.TB, h http.Handler, path, accept string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, body
}

// getJSON GETs path (as accept, when not empty), fails the test unless the
// answer is a 200 that decodes into v, and returns the body.
func getJSON(t *testing.T, h http.Handler, path, accept string, v any) []byte {
	t.Helper()
	code, body := do(t, h, path, accept)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decoding GET %s: %v\n%s", path, err, body)
	}
	return body
}

// testCluster is two namespaces of pods and two nodes, with samples for
// all but one pod.
func testCluster() (*fakeObjects, *fakeProm) {
	objs := &fakeObjects{
		pods: []*metav1.PartialObjectMetadata{
			pod("shop", "web-1", map[string]string{"app": "web"}),
			pod("shop", "web-2", map[string]string{"app": "web"}),
			pod("shop", "db-0", map[string]string{"app": "db"}),
			pod("shop", "starting", map[string]string{"app": "web"}),
			pod("ops", "agent", map[string]string{"app": "agent"}),
		},
		nodes: []*metav1.PartialObjectMetadata{node("node-a"), node("node-b")},
	}
	fp := &fakeProm{ts: sampleTime, series: []series{
		podSeries("cpu", "shop", "web-1", "app", 0.487558164),
		podSeries("memory", "shop", "web-1", "app", 749785088),
		podSeries("cpu", "shop", "web-1", "proxy", 0.01),
		podSeries("memory", "shop", "web-1", "proxy", 10<<20),
		podSeries("cpu", "shop", "web-2", "app", 0.2),
		podSeries("memory", "shop", "web-2", "app", 100<<20),
		podSeries("cpu", "shop", "db-0", "db", 1.25),
		podSeries("memory", "shop", "db-0", "db", 2<<30),
		podSeries("cpu", "ops", "agent", "agent", 0.05),
		podSeries("memory", "ops", "agent", "agent", 50<<20),
		nodeSeries("cpu", "node-a", 1.5),
		nodeSeries("memory", "node-a", 4<<30),
		nodeSeries("cpu", "node-b", 0.75),
		nodeSeries("memory", "node-b", 3<<30),
	}}
	return objs, fp
}

// wirePodMetrics is PodMetrics as served (v1beta1 JSON).
type wirePodMetrics struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		Labels            map[string]string `json:"labels"`
		CreationTimestamp string            `json:"creationTimestamp"`
	} `json:"metadata"`
	Timestamp  string `json:"timestamp"`
	Window     string `json:"window"`
	Containers []struct {
		Name  string            `json:"name"`
		Usage map[string]string `json:"usage"`
	} `json:"containers"`
}

type wireNodeMetrics struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Timestamp string            `json:"timestamp"`
	Window    string            `json:"window"`
	Usage     map[string]string `json:"usage"`
}

func podNames(t *testing.T, body []byte) []string {
	t.Helper()
	var list struct {
		Kind       string           `json:"kind"`
		APIVersion string           `json:"apiVersion"`
		Items      []wirePodMetrics `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("decoding PodMetricsList: %v\n%s", err, body)
	}
	if list.Kind != "PodMetricsList" || list.APIVersion != "metrics.k8s.io/v1beta1" {
		t.Errorf("list kind %q apiVersion %q, want PodMetricsList metrics.k8s.io/v1beta1", list.Kind, list.APIVersion)
	}
	names := []string{}
	for _, it := range list.Items {
		names = append(names, it.Metadata.Namespace+"/"+it.Metadata.Name)
	}
	return names
}

func TestAPIGetPod(t *testing.T) {
	var pm wirePodMetrics
	body := getJSON(t, testServer(t), "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-1", "", &pm)
	got := []string{pm.Kind, pm.APIVersion, pm.Metadata.Namespace + "/" + pm.Metadata.Name, pm.Timestamp, pm.Window}
	for _, c := range pm.Containers {
		got = append(got, fmt.Sprintf("%s cpu=%s memory=%s", c.Name, c.Usage["cpu"], c.Usage["memory"]))
	}
	want := []string{"PodMetrics", "metrics.k8s.io/v1beta1", "shop/web-1", "2026-11-30T10:00:00Z", "5m0s",
		"app cpu=487558164n memory=732212Ki", "proxy cpu=10m memory=10Mi"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PodMetrics (-want +got):\n%s\n%s", diff, body)
	}
	if pm.Metadata.Labels["app"] != "web" || pm.Metadata.CreationTimestamp == "" {
		t.Errorf("metadata %+v: want the pod's labels and a creationTimestamp", pm.Metadata)
	}
}

func TestAPIListPods(t *testing.T) {
	h := testServer(t)
	tests := []struct {
		name string
		path string
		want []string
	}{
		{name: "namespace", path: "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods", want: []string{"shop/db-0", "shop/web-1", "shop/web-2"}},
		{name: "all namespaces", path: "/apis/metrics.k8s.io/v1beta1/pods", want: []string{"ops/agent", "shop/db-0", "shop/web-1", "shop/web-2"}},
		{name: "label selector", path: "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods?labelSelector=app%3Dweb", want: []string{"shop/web-1", "shop/web-2"}},
		{name: "set-based label selector", path: "/apis/metrics.k8s.io/v1beta1/pods?labelSelector=app+in+(db,agent)", want: []string{"ops/agent", "shop/db-0"}},
		{name: "field selector on name", path: "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods?fieldSelector=metadata.name%3Dweb-2", want: []string{"shop/web-2"}},
		{name: "field selector on namespace", path: "/apis/metrics.k8s.io/v1beta1/pods?fieldSelector=metadata.namespace%21%3Dshop", want: []string{"ops/agent"}},
		{name: "empty namespace", path: "/apis/metrics.k8s.io/v1beta1/namespaces/empty/pods", want: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, h, tc.path, "")
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", tc.path, code, body)
			}
			if diff := cmp.Diff(tc.want, podNames(t, body)); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPINodes(t *testing.T) {
	h := testServer(t)
	var list struct {
		Kind  string            `json:"kind"`
		Items []wireNodeMetrics `json:"items"`
	}
	getJSON(t, h, "/apis/metrics.k8s.io/v1beta1/nodes", "", &list)
	var got []string
	for _, n := range list.Items {
		got = append(got, fmt.Sprintf("%s %s %s cpu=%s memory=%s", n.Metadata.Name, n.Timestamp, n.Window, n.Usage["cpu"], n.Usage["memory"]))
	}
	want := []string{"node-a 2026-11-30T10:00:00Z 5m0s cpu=1500m memory=4Gi", "node-b 2026-11-30T10:00:00Z 5m0s cpu=750m memory=3Gi"}
	if diff := cmp.Diff(want, got); diff != "" || list.Kind != "NodeMetricsList" {
		t.Errorf("kind %q, nodes (-want +got):\n%s", list.Kind, diff)
	}
	code, body := do(t, h, "/apis/metrics.k8s.io/v1beta1/nodes/node-b", "")
	var one wireNodeMetrics
	if code != http.StatusOK || json.Unmarshal(body, &one) != nil || one.Usage["cpu"] != "750m" {
		t.Errorf("GET node-b: %d %s", code, body)
	}
	code, body = do(t, h, "/apis/metrics.k8s.io/v1beta1/nodes?fieldSelector=metadata.name%3Dnode-a", "")
	if code != http.StatusOK || !strings.Contains(string(body), "node-a") || strings.Contains(string(body), "node-b") {
		t.Errorf("field selector on nodes: %d %s", code, body)
	}
}

func TestAPIErrors(t *testing.T) {
	h := testServer(t)
	tests := []struct {
		name     string
		path     string
		wantCode int
		wantMsg  string
	}{
		{name: "pod that does not exist", path: "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/nope", wantCode: 404, wantMsg: `podmetrics.metrics.k8s.io "nope" not found`},
		{name: "pod without samples", path: "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/starting", wantCode: 404, wantMsg: `podmetrics.metrics.k8s.io "starting" not found`},
		{name: "node that does not exist", path: "/apis/metrics.k8s.io/v1beta1/nodes/nope", wantCode: 404, wantMsg: `nodemetrics.metrics.k8s.io "nope" not found`},
		{name: "field the API does not define", path: "/apis/metrics.k8s.io/v1beta1/pods?fieldSelector=spec.nodeName%3Dx", wantCode: 400, wantMsg: "spec.nodeName"},
		{name: "bad label selector", path: "/apis/metrics.k8s.io/v1beta1/pods?labelSelector=a%3D%3D%3Db", wantCode: 400, wantMsg: "unable to parse requirement"},
		// The request limits of the custom and external metrics APIs.
		{name: "1,001 in values, pods", path: "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods?labelSelector=" + inValues("app", 1001),
			wantCode: 400, wantMsg: `labelSelector: requirement on "app" has 1001 values, more than the limit of 1000`},
		{name: "1,001 in values, nodes", path: "/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=" + inValues("zone", 1001),
			wantCode: 400, wantMsg: `labelSelector: requirement on "zone" has 1001 values, more than the limit of 1000`},
		{name: "field selector over 16 KiB", path: "/apis/metrics.k8s.io/v1beta1/pods?fieldSelector=metadata.name%3D" + strings.Repeat("x", 16<<10),
			wantCode: 400, wantMsg: "fieldSelector is longer than the limit of 16384 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, h, tc.path, "")
			var st metav1.Status
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatalf("decoding Status: %v\n%s", err, body)
			}
			if code != tc.wantCode || int(st.Code) != tc.wantCode || !strings.Contains(st.Message, tc.wantMsg) {
				t.Errorf("GET %.100s = %d %.300s, want %d mentioning %q", tc.path, code, body, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

// inValues is the query-escaped selector "key in (v0,...,v<n-1>)".
func inValues(key string, n int) string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("v%d", i)
	}
	return url.QueryEscape(key + " in (" + strings.Join(vs, ",") + ")")
}

func TestAPIPrometheusDown(t *testing.T) {
	objs, _ := testCluster()
	down := func(string) (int, string) { return http.StatusBadGateway, "upstream connect error" }
	h := newServer(t, objs, newPromClient(t, down))
	for _, path := range []string{"/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods", "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-1", "/apis/metrics.k8s.io/v1beta1/nodes"} {
		code, body := do(t, h, path, "")
		if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "resourceRules.") || strings.Contains(string(body), "127.0.0.1") {
			t.Errorf("GET %s with Prometheus down = %d %s, want 503 naming the rule, not Prometheus' address", path, code, body)
		}
	}
}

func TestAPICacheNotSynced(t *testing.T) {
	objs, fp := testCluster()
	objs.err = fmt.Errorf("%w: pods not listed within 10s", objectcache.ErrNotSynced)
	h := newServer(t, objs, fp.client(t))
	code, body := do(t, h, "/apis/metrics.k8s.io/v1beta1/pods", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "listing pods: not available (request id ") {
		t.Errorf("GET with caches not synced = %d %s, want 503", code, body)
	}
}

func TestAPITable(t *testing.T) {
	var table metav1.Table
	getJSON(t, testServer(t), "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods", "application/json;as=Table;v=v1;g=meta.k8s.io", &table)
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	var rows []string
	for _, r := range table.Rows {
		rows = append(rows, strings.TrimSpace(fmt.Sprintln(r.Cells...)))
	}
	if diff := cmp.Diff([]string{"Name", "CPU", "Memory", "Window"}, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	// web-1 sums its two containers.
	want := []string{"db-0 1250m 2Gi 5m0s", "web-1 497558164n 742452Ki 5m0s", "web-2 200m 100Mi 5m0s"}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}

func TestAPIDiscovery(t *testing.T) {
	var list metav1.APIResourceList
	getJSON(t, testServer(t), "/apis/metrics.k8s.io/v1beta1", "", &list)
	var got []string
	for _, r := range list.APIResources {
		verbs := slices.Clone([]string(r.Verbs))
		slices.Sort(verbs)
		got = append(got, fmt.Sprintf("%s %s namespaced=%v %v", r.Name, r.Kind, r.Namespaced, verbs))
	}
	want := []string{"nodes NodeMetrics namespaced=false [get list]", "pods PodMetrics namespaced=true [get list]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
}

// Without the metrics.k8s.io OpenAPI models the API server refuses the
// group: that is what SetOpenAPIConfig is for.
func TestInstallNeedsOpenAPIModels(t *testing.T) {
	objs, fp := testCluster()
	api := newAPI(t, objs, sourceConfig(t, fp.client(t)))
	cfg, base := genericConfig("no-models")
	// Keep the library's models only (DefaultOpenAPIV3Config precomputes
	// Definitions, which is what the builder reads).
	v3 := *base.OpenAPIV3Config
	v3.Definitions = maps.Clone(v3.Definitions)
	removed := 0
	for k := range v3.Definitions {
		if strings.HasPrefix(k, "io.k8s.metrics.pkg.apis.metrics.v1beta1.") {
			delete(v3.Definitions, k)
			removed++
		}
	}
	if removed == 0 {
		t.Fatal("SetOpenAPIConfig's definitions hold no metrics.k8s.io v1beta1 models")
	}
	cfg.OpenAPIV3Config = &v3
	if err := api.Install(completeServer(t, cfg)); err == nil {
		t.Error("Install succeeded without the metrics.k8s.io OpenAPI models; SetOpenAPIConfig would be unnecessary")
	}
}

func TestNewAdapterRequiresObjects(t *testing.T) {
	if _, err := resourcemetrics.NewAdapter(resourcemetrics.AdapterConfig{SourceConfig: sourceConfig(t, (&fakeProm{}).client(t))}); err == nil || !strings.Contains(err.Error(), "Objects") {
		t.Errorf("NewAdapter without the object cache = %v, want an error naming Objects", err)
	}
}

func TestNewRequiresEverything(t *testing.T) {
	_, err := resourcemetrics.New(resourcemetrics.Config{})
	for _, want := range []string{"Pods", "Nodes", "PodMetrics", "NodeMetrics"} {
		if err == nil || !strings.Contains(err.Error(), want+" is required") {
			t.Errorf("New error = %v, want it to say %s is required", err, want)
		}
	}
}

func TestAPIBadQuery(t *testing.T) {
	objs, _ := testCluster()
	bad := func(string) (int, string) {
		return http.StatusBadRequest, `{"status":"error","errorType":"bad_data","error":"parse error: unexpected character"}`
	}
	h := newServer(t, objs, newPromClient(t, bad))
	code, body := do(t, h, "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods", "")
	if code != http.StatusInternalServerError || !strings.Contains(string(body), ".containerQuery): Prometheus rejected the query") ||
		!strings.Contains(string(body), "request id ") || strings.Contains(string(body), "parse error") || strings.Contains(string(body), "127.0.0.1") {
		t.Errorf("GET with a query Prometheus rejects = %d %s, want 500 naming the rule and a request id, not the PromQL error or Prometheus' address", code, body)
	}
}

// The API reads the configuration in service on every request: a hot
// reload changes the queries and the window at once, and a configuration
// without resourceRules answers 503.
func TestAPIFollowsReload(t *testing.T) {
	objs, fp := testCluster()
	var current atomic.Pointer[rules.RuleSet]
	current.Store(compileRules(t, testConfig))
	cfg := sourceConfig(t, fp.client(t))
	cfg.Rules = current.Load
	h := serve(t, objs, cfg)
	window := func() string {
		t.Helper()
		code, body := do(t, h, "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-2", "")
		if code != http.StatusOK {
			return fmt.Sprint(code)
		}
		var pm wirePodMetrics
		if err := json.Unmarshal(body, &pm); err != nil {
			t.Fatal(err)
		}
		return pm.Window
	}
	if got := window(); got != "5m0s" {
		t.Fatalf("window before reload = %s, want 5m0s", got)
	}
	current.Store(compileRules(t, strings.Replace(testConfig, "window: 5m", "window: 90s", 1)))
	if got := window(); got != "1m30s" {
		t.Errorf("window after reload = %s, want 1m30s", got)
	}
	if q := fp.Queries(); !strings.Contains(q[len(q)-1], "[90s]") && !strings.Contains(q[len(q)-2], "[90s]") {
		t.Errorf("queries after reload %q, want the 90s window", q[len(q)-2:])
	}
	current.Store(compileRules(t, "rules: []\n"))
	if got := window(); got != "503" {
		t.Errorf("without resourceRules: %s, want 503", got)
	}
}
