package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/pflag"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/certauth"
	"github.com/promscaler/promscaler/internal/servertiming"
	"github.com/promscaler/promscaler/pkg/apistatus"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/resourcemetrics"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/promtest"
)

const testRules = `rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name:
    matches: "^(.*)_total$"
    as: "${1}_per_second"
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
`

// fakeKubeAPI answers what the adapter asks of the Kubernetes API server at
// startup and per request: SubjectAccessReviews (always allowed) and
// TokenReviews (never authenticated), and API discovery for the core group
// (pods, namespaces, nodes). Everything else is a 404 Status.
func fakeKubeAPI(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar map[string]any
			_ = json.Unmarshal(body, &sar)
			sar["status"] = map[string]any{"allowed": true}
			_ = json.NewEncoder(w).Encode(sar)
		case "/api":
			fmt.Fprint(w, `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}`)
		case "/apis":
			fmt.Fprint(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`)
		case "/api/v1":
			fmt.Fprint(w, `{"kind":"APIResourceList","groupVersion":"v1","resources":[`+
				`{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list","watch"]},`+
				`{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace","verbs":["get","list","watch"]},`+
				`{"name":"nodes","singularName":"node","namespaced":false,"kind":"Node","verbs":["get","list","watch"]}]}`)
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr map[string]any
			_ = json.Unmarshal(body, &tr)
			tr["status"] = map[string]any{"authenticated": false}
			_ = json.NewEncoder(w).Encode(tr)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func writeKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: %q}
users:
- name: adapter
  user: {token: adapter-token}
contexts:
- name: fake
  context: {cluster: fake, user: adapter}
current-context: fake
`, server)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newTestProm is a fake Prometheus with one series of testRules' metric
// (pod-a in default), closed when the test ends.
func newTestProm(t *testing.T) *promtest.Server {
	fake := promtest.New([]model.LabelSet{{"__name__": "http_requests_total", "namespace": "default", "pod": "pod-a"}})
	t.Cleanup(fake.Close)
	return fake
}

// fakeProviders wraps the placeholder with controllable readiness and a
// record of the configurations applied by hot reload.
type fakeProviders struct {
	ready   atomic.Bool
	mu      sync.Mutex
	applied []*rules.RuleSet
	ran     atomic.Bool
}

func (f *fakeProviders) factory(c *Config, deps ProviderDeps) (*Providers, error) {
	if deps.Backends == nil || deps.Metrics == nil || deps.Rules == nil || c.Kube == nil {
		return nil, fmt.Errorf("incomplete deps: %+v, Kube %v", deps, c.Kube)
	}
	if c.Discovery.Interval <= 0 {
		return nil, fmt.Errorf("relist interval %v, want the configured one", c.Discovery.Interval)
	}
	p := placeholderProvider{}
	return &Providers{
		Custom:   p,
		External: p,
		Ready: func() error {
			if !f.ready.Load() {
				return fmt.Errorf("first discovery not complete")
			}
			return nil
		},
		Run: func(ctx context.Context) {
			f.ran.Store(true)
			<-ctx.Done()
		},
		ApplyConfig: func(rs *rules.RuleSet) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.applied = append(f.applied, rs)
			return nil
		},
	}, nil
}

func (f *fakeProviders) appliedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.applied)
}

// testServer is an adapter server running in-process on a random port.
type testServer struct {
	t         *testing.T
	base      string
	client    *http.Client
	errc      chan error
	cancel    context.CancelFunc
	rulesFile string
}

// testConfig configures an in-process adapter on a free loopback port:
// the given rules, a fake Kubernetes API for the lister, authentication and
// authorization, Prometheus at promURL; tweak, when not nil, adjusts it.
func testConfig(t *testing.T, rules, promURL string, tweak func(*Config)) (cfg *Config, rulesFile string, port int) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dir, fakeKubeAPI(t).URL)
	rulesFile = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(rulesFile, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = ln.Addr().(*net.TCPAddr).Port

	// The generic API server's configuration, from custom-metrics-apiserver's
	// own flags as the command line sets them.
	base := &basecmd.AdapterBase{Name: "test-adapter", FlagSet: pflag.NewFlagSet("test", pflag.ContinueOnError)}
	base.InstallFlags()
	if err := base.FlagSet.Parse([]string{
		"--lister-kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--authentication-skip-lookup",
		"--cert-dir=" + filepath.Join(dir, "certs"),
		fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1",
	}); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	base.SecureServing.Listener = ln
	resourcemetrics.SetOpenAPIConfig(base)
	apiConfig, err := base.Config()
	if err != nil {
		t.Fatal(err)
	}
	inf, err := base.Informers()
	if err != nil {
		t.Fatal(err)
	}
	cfg = &Config{
		Name:               base.Name,
		APIServer:          apiConfig,
		Informers:          inf,
		Kube:               base,
		RulesFiles:         []string{rulesFile},
		Backends:           []promclient.Backend{{URL: promURL, Timeout: promclient.DefaultTimeout}},
		Discovery:          discovery.Options{Interval: time.Minute},
		ClientCertCacheTTL: certauth.DefaultTTL,
	}
	if tweak != nil {
		tweak(cfg)
	}
	return cfg, rulesFile, port
}

// startTestServer starts the adapter in-process with the given rules,
// providers factory and Prometheus URL against a fake Kubernetes API;
// tweak, when not nil, adjusts its configuration. Its client does not ask
// for compression (a test that wants it says so).
func startTestServer(t *testing.T, rules string, factory ProvidersFactory, promURL string, tweak func(*Config)) *testServer {
	t.Helper()
	cfg, rulesFile, port := testConfig(t, rules, promURL, tweak)
	cfg.NewProviders = factory

	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{
		t:    t,
		base: fmt.Sprintf("https://127.0.0.1:%d", port),
		client: &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableCompression: true},
		},
		errc:      make(chan error, 1),
		cancel:    cancel,
		rulesFile: rulesFile,
	}
	go func() {
		srv, err := cfg.Complete()
		if err != nil {
			ts.errc <- err
			return
		}
		ts.errc <- srv.Run(ctx)
	}()
	t.Cleanup(func() {
		ts.client.CloseIdleConnections()
		cancel()
	})
	return ts
}

// startReadyServer starts the adapter with the given providers (no
// Prometheus behind them), tweak adjusting its configuration, and waits
// until it is ready.
func startReadyServer(t *testing.T, custom cmprovider.CustomMetricsProvider, external cmprovider.ExternalMetricsProvider, tweak func(*Config)) *testServer {
	t.Helper()
	factory := func(*Config, ProviderDeps) (*Providers, error) {
		return &Providers{Custom: custom, External: external}, nil
	}
	ts := startTestServer(t, testRules, factory, "http://127.0.0.1:9", tweak)
	ts.waitReady()
	return ts
}

// waitReady waits until /readyz answers 200.
func (ts *testServer) waitReady() {
	ts.t.Helper()
	ts.waitUntil("/readyz", func() bool {
		code, _ := ts.get("/readyz")
		return code == http.StatusOK
	})
}

func (ts *testServer) get(path string) (int, string) {
	ts.t.Helper()
	code, body, _ := ts.getWithHeader(path)
	return code, body
}

func (ts *testServer) getWithHeader(path string) (int, string, http.Header) {
	ts.t.Helper()
	resp, err := ts.client.Get(ts.base + path)
	if err != nil {
		return 0, err.Error(), http.Header{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (ts *testServer) waitUntil(what string, cond func() bool) {
	ts.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		select {
		case err := <-ts.errc:
			ts.t.Fatalf("server stopped while waiting for %s: %v", what, err)
		default:
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop cancels the server and checks it returns cleanly.
func (ts *testServer) stop() {
	ts.t.Helper()
	ts.cancel()
	select {
	case err := <-ts.errc:
		if err != nil {
			ts.t.Errorf("serve returned %v after cancel", err)
		}
	case <-time.After(60 * time.Second):
		ts.t.Fatal("serve did not return after its context was cancelled")
	}
}

func TestServerServesDiscoveryMetricsAndReadiness(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full API server")
	}
	fp := &fakeProviders{}
	ts := startTestServer(t, testRules, fp.factory, "http://127.0.0.1:9", func(c *Config) { c.ConfigReloadInterval = 20 * time.Millisecond })
	get, waitUntil, rulesFile := ts.get, ts.waitUntil, ts.rulesFile

	// Up but not ready: the discovery check fails /readyz, not /livez. The
	// generic server's post-start hooks finish in the background (their
	// checks are in both); wait until discovery is the only check failing.
	var body string
	waitUntil("the server to answer /readyz with only discovery failing", func() bool {
		var code int
		code, body = get("/readyz?verbose")
		return code == http.StatusInternalServerError && strings.Contains(body, "[-]metrics-discovery failed") && strings.Count(body, "[-]") == 1
	})
	if code, b := get("/livez"); code != http.StatusOK {
		t.Errorf("/livez = %d %s, want 200 while discovery is pending", code, b)
	}
	fp.ready.Store(true)
	waitUntil("/readyz to turn ready", func() bool {
		code, _ := get("/readyz")
		return code == http.StatusOK
	})
	if !fp.ran.Load() {
		t.Error("the providers' Run loop was not started")
	}

	tests := []struct {
		name     string
		path     string
		wantCode int
		wantIn   string
	}{
		{name: "custom v1beta2 discovery", path: "/apis/custom.metrics.k8s.io/v1beta2", wantCode: 200, wantIn: `"groupVersion":"custom.metrics.k8s.io/v1beta2"`},
		{name: "custom v1beta1 discovery", path: "/apis/custom.metrics.k8s.io/v1beta1", wantCode: 200, wantIn: `"groupVersion":"custom.metrics.k8s.io/v1beta1"`},
		{name: "external discovery", path: "/apis/external.metrics.k8s.io/v1beta1", wantCode: 200, wantIn: `"groupVersion":"external.metrics.k8s.io/v1beta1"`},
		{name: "unknown external metric", path: "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth", wantCode: 404, wantIn: "queue_depth"},
		{name: "unknown custom metric", path: "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests_per_second", wantCode: 404, wantIn: "http_requests_per_second"},
		{name: "healthz", path: "/healthz", wantCode: 200, wantIn: "ok"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, b := get(tc.path)
			if code != tc.wantCode || !strings.Contains(b, tc.wantIn) {
				t.Errorf("GET %s = %d %s; want %d containing %q", tc.path, code, truncateForLog(b), tc.wantCode, tc.wantIn)
			}
		})
	}

	code, metricsText := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d %s", code, truncateForLog(metricsText))
	}
	for _, want := range []string{
		`promscaler_api_requests_total{api="custom",code="200"} 2`,
		`promscaler_api_requests_total{api="custom",code="404"} 1`,
		`promscaler_api_requests_total{api="external",code="404"} 1`,
		`promscaler_config_last_reload_successful 1`,
		`apiserver_request_total`, // the Kubernetes component metrics are merged in
	} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Hot reload: a valid edit reaches the providers, an invalid one does
	// not and is counted.
	edited := strings.Replace(testRules, "[2m]", "[5m]", 1)
	replaceFile(t, rulesFile, edited)
	waitUntil("the edited config to be applied", func() bool { return fp.appliedCount() == 1 })
	replaceFile(t, rulesFile, "rules:\n- seriesQuery: [\n")
	waitUntil("the invalid config to be rejected", func() bool {
		_, m := get("/metrics")
		return strings.Contains(m, `promscaler_config_reloads_total{outcome="failure"} 1`) &&
			strings.Contains(m, `promscaler_config_last_reload_successful 0`)
	})
	if n := fp.appliedCount(); n != 1 {
		t.Errorf("invalid config reached the providers: %d applies", n)
	}

	ts.stop()
}

// replaceFile replaces path's content atomically (write, then rename).
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestServerWithDiscoveryAndProvider runs the real wiring: discovery over a
// fake Prometheus, the provider answering from its index, readiness after
// the first discovery, and a Prometheus outage reaching the client as a 503.
func TestServerWithDiscoveryAndProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full API server")
	}
	fake := promtest.New([]model.LabelSet{
		{"__name__": "http_requests_total", "namespace": "default", "pod": "pod-a"},
		{"__name__": "http_requests_total", "namespace": "default", "pod": "pod-b"},
		{"__name__": "http_requests_total", "namespace": "shop", "pod": "cart"},
	})
	defer fake.Close()
	ts := startTestServer(t, testRules, DefaultProviders, fake.URL, nil)

	ts.waitReady()
	code, body := ts.get("/apis/custom.metrics.k8s.io/v1beta2")
	if code != http.StatusOK || !strings.Contains(body, `"name":"pods/http_requests_per_second"`) ||
		!strings.Contains(body, `"name":"namespaces/http_requests_per_second"`) {
		t.Fatalf("custom metrics discovery = %d %s; want pods/ and namespaces/http_requests_per_second", code, truncateForLog(body))
	}

	// A value request: the rendered query is answered by the fake, the
	// value and the sample's timestamp come back.
	const path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/pod-a/http_requests_per_second"
	before := len(fake.Queries())
	ts.get(path) // the fake does not know the rendered query yet
	queries := fake.Queries()
	if len(queries) <= before {
		t.Fatalf("no query reached Prometheus for %s", path)
	}
	rendered := queries[len(queries)-1]
	for _, want := range []string{"http_requests_total", `namespace="default"`, "pod-a", "[2m]"} {
		if !strings.Contains(rendered, want) {
			t.Errorf("rendered query %q lacks %q", rendered, want)
		}
	}
	fake.Answer(rendered, model.Vector{{
		Metric:    model.Metric{"namespace": "default", "pod": "pod-a"},
		Value:     0.25,
		Timestamp: model.TimeFromUnix(1700000000),
	}})
	code, body, hdr := ts.getWithHeader(path)
	if code != http.StatusOK || !strings.Contains(body, `"value":"250m"`) || !strings.Contains(body, `"timestamp":"2023-11-14T22:13:20Z"`) {
		t.Errorf("GET %s = %d %s; want value 250m at the sample's time", path, code, truncateForLog(body))
	}
	// The answer says how long it waited for Prometheus.
	if _, ok := servertiming.Parse(hdr.Get(servertiming.HeaderName)); !ok || len(hdr.Values(servertiming.HeaderName)) != 1 {
		t.Errorf("GET %s: Server-Timing %q, want one prometheus;dur=...", path, hdr.Values(servertiming.HeaderName))
	}
	// A request that does not ask Prometheus has none.
	if _, _, hdr := ts.getWithHeader("/apis/custom.metrics.k8s.io/v1beta2"); hdr.Get(servertiming.HeaderName) != "" {
		t.Errorf("discovery answer has Server-Timing %q, want none", hdr.Get(servertiming.HeaderName))
	}

	// Prometheus failing: a 503 with context, never a made-up value. (After
	// the coalescing window: a request within it would share the answer
	// above, which is as fresh as the window allows.)
	fake.Fail(promtest.Query, promtest.Failure{Status: http.StatusServiceUnavailable})
	time.Sleep(promclient.DefaultCoalesceWindow + 50*time.Millisecond)
	code, body, hdr = ts.getWithHeader(path)
	if code != http.StatusServiceUnavailable {
		t.Errorf("with Prometheus failing GET %s = %d %s; want 503", path, code, truncateForLog(body))
	}
	if _, ok := servertiming.Parse(hdr.Get(servertiming.HeaderName)); !ok {
		t.Errorf("the 503's Server-Timing = %q, want the wait for the failing Prometheus", hdr.Get(servertiming.HeaderName))
	}
	ts.stop()
}

// blockingProvider holds metric requests until their client goes away.
type blockingProvider struct {
	placeholderProvider
	entered chan struct{}
}

func (b blockingProvider) GetMetricByName(ctx context.Context, _ types.NamespacedName, _ cmprovider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValue, error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	return nil, fmt.Errorf("querying Prometheus: %w", ctx.Err())
}

// TestServerClientHangUp: a client hanging up mid-request is answered with
// a typed 499 status (which the API server does not log as an internal
// error) and counted as such.
func TestServerClientHangUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full API server")
	}
	bp := blockingProvider{entered: make(chan struct{}, 1)}
	ts := startReadyServer(t, bp, bp, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.base+"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/pod-a/some_metric", nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := ts.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-bp.entered
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled request succeeded")
	}
	var metricsText string
	ts.waitUntil("the hang-up to be counted as 499", func() bool {
		_, metricsText = ts.get("/metrics")
		return strings.Contains(metricsText, `promscaler_api_requests_total{api="custom",code="499"} 1`)
	})
	// The API server's timeout filter did not treat it as a timeout (which
	// it would log twice as an error).
	for _, m := range []string{"apiserver_request_aborts_total{", "apiserver_request_post_timeout_total{"} {
		if strings.Contains(metricsText, m) {
			t.Errorf("/metrics has %s...: the hang-up went through the timeout path", m)
		}
	}
	ts.stop()
}

// TestServerInstallsResourceMetrics: with resourceRules, metrics.k8s.io is
// served next to the custom and external APIs.
func TestServerInstallsResourceMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full API server")
	}
	fake := newTestProm(t)
	ts := startTestServer(t, testRules+testResourceRules, DefaultProviders, fake.URL, nil)
	ts.waitReady()
	for _, tc := range []struct{ path, want string }{
		{"/apis/metrics.k8s.io/v1beta1", `"name":"pods"`},
		{"/apis/metrics.k8s.io/v1beta1", `"name":"nodes"`},
		{"/apis/custom.metrics.k8s.io/v1beta2", "pods/http_requests_per_second"},
	} {
		if code, body := ts.get(tc.path); code != http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %s; want 200 with %s", tc.path, code, truncateForLog(body), tc.want)
		}
	}
	ts.stop()
}

const testResourceRules = `resourceRules:
  cpu:
    containerQuery: 'sum by (<<.GroupBy>>) (irate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!="",pod!=""}[4m]))'
    nodeQuery: 'sum by (<<.GroupBy>>) (irate(node_cpu_usage_seconds_total{<<.LabelMatchers>>}[4m]))'
    resources: &resources
      overrides:
        namespace: {resource: namespace}
        node: {resource: node}
        pod: {resource: pod}
    containerLabel: container
  memory:
    containerQuery: 'sum by (<<.GroupBy>>) (container_memory_working_set_bytes{<<.LabelMatchers>>,container!="",pod!=""})'
    nodeQuery: 'sum by (<<.GroupBy>>) (node_memory_working_set_bytes{<<.LabelMatchers>>})'
    resources: *resources
    containerLabel: container
  window: 5m
`

// TestServerPrometheusFaults: Prometheus down at start (not ready, with the
// reason; ready once it is back, without a restart), then hanging (requests
// fail within the timeout), and no goroutine left behind.
func TestServerPrometheusFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full API server")
	}
	// The API server's log health check starts a process-wide goroutine
	// once; start it before recording what is already running.
	_ = healthz.LogHealthz.Check(nil)
	leaks := goleak.IgnoreCurrent()
	// Registered first, so it runs last: after every test server (fake
	// Kubernetes API included) has been closed.
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	fake := newTestProm(t)
	down := promtest.Failure{Status: http.StatusServiceUnavailable, Body: "<html>maintenance</html>"}
	for _, ep := range []string{promtest.Query, promtest.Series, promtest.Labels, promtest.LabelValues} {
		fake.Fail(ep, down)
	}
	ts := startTestServer(t, testRules, DefaultProviders, fake.URL, func(c *Config) { c.Backends[0].Timeout = 300 * time.Millisecond })
	ts.waitUntil("/readyz to report discovery failing", func() bool {
		code, body := ts.get("/readyz?verbose")
		return code == http.StatusInternalServerError && strings.Contains(body, "[-]discovery failed") ||
			strings.Contains(body, "[-]metrics-discovery failed")
	})
	const path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/pod-a/http_requests_per_second"
	if code, body := ts.get(path); code != http.StatusServiceUnavailable {
		t.Errorf("before any discovery GET %s = %d %s; want 503", path, code, truncateForLog(body))
	}

	for _, ep := range []string{promtest.Query, promtest.Series, promtest.Labels, promtest.LabelValues} {
		fake.Fail(ep, promtest.Failure{})
	}
	ts.waitUntil("/readyz once Prometheus is back", func() bool {
		code, _ := ts.get("/readyz")
		return code == http.StatusOK
	})

	// Value queries hang.
	fake.Fail(promtest.Query, promtest.Failure{Hang: true})
	code, body := ts.get(path)
	if code != http.StatusServiceUnavailable {
		t.Errorf("with Prometheus hanging GET %s = %d %s; want 503 after the timeout", path, code, truncateForLog(body))
	}
	fake.Fail(promtest.Query, promtest.Failure{})

	ts.stop()
}

func truncateForLog(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}

func TestQuietly(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	plain := fmt.Errorf("querying prometheus: %w", context.Canceled)
	tests := []struct {
		name     string
		ctx      context.Context
		err      error
		wantCode int32 // 0: the error passes through unchanged
	}{
		{name: "no error", ctx: canceled, err: nil},
		{name: "live request keeps its error", ctx: context.Background(), err: plain},
		{name: "client hung up", ctx: canceled, err: plain, wantCode: 499},
		{name: "deadline", ctx: expired, err: plain, wantCode: 504},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, got := quietly(tc.ctx, func(context.Context) (any, error) { return nil, tc.err })
			if tc.wantCode == 0 {
				if got != tc.err {
					t.Errorf("got %v, want the error unchanged", got)
				}
				return
			}
			var status apierrors.APIStatus
			if !errors.As(got, &status) {
				t.Fatalf("got %v (%T), want a typed API status", got, got)
			}
			if code := status.Status().Code; code != tc.wantCode {
				t.Errorf("code %d, want %d (%v)", code, tc.wantCode, got)
			}
		})
	}
}

func TestWithClientCancelsOnHangUp(t *testing.T) {
	client, hangUp := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(client)
	detached := detachClientCancel(r).Context()
	hangUp()
	if detached.Err() != nil {
		t.Fatal("the handler chain's context was cancelled by the client hanging up")
	}
	ctx, cancel := withClient(detached)
	defer cancel()
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), apistatus.ErrClientGone) {
		t.Errorf("cause = %v, want apistatus.ErrClientGone", context.Cause(ctx))
	}
	var status apierrors.APIStatus
	if _, err := quietly(ctx, func(context.Context) (any, error) { return nil, errors.New("boom") }); !errors.As(err, &status) || status.Status().Code != 499 {
		t.Errorf("quietly = %v, want a 499 status", err)
	}
	// Without the key (e.g. a direct provider call), ctx is unchanged.
	plain := context.Background()
	if got, cancel := withClient(plain); got != plain {
		t.Error("withClient changed a context without a client")
	} else {
		cancel()
	}
}

func TestAPIOf(t *testing.T) {
	tests := map[string]string{
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/x/pods/*/m": "custom",
		"/apis/custom.metrics.k8s.io":                               "custom",
		"/apis/external.metrics.k8s.io/v1beta1":                     "external",
		"/apis/metrics.k8s.io/v1beta1/nodes":                        "resource",
		"/apis/metrics.k8s.io.evil/v1":                              "other",
		"/readyz":                                                   "other",
	}
	for path, want := range tests {
		if got := apiOf(path); got != want {
			t.Errorf("apiOf(%q) = %q, want %q", path, got, want)
		}
	}
}

// placeholderProvider serves no metric: lists are empty, lookups are 404s.
type placeholderProvider struct{}

var (
	_ cmprovider.CustomMetricsProvider   = placeholderProvider{}
	_ cmprovider.ExternalMetricsProvider = placeholderProvider{}
)

func (placeholderProvider) GetMetricByName(_ context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValue, error) {
	return nil, cmprovider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
}

func (placeholderProvider) GetMetricBySelector(_ context.Context, _ string, _ labels.Selector, info cmprovider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValueList, error) {
	return nil, cmprovider.NewMetricNotFoundError(info.GroupResource, info.Metric)
}

func (placeholderProvider) ListAllMetrics() []cmprovider.CustomMetricInfo { return nil }

func (placeholderProvider) GetExternalMetric(_ context.Context, _ string, _ labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	return nil, cmprovider.NewMetricNotFoundError(schema.GroupResource{Group: "external.metrics.k8s.io"}, info.Metric)
}

func (placeholderProvider) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo { return nil }
