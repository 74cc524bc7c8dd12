//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// TestAPIServerOutage: with kube-apiserver stopped, a client talking to the
// adapter's own port (the aggregator is down with the API server) gets a
// 503 on every metrics API, never a 500, and no answer names the API
// server's address. The adapter needs the API server for each such request
// (its authorization is delegated to it); the pods it lists come from its
// caches.
func TestAPIServerOutage(t *testing.T) {
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	a := env.MustStartAdapter(t, framework.AdapterConfig{
		ConfigFile:      testdata("metrics-config.yaml"),
		PrometheusURL:   prom.URL,
		ResourceMetrics: true,
		ExtraArgs:       []string{"--config=" + writeResourceConfig(t)},
	})
	ctx := ctxFor(t, 4*time.Minute)
	const ns = "outage"
	for _, err := range []error{
		env.EnsureNamespace(ctx, ns),
		x.FPM(ns, "web-1", 1, 2),
		x.SetCounterRate("http_requests_total", map[string]string{"namespace": ns, "service": "web", "method": "GET"}, 2),
		setContainerUsage(x, containerUsage{ns, "web-1", "app", 0.25, 100 << 20}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.CreateReadyPods(ctx, ns, map[string]string{"app": "web"}, time.Minute, time.Minute, "web-1"); err != nil {
		t.Fatal(err)
	}
	// bob reads metrics (the documented ClusterRole) but is no
	// system:masters member: the adapter asks the API server whether he may.
	if err := bindMetricsReader(ctx, env, "bob"); err != nil {
		t.Fatal(err)
	}
	bob, err := env.UserRESTConfig("bob", "sre")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(bob.CertData, bob.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}, //nolint:gosec // loopback test server
	}}
	defer hc.CloseIdleConnections()
	get := func(ctx context.Context, path string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+path, nil)
		if err != nil {
			return 0, "", err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(body), err
	}
	paths := func(ns string) []string {
		return []string{
			"/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/fpm_active_rate",
			"/apis/custom.metrics.k8s.io/v1beta1/namespaces/" + ns + "/pods/web-1/fpm_active_rate",
			"/apis/external.metrics.k8s.io/v1beta1/namespaces/" + ns + "/http_requests_per_second",
			"/apis/metrics.k8s.io/v1beta1/namespaces/" + ns + "/pods",
			"/apis/metrics.k8s.io/v1beta1/namespaces/" + ns + "/pods/web-1",
			"/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=" + url.QueryEscape("outage="+ns),
		}
	}
	// Served while the API server is up.
	for _, p := range paths(ns) {
		eventually(t, ctx, 90*time.Second, "bob reads "+p, func(ctx context.Context) error {
			code, body, err := get(ctx, p)
			if err != nil {
				return err
			}
			if code != http.StatusOK {
				return errorf("HTTP %d: %.300s", code, body)
			}
			return nil
		})
	}

	var apiserver *framework.Process
	for _, p := range env.Processes() {
		if p.Name == "kube-apiserver" {
			apiserver = p
		}
	}
	if apiserver == nil {
		t.Fatal("no kube-apiserver process in the environment")
	}
	apiserver.Stop(10 * time.Second)
	apiHost := strings.TrimPrefix(env.APIServerURL, "https://")

	// Paths never asked before, so no kept authorization decision answers.
	for _, p := range paths("never-asked") {
		code, body, err := get(ctx, p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if code != http.StatusServiceUnavailable {
			t.Errorf("%s with kube-apiserver down: HTTP %d, want 503: %.400s", p, code, body)
		}
		for _, leak := range []string{apiHost, "https://", "127.0.0.1"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s: the answer shows %q: %.400s", p, leak, body)
			}
		}
	}
}
