package promclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/truncate"
	"github.com/promscaler/promscaler/test/promtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeProm is the project's fake Prometheus (test/promtest), answering
// every request with its handler: these tests check what the client sends
// and how it reads any answer.
type fakeProm struct {
	*promtest.Server
}

const vectorBody = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1700000000,"0.5"]}]}}`

// vectorSamples is vectorBody's vector.
var vectorSamples = Samples{{Labels: Labels{{"pod", "a"}}, Value: 0.5, Timestamp: 1700000000000}}

// answerVector answers vectorBody.
func answerVector(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, vectorBody)
}

// newFakeProm starts a fake Prometheus answering with handle (nil:
// vectorBody), closed when the test ends.
func newFakeProm(t testing.TB, handle http.HandlerFunc) *fakeProm {
	t.Helper()
	if handle == nil {
		handle = answerVector
	}
	f := &fakeProm{promtest.New(nil)}
	f.Handle(handle)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeProm) requests() []promtest.Request { return f.Requests() }

// newTestClient builds a client of cfg; a test that sets no timeout gets
// the flags' default (New takes no zero).
func newTestClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
		t.Cleanup(cfg.HTTPClient.CloseIdleConnections)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func TestQueryMethodAndTimeoutParam(t *testing.T) {
	long := `sum(rate(http_requests_total{pod=~"` + strings.Repeat("pod-with-a-long-name|", 300) + `x"}[5m]))`
	tests := []struct {
		name        string
		verb        string
		query       string
		timeout     time.Duration
		wantMethod  string
		wantTimeout string
	}{
		{name: "GET by default", verb: "", query: "up", timeout: 10 * time.Second, wantMethod: http.MethodGet, wantTimeout: "10s"},
		{name: "POST when asked", verb: "POST", query: "up", timeout: 90 * time.Second, wantMethod: http.MethodPost, wantTimeout: "90s"},
		{name: "GET turns POST when too long", verb: "GET", query: long, timeout: 1500 * time.Millisecond, wantMethod: http.MethodPost, wantTimeout: "1s"},
		{name: "sub-second timeout in ms", verb: "get", query: "up", timeout: 250 * time.Millisecond, wantMethod: http.MethodGet, wantTimeout: "250ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProm(t, nil)
			c := newTestClient(t, Config{Address: f.URL + "/prefix", Verb: tc.verb, Timeout: tc.timeout})
			got, err := c.QuerySamples(context.Background(), tc.query, time.Time{})
			if err != nil {
				t.Fatalf("Query: %v", err)
			}
			if diff := cmp.Diff(vectorSamples, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tc.wantMethod {
				t.Errorf("method = %s, want %s", r.Method, tc.wantMethod)
			}
			if r.Path != "/prefix/api/v1/query" {
				t.Errorf("path = %s", r.Path)
			}
			if got := r.Form.Get("timeout"); got != tc.wantTimeout {
				t.Errorf("timeout= %q, want %q", got, tc.wantTimeout)
			}
			if got := r.Form.Get("query"); got != tc.query {
				t.Errorf("query= %q, want the query", truncate.String(got, 50))
			}
			if r.Form.Has("time") {
				t.Errorf("time= sent for a zero ts: %q", r.Form.Get("time"))
			}
		})
	}
}

func TestQueryAtTimeAndScalar(t *testing.T) {
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"42"]}}`)
	})
	c := newTestClient(t, Config{Address: f.URL})
	ts := time.Unix(1700000000, 500_000_000)
	got, err := c.QuerySamples(context.Background(), "scalar(x)", ts)
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	want := Samples{{Labels: Labels{}, Value: 42, Timestamp: model.TimeFromUnix(1700000000)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if got := f.requests()[0].Form.Get("time"); got != "1700000000.5" {
		t.Errorf("time= %q, want 1700000000.5", got)
	}
}

// TestScalarAnswerToVectorQuery: a scalar answer is taken only for a query
// that may evaluate to one; for one that can only return an instant vector
// (a hostile or broken server) it is refused as a bad answer, never served
// as a value without labels.
func TestScalarAnswerToVectorQuery(t *testing.T) {
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"42"]}}`)
	})
	c := newTestClient(t, Config{Address: f.URL})
	for _, tc := range []struct {
		query   string
		refused bool
	}{
		{query: "scalar(sum(x))"},
		{query: "42"},
		{query: "time() - 5"},
		{query: `sum(queue_depth{namespace="a"}) by (queue)`, refused: true},
		{query: "x", refused: true},
		{query: "sum(rate(x[1m])) * 2", refused: true},
		{query: "vector(1)", refused: true},
		{query: "some_dialect(x) |> other", refused: false}, // not PromQL: benefit of the doubt
	} {
		t.Run(tc.query, func(t *testing.T) {
			got, err := c.QuerySamples(context.Background(), tc.query, time.Time{})
			if !tc.refused {
				want := Samples{{Labels: Labels{}, Value: 42, Timestamp: model.TimeFromUnix(1700000000)}}
				if err != nil {
					t.Fatalf("QuerySamples: %v", err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Outcome != metrics.PromOutcomeBadResponse || !strings.Contains(err.Error(), "answered a scalar to a query whose result can only be an instant vector") {
				t.Fatalf("QuerySamples = %v, %v; want a bad_response error saying a scalar answered a vector query", got, err)
			}
			if !IsUnavailable(err) {
				t.Errorf("IsUnavailable(%v) = false, want a 503", err)
			}
		})
	}
}

func TestSeriesAndLabels(t *testing.T) {
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/series":
			io.WriteString(w, `{"status":"success","data":[{"__name__":"up","pod":"a"},{"__name__":"up","pod":"b"}]}`)
		case "/api/v1/label/namespace/values":
			io.WriteString(w, `{"status":"success","data":["default","kube-system"]}`)
		case "/api/v1/labels":
			io.WriteString(w, `{"status":"success","data":["__name__","namespace","pod"]}`)
		default:
			http.NotFound(w, r)
		}
	})
	c := newTestClient(t, Config{Address: f.URL})
	ctx := context.Background()
	start, end := time.Unix(1000, 0), time.Unix(2000, 0)

	series, err := c.Series(ctx, []string{`{__name__=~"up|down"}`, `kube_pod_info`}, start, end)
	if err != nil {
		t.Fatalf("Series: %v", err)
	}
	if diff := cmp.Diff([]model.LabelSet{{"__name__": "up", "pod": "a"}, {"__name__": "up", "pod": "b"}}, series); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
	values, err := c.LabelValues(ctx, "namespace", []string{"up"}, start, end)
	if err != nil {
		t.Fatalf("LabelValues: %v", err)
	}
	if diff := cmp.Diff([]string{"default", "kube-system"}, values); diff != "" {
		t.Errorf("label values (-want +got):\n%s", diff)
	}
	names, err := c.LabelNames(ctx, nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatalf("LabelNames: %v", err)
	}
	if diff := cmp.Diff([]string{"__name__", "namespace", "pod"}, names); diff != "" {
		t.Errorf("label names (-want +got):\n%s", diff)
	}

	reqs := f.requests()
	if diff := cmp.Diff([]string{`{__name__=~"up|down"}`, "kube_pod_info"}, reqs[0].Form["match[]"]); diff != "" {
		t.Errorf("series match[] (-want +got):\n%s", diff)
	}
	if reqs[0].Form.Get("start") != "1000" || reqs[0].Form.Get("end") != "2000" {
		t.Errorf("series start/end = %q/%q", reqs[0].Form.Get("start"), reqs[0].Form.Get("end"))
	}
	if reqs[0].Form.Has("timeout") {
		t.Errorf("timeout= sent to the series endpoint")
	}
	if reqs[0].Method != http.MethodGet {
		t.Errorf("series method = %s, want GET", reqs[0].Method)
	}
}

func TestErrors(t *testing.T) {
	const secret = "s3cr3t-token"
	tests := []struct {
		name        string
		wantStatus  int // the answer's status, which the error carries
		body        string
		wantOutcome string
		wantInMsg   string
		badQuery    bool
		unavailable bool
	}{
		{name: "5xx with a proxy page", wantStatus: http.StatusBadGateway, body: "<html>\n upstream connect error </html>",
			wantOutcome: metrics.PromOutcomeServerError, wantInMsg: "upstream connect error", unavailable: true},
		{name: "bad PromQL", wantStatus: http.StatusBadRequest, body: `{"status":"error","errorType":"bad_data","error":"parse error: unexpected end of input"}`,
			wantOutcome: metrics.PromOutcomeBadQuery, wantInMsg: "parse error", badQuery: true},
		{name: "execution error as 422", wantStatus: http.StatusUnprocessableEntity, body: `{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}`,
			wantOutcome: metrics.PromOutcomeBadQuery, wantInMsg: "many-to-many", badQuery: true},
		{name: "truncated JSON", wantStatus: http.StatusOK, body: vectorBody[:len(vectorBody)/2],
			wantOutcome: metrics.PromOutcomeBadResponse, wantInMsg: "bad_response", unavailable: true},
		{name: "matrix for an instant query", wantStatus: http.StatusOK, body: `{"status":"success","data":{"resultType":"matrix","result":[]}}`,
			wantOutcome: metrics.PromOutcomeBadResponse, wantInMsg: "unexpected result type matrix", unavailable: true},
		{name: "unauthorized", wantStatus: http.StatusUnauthorized,
			wantOutcome: metrics.PromOutcomeServerError, wantInMsg: "401", unavailable: true},
		{name: "Prometheus evaluation timeout", wantStatus: http.StatusServiceUnavailable, body: `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`,
			wantOutcome: metrics.PromOutcomeTimeout, wantInMsg: "timed out", unavailable: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.wantStatus)
				io.WriteString(w, tc.body)
			})
			tokenFile := writeFile(t, filepath.Join(t.TempDir(), "token"), secret)
			m := metrics.New()
			c := optionsClient(t, f.URL, m, func(o *Options) { o.TokenFile = tokenFile })
			_, err := c.QuerySamples(context.Background(), `rate(x{pod="a"}[1m])`, time.Time{})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *promclient.Error", err, err)
			}
			if pe.Outcome != tc.wantOutcome || pe.StatusCode != tc.wantStatus || pe.Endpoint != metrics.EndpointQuery {
				t.Errorf("got endpoint %q outcome %q status %d, want query %q %d", pe.Endpoint, pe.Outcome, pe.StatusCode, tc.wantOutcome, tc.wantStatus)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.wantInMsg) || !strings.Contains(msg, `rate(x{pod=\"a\"}[1m])`) {
				t.Errorf("message %q lacks %q or the query", msg, tc.wantInMsg)
			}
			if strings.Contains(msg, secret) {
				t.Errorf("message %q leaks the token", msg)
			}
			if IsBadQuery(err) != tc.badQuery || IsUnavailable(err) != tc.unavailable {
				t.Errorf("IsBadQuery=%v IsUnavailable=%v, want %v %v", IsBadQuery(err), IsUnavailable(err), tc.badQuery, tc.unavailable)
			}
			if n := testutil.CollectAndCount(m.PrometheusRequestDuration); n != 1 {
				t.Errorf("%d latency series recorded, want 1", n)
			}
			if got := histogramCount(t, m, metrics.EndpointQuery, tc.wantOutcome); got != 1 {
				t.Errorf("latency observations for outcome %q = %d, want 1", tc.wantOutcome, got)
			}
		})
	}
}

func TestNetworkErrorHidesCredentialsInURL(t *testing.T) {
	srv := promtest.New(nil)
	addr := srv.URL
	srv.Close() // nothing listens there any more
	u, _ := url.Parse(addr)
	u.User = url.UserPassword("admin", "hunter2")
	c := newTestClient(t, Config{Address: u.String()})
	_, err := c.QuerySamples(context.Background(), "up", time.Time{})
	var pe *Error
	if !errors.As(err, &pe) || pe.Outcome != metrics.PromOutcomeNetwork {
		t.Fatalf("got %v, want a network_error *promclient.Error", err)
	}
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "query=") {
		t.Errorf("message %q leaks the password or the raw URL", err)
	}
	if !IsUnavailable(err) {
		t.Errorf("IsUnavailable = false for a refused connection")
	}
}

func TestHangingServerFailsWithinTimeout(t *testing.T) {
	release := make(chan struct{})
	var sawCancel atomic.Bool
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			sawCancel.Store(true)
		case <-release:
		}
	})
	defer close(release)
	m := metrics.New()
	c := newTestClient(t, Config{Address: f.URL, Timeout: 200 * time.Millisecond, Metrics: m})

	done := make(chan error, 1)
	go func() {
		_, err := c.QuerySamples(context.Background(), "up", time.Time{})
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Query against a hanging server did not return; the timeout is not enforced")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Outcome != metrics.PromOutcomeTimeout {
		t.Errorf("error %v is not a timeout *promclient.Error", err)
	}
	if got := f.requests()[0].Form.Get("timeout"); got != "200ms" {
		t.Errorf("timeout= %q, want 200ms", got)
	}
	if got := histogramCount(t, m, metrics.EndpointQuery, metrics.PromOutcomeTimeout); got != 1 {
		t.Errorf("timeout observations = %d, want 1", got)
	}
}

func TestCallerDeadlineIsHonoured(t *testing.T) {
	release := make(chan struct{})
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	c := newTestClient(t, Config{Address: f.URL, Timeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Series(ctx, []string{"up"}, time.Time{}, time.Time{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
}

func TestCoalescing(t *testing.T) {
	const n = 50
	release := make(chan struct{})
	var served atomic.Int32
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		<-release
		io.WriteString(w, vectorBody)
	})
	m := metrics.New()
	c := newTestClient(t, Config{Address: f.URL, Metrics: m})

	var wg sync.WaitGroup
	errs := make(chan error, n)
	results := make(chan Samples, n)
	for range n {
		wg.Go(func() {
			v, err := c.QuerySamples(context.Background(), "sum(up)", time.Time{})
			errs <- err
			results <- v
		})
	}
	// Release the single request once every other caller has joined it.
	waitFor(t, func() bool {
		return testutil.ToFloat64(m.CoalescedQueries.WithLabelValues(metrics.DefaultBackend, metrics.EndpointQuery)) == n-1
	})
	close(release)
	wg.Wait()
	close(errs)
	close(results)
	for err := range errs {
		if err != nil {
			t.Errorf("Query: %v", err)
		}
	}
	for v := range results {
		if diff := cmp.Diff(vectorSamples, v); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
	}
	if got := served.Load(); got != 1 {
		t.Errorf("Prometheus served %d requests for %d identical concurrent queries, want 1", got, n)
	}

	// Once the flight has landed, the next call sends a new request.
	if _, err := c.QuerySamples(context.Background(), "sum(up)", time.Time{}); err != nil {
		t.Fatalf("Query: %v", err)
	}
	if got := served.Load(); got != 2 {
		t.Errorf("served %d requests after the flight, want 2", got)
	}
}

func TestLastWaiterLeavingCancelsRequest(t *testing.T) {
	canceled := make(chan struct{})
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(canceled)
	})
	c := newTestClient(t, Config{Address: f.URL, Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.QuerySamples(ctx, "up", time.Time{})
		errc <- err
	}()
	waitFor(t, func() bool { return len(f.requests()) == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	select {
	case <-canceled:
	case <-time.After(30 * time.Second):
		t.Fatal("the request to Prometheus was not cancelled when its only caller left")
	}
}

func TestResultCache(t *testing.T) {
	var served atomic.Int32
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, vectorBody)
	})
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	m := metrics.New()
	c := newTestClient(t, Config{Address: f.URL, CacheTTL: 2 * time.Second, Clock: clk, Metrics: m})
	ctx := context.Background()
	for range 3 {
		if _, err := c.QuerySamples(ctx, "up", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := served.Load(); got != 1 {
		t.Errorf("served %d, want 1 within the TTL", got)
	}
	if got := testutil.ToFloat64(m.CacheHits.WithLabelValues(metrics.DefaultBackend, metrics.EndpointQuery)); got != 2 {
		t.Errorf("cache hits = %v, want 2", got)
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if _, err := c.QuerySamples(ctx, "up", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := served.Load(); got != 2 {
		t.Errorf("served %d, want 2 after the TTL", got)
	}

	// Off by default: every call asks Prometheus.
	c2 := newTestClient(t, Config{Address: f.URL, Clock: clk})
	for range 2 {
		if _, err := c2.QuerySamples(ctx, "up", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := served.Load(); got != 4 {
		t.Errorf("served %d, want 4 without a cache", got)
	}
}

func TestErrorsAreNotCached(t *testing.T) {
	var served atomic.Int32
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		io.WriteString(w, vectorBody)
	})
	c := newTestClient(t, Config{Address: f.URL, CacheTTL: time.Hour})
	if _, err := c.QuerySamples(context.Background(), "up", time.Time{}); err == nil {
		t.Fatal("first query: want the 500 error")
	}
	if _, err := c.QuerySamples(context.Background(), "up", time.Time{}); err != nil {
		t.Fatalf("second query: %v (an error was cached?)", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	hc := &http.Client{}
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "no http client", cfg: Config{Address: "http://p:9090"}},
		{name: "not a URL", cfg: Config{Address: "::", HTTPClient: hc}},
		{name: "no host", cfg: Config{Address: "http://", HTTPClient: hc}},
		{name: "bad verb", cfg: Config{Address: "http://p:9090", HTTPClient: hc, Verb: "PUT"}},
		{name: "negative timeout", cfg: Config{Address: "http://p:9090", HTTPClient: hc, Timeout: -time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil {
				t.Error("New accepted a bad config")
			}
		})
	}
}

func TestWithTimeout(t *testing.T) {
	f := newFakeProm(t, nil)
	c := newTestClient(t, Config{Address: f.URL, Timeout: 5 * time.Second})
	long := c.WithTimeout(2 * time.Minute)
	if c.Timeout() != 5*time.Second || long.Timeout() != 2*time.Minute {
		t.Fatalf("timeouts %v/%v", c.Timeout(), long.Timeout())
	}
	if _, err := long.QuerySamples(context.Background(), "up", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := f.requests()[0].Form.Get("timeout"); got != "120s" {
		t.Errorf("timeout= %q, want 120s", got)
	}
}

func histogramCount(t *testing.T, m *metrics.Metrics, endpoint, outcome string) uint64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "promscaler_prometheus_request_duration_seconds" {
			continue
		}
		for _, mm := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range mm.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["endpoint"] == endpoint && labels["outcome"] == outcome {
				return mm.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

// waitFor polls cond until it holds; a test that never gets there fails
// after a generous bound rather than hanging.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// writeFile writes content to path and returns path.
func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestQueryResultsOutliveTheBodyBuffer checks that nothing decoded from an
// answer (labels, warnings, error details) shares memory with the pooled
// buffer the body was read into, which the next answers overwrite.
func TestQueryResultsOutliveTheBodyBuffer(t *testing.T) {
	answers := map[string]func(w http.ResponseWriter){
		"vector": func(w http.ResponseWriter) {
			io.WriteString(w, `{"status":"success","warnings":["w-one"],"data":{"resultType":"vector","result":[`+
				`{"metric":{"namespace":"ns","pod":"p-one-1","l\u00e9":"esc\u00e9"},"value":[1700000000,"1"]},`+
				`{"metric":{"namespace":"ns","pod":"p-one-2","l\u00e9":"esc\u00e9"},"value":[1700000000,"1"]}]}}`)
		},
		"error": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "upstream one is down")
		},
		"other": func(w http.ResponseWriter) {
			io.WriteString(w, `{"status":"success","warnings":["w-two"],"data":{"resultType":"vector","result":[`+
				`{"metric":{"namespace":"xx","pod":"x-two-1","l\u00e9":"xxx\u00e9"},"value":[1700000000,"2"]},`+
				`{"metric":{"namespace":"xx","pod":"x-two-2","l\u00e9":"xxx\u00e9"},"value":[1700000000,"2"]}]}}`+strings.Repeat(" ", 64))
		},
	}
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		answers[r.FormValue("query")](w)
	})
	c := newTestClient(t, Config{Address: f.URL})
	ctx := context.Background()

	smps, err := c.QuerySamples(ctx, "vector", time.Time{})
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	_, qerr := c.QuerySamples(ctx, "error", time.Time{})
	if qerr == nil {
		t.Fatal("Query(error) succeeded")
	}
	errText := qerr.Error()
	for range 5 {
		if _, err := c.QuerySamples(ctx, "other", time.Time{}); err != nil {
			t.Fatalf("Query: %v", err)
		}
	}
	want := Samples{
		{Labels: Labels{{"namespace", "ns"}, {"pod", "p-one-1"}, {"lé", "escé"}}, Value: 1, Timestamp: 1700000000000},
		{Labels: Labels{{"namespace", "ns"}, {"pod", "p-one-2"}, {"lé", "escé"}}, Value: 1, Timestamp: 1700000000000},
	}
	if diff := cmp.Diff(want, smps); diff != "" {
		t.Errorf("first samples after later answers (-want +got):\n%s", diff)
	}
	if got := qerr.Error(); got != errText || !strings.Contains(got, "upstream one is down") {
		t.Errorf("error text changed or lost its detail: %q, then %q", errText, got)
	}
}
