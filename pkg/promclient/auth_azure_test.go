package promclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/internal/metrics"
)

// fakeEntra is a fake Entra ID authority (TLS, as azidentity requires):
// OpenID discovery and a token endpoint whose tokens live expiresIn.
type fakeEntra struct {
	srv       *httptest.Server
	expiresIn int
	mu        sync.Mutex
	forms     []url.Values
}

func newFakeEntra(t *testing.T, expiresIn int) *fakeEntra {
	e := &fakeEntra{expiresIn: expiresIn}
	e.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		base := "https://" + r.Host + "/tenant-1"
		switch {
		case strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration"):
			json.NewEncoder(w).Encode(map[string]string{
				"token_endpoint": base + "/oauth2/v2.0/token", "authorization_endpoint": base + "/oauth2/v2.0/authorize",
				"issuer": base + "/v2.0",
			})
		case strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token"):
			_ = r.ParseForm()
			e.mu.Lock()
			e.forms = append(e.forms, r.PostForm)
			n := len(e.forms)
			e.mu.Unlock()
			fmt.Fprintf(w, `{"token_type":"Bearer","expires_in":%d,"access_token":"entra-%d"}`, e.expiresIn, n)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *fakeEntra) tokenForms() []url.Values {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]url.Values(nil), e.forms...)
}

// options points azidentity at the fake authority.
func (e *fakeEntra) use(c *AzureADConfig) {
	c.clientOptions = &azcore.ClientOptions{
		Cloud:     cloud.Configuration{ActiveDirectoryAuthorityHost: e.srv.URL + "/"},
		Transport: e.srv.Client(),
	}
	c.noInstanceDiscovery = true
}

// queryN sends n distinct queries through a client of b and returns the
// Authorization headers Prometheus saw.
func queryN(t *testing.T, b Backend, f *fakeProm, n int) []string {
	t.Helper()
	c, err := NewForBackend(b, metrics.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := c.QuerySamples(context.Background(), fmt.Sprintf("up + %d", i), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	for _, r := range f.requests() {
		out = append(out, r.Header.Get("Authorization"))
	}
	return out
}

// A client secret and a workload identity (the projected token file,
// re-read for each token) get Entra tokens for the Azure Monitor
// workspace's query scope; a token is reused while valid and a new one is
// asked when it is about to expire, without a restart.
func TestAzureADTokens(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/secret", "s3cret\n")
	writeFile(t, dir+"/sa-token", "projected-1")
	for _, tc := range []struct {
		name      string
		cfg       AzureADConfig
		expiresIn int
		want      []string
		form      map[string]string
	}{
		{name: "client secret, long-lived token", expiresIn: 3600,
			cfg:  AzureADConfig{OAuth: &AzureOAuth{ClientID: "app-1", TenantID: "tenant-1", ClientSecretFile: dir + "/secret"}},
			want: []string{"Bearer entra-1", "Bearer entra-1", "Bearer entra-1"},
			form: map[string]string{"client_id": "app-1", "client_secret": "s3cret", "grant_type": "client_credentials"}},
		{name: "client secret, token about to expire", expiresIn: 60,
			cfg:  AzureADConfig{OAuth: &AzureOAuth{ClientID: "app-1", TenantID: "tenant-1", ClientSecret: "inline"}},
			want: []string{"Bearer entra-1", "Bearer entra-2", "Bearer entra-3"},
			form: map[string]string{"client_secret": "inline"}},
		{name: "workload identity", expiresIn: 3600,
			cfg:  AzureADConfig{WorkloadIdentity: &AzureWorkloadIdentity{ClientID: "app-2", TenantID: "tenant-1", TokenFilePath: dir + "/sa-token"}},
			want: []string{"Bearer entra-1", "Bearer entra-1", "Bearer entra-1"},
			form: map[string]string{"client_id": "app-2", "client_assertion": "projected-1",
				"client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEntra(t, tc.expiresIn)
			f := newFakeProm(t, nil)
			cfg := tc.cfg
			e.use(&cfg)
			got := queryN(t, Backend{Name: "azure", URL: f.URL, Timeout: time.Minute, Auth: CloudAuth{AzureAD: &cfg}}, f, 3)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Authorization headers (-want +got):\n%s", d)
			}
			forms := e.tokenForms()
			if len(forms) == 0 {
				t.Fatal("no token request")
			}
			// MSAL adds OpenID's scopes to the one asked.
			if scopes := strings.Fields(forms[0].Get("scope")); !slices.Contains(scopes, "https://prometheus.monitor.azure.com/.default") {
				t.Errorf("token request scopes %q lack the query scope", scopes)
			}
			for k, v := range tc.form {
				if got := forms[0].Get(k); got != v {
					t.Errorf("token request %s=%q, want %q", k, got, v)
				}
			}
		})
	}
}

// managedIdentityRuns numbers TestAzureADManagedIdentity's runs.
var managedIdentityRuns atomic.Int64

// A managed identity's token comes from the environment's identity
// endpoint (App Service's IDENTITY_ENDPOINT here; IMDS on a VM or node).
func TestAzureADManagedIdentity(t *testing.T) {
	var mu sync.Mutex
	var asked []url.Values
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-IDENTITY-HEADER") != "identity-secret" {
			http.Error(w, "no identity header", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		asked = append(asked, r.URL.Query())
		mu.Unlock()
		fmt.Fprintf(w, `{"access_token":"mi-token","expires_on":"%d","resource":%q,"token_type":"Bearer"}`,
			time.Now().Add(time.Hour).Unix(), r.URL.Query().Get("resource"))
	}))
	t.Cleanup(ep.Close)
	t.Setenv("IDENTITY_ENDPOINT", ep.URL+"/msi/token")
	t.Setenv("IDENTITY_HEADER", "identity-secret")
	f := newFakeProm(t, nil)
	// MSAL caches managed identity tokens process-wide, by client ID: a
	// client ID of this run's own makes -count=N ask the endpoint again.
	clientID := fmt.Sprintf("mi-client-%d", managedIdentityRuns.Add(1))
	cfg := &AzureADConfig{ManagedIdentity: &AzureManagedIdentity{ClientID: clientID}}
	got := queryN(t, Backend{Name: "azure", URL: f.URL, Timeout: time.Minute, Auth: CloudAuth{AzureAD: cfg}}, f, 2)
	if d := cmp.Diff([]string{"Bearer mi-token", "Bearer mi-token"}, got); d != "" {
		t.Errorf("Authorization headers (-want +got):\n%s", d)
	}
	if len(asked) != 1 || asked[0].Get("resource") != "https://prometheus.monitor.azure.com" || asked[0].Get("client_id") != clientID {
		t.Errorf("identity endpoint asked %v, want once for the query resource and the client ID", asked)
	}
}
