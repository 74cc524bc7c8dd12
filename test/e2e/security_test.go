//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// statusAs GETs path through the apiserver with cfg and returns the HTTP status.
func statusAs(ctx context.Context, t *testing.T, cfg *rest.Config, path string) int {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var code int
	c.Discovery().RESTClient().Get().RequestURI(path).Do(ctx).StatusCode(&code)
	return code
}

// TestSecurity goes through the real aggregator: anonymous and unknown
// clients are refused with 401/403, an authenticated user without a role with
// 403, and a user bound to the documented ClusterRole reads metrics. The
// adapter's own port refuses clients that did not come through the
// aggregator, even with forged identity headers.
func TestSecurity(t *testing.T) {
	env, x, a := startMetricsStack(t)
	ctx := ctxFor(t, 3*time.Minute)
	const ns = "secure"
	if err := env.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := x.FPM(ns, "web-1", 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CreateReadyPods(ctx, ns, map[string]string{"app": "web"}, time.Minute, time.Minute, "web-1"); err != nil {
		t.Fatal(err)
	}
	path := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/fpm_active_rate"
	external := "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + ns + "/http_requests_per_second"

	// The metric is served to the admin first, so refusals below are about
	// identity, not a missing metric.
	eventually(t, ctx, 60*time.Second, "admin reads the metric", func(ctx context.Context) error {
		_, err := getRaw(ctx, env, path)
		return err
	})

	anonymous := &rest.Config{Host: env.APIServerURL, TLSClientConfig: rest.TLSClientConfig{CAData: env.PKI.ClusterCA.CertPEM}}
	badToken := rest.CopyConfig(anonymous)
	badToken.BearerToken = "not-a-valid-token"
	alice, err := env.UserRESTConfig("alice", "developers")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := env.UserRESTConfig("bob", "sre")
	if err != nil {
		t.Fatal(err)
	}
	if err := bindMetricsReader(ctx, env, "bob"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		cfg   *rest.Config
		path  string
		codes []int
	}{
		{name: "anonymous", cfg: anonymous, path: path, codes: []int{http.StatusUnauthorized, http.StatusForbidden}},
		{name: "anonymous external", cfg: anonymous, path: external, codes: []int{http.StatusUnauthorized, http.StatusForbidden}},
		{name: "invalid token", cfg: badToken, path: path, codes: []int{http.StatusUnauthorized}},
		{name: "user without role", cfg: alice, path: path, codes: []int{http.StatusForbidden}},
		{name: "user without role, external", cfg: alice, path: external, codes: []int{http.StatusForbidden}},
		{name: "user with the metrics-reader ClusterRole", cfg: bob, path: path, codes: []int{http.StatusOK}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var code int
			// RBAC bindings reach the authorizer's cache within a moment.
			eventually(t, ctx, 20*time.Second, tc.name, func(ctx context.Context) error {
				code = statusAs(ctx, t, tc.cfg, tc.path)
				for _, c := range tc.codes {
					if code == c {
						return nil
					}
				}
				return errorf("HTTP %d, want one of %v", code, tc.codes)
			})
		})
	}

	// A client certificate on the adapter's own port authenticates as its
	// common name, never as forged front-proxy headers, also when its
	// verification is kept (certauth): 3 requests, the first verified, the
	// others from the kept verification, as the adapter's metrics say. Had
	// the headers been honoured, "nobody" would get a 403.
	t.Run("adapter port: client certificate, kept verification, forged headers ignored", func(t *testing.T) {
		cert, err := tls.X509KeyPair(env.PKI.Admin.CertPEM, env.PKI.Admin.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}, //nolint:gosec // loopback test server
		}}
		defer hc.CloseIdleConnections()
		results := func() map[string]float64 {
			code, body := getAs(t, ctx, hc, a.URL+"/metrics", "", "")
			if code != http.StatusOK {
				t.Fatalf("adapter /metrics = HTTP %d", code)
			}
			out := map[string]float64{}
			for _, line := range strings.Split(body, "\n") {
				for _, r := range []string{"cached", "verified", "library"} {
					prefix := `promscaler_api_client_cert_authentications_total{result="` + r + `"} `
					if v, ok := strings.CutPrefix(line, prefix); ok {
						f, err := strconv.ParseFloat(v, 64)
						if err != nil {
							t.Fatalf("%s: %v", line, err)
						}
						out[r] = f
					}
				}
			}
			return out
		}
		before := results()
		for i := range 3 {
			if code, body := getAs(t, ctx, hc, a.URL+path, "nobody", "nogroup"); code != http.StatusOK {
				t.Errorf("request %d with the admin certificate and forged headers = HTTP %d (%.200s), want 200 as the certificate's user", i+1, code, body)
			}
		}
		after := results()
		if cached := after["cached"] - before["cached"]; cached < 3 {
			// The /metrics requests count too: at least the 3 above and
			// the second /metrics read are answered from a kept one.
			t.Errorf("kept verifications used: %v more (before %v, after %v), want at least 3", cached, before, after)
		}
	})

	t.Run("adapter port refuses direct clients", func(t *testing.T) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback test server
		}}
		for _, forged := range []bool{false, true} {
			user, group := "", ""
			if forged {
				user, group = "system:admin", "system:masters"
			}
			if code, _ := getAs(t, ctx, hc, a.URL+path, user, group); code != http.StatusUnauthorized && code != http.StatusForbidden {
				t.Errorf("direct request (forged headers: %v) = HTTP %d, want 401 or 403", forged, code)
			}
		}
	})
}

// getAs GETs url with hc, with front-proxy headers naming user and group
// when user is set, and returns the HTTP code and the body (4 MiB at most).
func getAs(t *testing.T, ctx context.Context, hc *http.Client, url, user, group string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("X-Remote-User", user)
		req.Header.Set("X-Remote-Group", group)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, string(body)
}

// bindMetricsReader binds user to the documented metrics-reader ClusterRole.
func bindMetricsReader(ctx context.Context, env *framework.Env, user string) error {
	_, err := env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + user + "-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: framework.MetricsReaderClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{})
	return err
}
