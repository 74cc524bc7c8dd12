package server

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/test/promtest"
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
	fake := promtest.New([]model.LabelSet{
		{"__name__": "http_requests_total", "namespace": "default", "pod": "pod-a"},
	})
	defer fake.Close()
	ts := startTestServer(t, DefaultProviders, fake.URL, func(c *Config) {
		c.APIServer.GenericConfig.MaxRequestsInFlight = inFlight
		// Longer than the test: the requests stay stalled until released.
		c.Prometheus.Timeout = time.Minute
	})
	ts.waitUntil("/readyz after the first discovery", func() bool {
		code, _ := ts.get("/readyz")
		return code == http.StatusOK
	})

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
