package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/promscaler/promscaler/pkg/promclient"
)

func TestIsHealthPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/livez": true, "/readyz": true, "/healthz": true,
		"/readyz/metrics-discovery": true, "/livez/ping": true,
		"/readyzz": false, "/metrics": false, "/": false,
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/a/m": false,
	} {
		if got := isHealthPath(path); got != want {
			t.Errorf("isHealthPath(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestHealthNotBehindStalledMetricRequests fills the API server's in-flight
// limit with metric requests waiting on a stalled Prometheus: the probes
// still answer 200 (they answered 429 while they shared the limit).
func TestHealthNotBehindStalledMetricRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full API server")
	}
	const inFlight = 3
	fake := newTestProm(t)
	ts := startTestServer(t, testRules, DefaultProviders, fake.URL, func(c *Config) {
		c.APIServer.GenericConfig.MaxRequestsInFlight = inFlight
		// Longer than the test: the requests stay stalled until released.
		c.Backends[0].Timeout = time.Minute
	})
	ts.waitReady()

	arrived, release := fake.Hold(inFlight)
	defer release()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer release() // runs before wg.Wait
	client := &http.Client{Transport: ts.client.Transport}
	for i := range inFlight {
		// A pod each: distinct queries, so none joins another's flight.
		path := fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/pod-%d/http_requests_per_second", i)
		wg.Go(func() {
			if resp, err := client.Get(ts.base + path); err == nil {
				resp.Body.Close()
			}
		})
	}
	for range inFlight {
		<-arrived
	}
	// Every slot of the limit is taken: another metric request is refused...
	if code, body := ts.get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/pod-x/http_requests_per_second"); code != http.StatusTooManyRequests {
		t.Errorf("metric request beyond the in-flight limit = %d %s; want 429 (is the limit full?)", code, truncateForLog(body))
	}
	// ...and the probes are answered.
	for _, path := range []string{"/livez", "/readyz", "/healthz", "/readyz?verbose"} {
		if code, body := ts.get(path); code != http.StatusOK {
			t.Errorf("GET %s with the in-flight limit full = %d %s; want 200", path, code, truncateForLog(body))
		}
	}
	release()
	wg.Wait()
	ts.stop()
}

func TestAPIServerReachability(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc // nil: nothing listens
		wantErr string
	}{
		{name: "answers", handler: func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"major":"1"}`) }},
		{name: "answers 403", handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }},
		{name: "answers 503", handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
			wantErr: "the kube-apiserver does not answer: GET /version answered 503"},
		{name: "unreachable", wantErr: "connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			if tc.handler == nil {
				srv.Close()
			} else {
				defer srv.Close()
			}
			a, err := newAPIServerReachability(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Check(nil); err == nil || !strings.Contains(err.Error(), "not been probed") {
				t.Errorf("before the first probe: %v, want not probed yet", err)
			}
			a.probeOnce(context.Background())
			err = a.Check(nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Check = %v, want ready", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Check = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestReadyzDetails(t *testing.T) {
	checks := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "[+]ping ok\nreadyz check passed\n")
	})
	var lines []string
	h := withReadyzDetails(checks, func() []string { return lines })
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if _, body := get("/readyz?verbose"); body != "[+]ping ok\nreadyz check passed\n" {
		t.Errorf("without details: %q", body)
	}
	lines = []string{`prometheus backend "default": down`}
	code, body := get("/readyz?verbose")
	want := "[+]ping ok\nreadyz check passed\n\nnot readiness failures:\n[i]prometheus backend \"default\": down\n"
	if code != http.StatusOK || body != want {
		t.Errorf("with details: %d %q, want 200 %q", code, body, want)
	}
	for _, path := range []string{"/readyz", "/livez?verbose"} {
		if _, body := get(path); strings.Contains(body, "[i]") {
			t.Errorf("GET %s has the details: %q", path, body)
		}
	}
}

// TestReadinessTellsTheTruth: /readyz names its checks (config loaded,
// discovery done once, kube-apiserver reachable); a Prometheus that stops
// answering is not a readiness failure but 503s on metric requests, a
// line in /readyz?verbose and promscaler_prometheus_up 0; a configuration
// file rejected on reload is a line there too.
func TestReadinessTellsTheTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full API server")
	}
	fake := newTestProm(t)
	ts := startTestServer(t, testRules, DefaultProviders, fake.URL, func(c *Config) {
		c.ConfigReloadInterval = 20 * time.Millisecond
	})
	ts.waitReady()
	_, body := ts.get("/readyz?verbose")
	for _, want := range []string{"[+]config-loaded ok", "[+]metrics-discovery ok", "[+]kube-apiserver ok", "[+]front-proxy-ca ok"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz?verbose lacks %q:\n%s", want, body)
		}
	}

	// Prometheus gone: connection errors mark it down after 5.
	fake.Close()
	for i := range promclient.DefaultBreakerFailures + 1 {
		path := fmt.Sprintf("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/pod-%d/http_requests_per_second", i)
		if code, body := ts.get(path); code != http.StatusServiceUnavailable {
			t.Errorf("GET %s with Prometheus gone = %d %s; want 503", path, code, truncateForLog(body))
		}
	}
	code, body := ts.get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/pod-a/http_requests_per_second")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "backend_down") {
		t.Errorf("with Prometheus known down = %d %s; want 503 saying backend_down", code, truncateForLog(body))
	}
	code, body = ts.get("/readyz?verbose")
	if code != http.StatusOK || !strings.Contains(body, `[i]prometheus backend "default": down since`) {
		t.Errorf("/readyz?verbose with Prometheus down = %d\n%s\nwant 200 with the backend's line", code, body)
	}
	for _, path := range []string{"/livez", "/readyz"} {
		if code, _ := ts.get(path); code != http.StatusOK {
			t.Errorf("GET %s with Prometheus down = %d, want 200", path, code)
		}
	}
	if _, body := ts.get("/metrics"); !strings.Contains(body, `promscaler_prometheus_up{backend="default"} 0`) {
		t.Errorf("/metrics lacks promscaler_prometheus_up{backend=\"default\"} 0")
	}

	// A rules file rejected on reload: a line, not a failure.
	replaceFile(t, ts.rulesFile, "rules: [")
	ts.waitUntil("the rejected file in /readyz?verbose", func() bool {
		_, body := ts.get("/readyz?verbose")
		return strings.Contains(body, "[i]configuration file "+ts.rulesFile+": not in service since")
	})
	if code, _ := ts.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with a rejected file = %d, want 200", code)
	}
	ts.stop()
}
