package promclient

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeGoogleToken is a fake Google OAuth2 token endpoint for service
// account keys: it checks the JWT assertion's signature with the key's
// public half and answers tokens living expiresIn seconds.
type fakeGoogleToken struct {
	srv    *httptest.Server
	mu     sync.Mutex
	claims []map[string]any
}

func newFakeGoogleToken(t *testing.T, pub *rsa.PublicKey, expiresIn int) *fakeGoogleToken {
	g := &fakeGoogleToken{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			http.Error(w, "grant_type", http.StatusBadRequest)
			return
		}
		claims, err := verifyRS256(r.PostForm.Get("assertion"), pub)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		g.mu.Lock()
		g.claims = append(g.claims, claims)
		n := len(g.claims)
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"google-%d","expires_in":%d,"token_type":"Bearer"}`, n, expiresIn)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// verifyRS256 checks a JWT's RS256 signature and returns its claims.
func verifyRS256(jwt string, pub *rsa.PublicKey) (map[string]any, error) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	return claims, json.Unmarshal(payload, &claims)
}

// serviceAccountFile writes a service account key file whose tokens come
// from tokenURI.
func serviceAccountFile(t *testing.T, key *rsa.PrivateKey, tokenURI string) string {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	data, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "k1", "private_key": string(pemKey),
		"client_email": "adapter@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURI,
	})
	path := writeFile(t, t.TempDir()+"/sa.json", string(data))
	return path
}

// A service account key (the file, or the application default credentials
// naming it) gets tokens for the monitoring.read scope, reused while valid
// and asked again when about to expire.
func TestGoogleServiceAccountTokens(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		adc       bool
		expiresIn int
		want      []string
	}{
		{"credentials file", false, 3600, []string{"Bearer google-1", "Bearer google-1", "Bearer google-1"}},
		{"application default credentials", true, 3600, []string{"Bearer google-1", "Bearer google-1", "Bearer google-1"}},
		{"token about to expire", false, 5, []string{"Bearer google-1", "Bearer google-2", "Bearer google-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HOME", t.TempDir())
			g := newFakeGoogleToken(t, &key.PublicKey, tc.expiresIn)
			path := serviceAccountFile(t, key, g.srv.URL+"/token")
			cfg := &GoogleConfig{CredentialsFile: path}
			t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
			if tc.adc {
				cfg = &GoogleConfig{}
				t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
			}
			f := newFakeProm(t, nil)
			got := queryN(t, Backend{Name: "gmp", URL: f.URL, Timeout: DefaultTimeout, Auth: CloudAuth{Google: cfg}}, f, 3)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Authorization headers (-want +got):\n%s", d)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if len(g.claims) == 0 || g.claims[0]["scope"] != GoogleMonitoringReadScope || g.claims[0]["iss"] != "adapter@p.iam.gserviceaccount.com" {
				t.Errorf("assertion claims %v, want the monitoring.read scope from the service account", g.claims)
			}
		})
	}
}

// On GKE with workload identity, the application default credentials are
// the metadata server's tokens.
func TestGoogleMetadataServer(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	md := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "flavor", http.StatusForbidden)
			return
		}
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Metadata-Flavor", "Google")
		switch r.URL.Path {
		case "/computeMetadata/v1/instance/service-accounts/default/token":
			fmt.Fprint(w, `{"access_token":"gke-wi","expires_in":3600,"token_type":"Bearer"}`)
		case "/computeMetadata/v1/project/project-id":
			fmt.Fprint(w, "p")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(md.Close)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(md.URL, "http://"))
	f := newFakeProm(t, nil)
	got := queryN(t, Backend{Name: "gmp", URL: f.URL, Timeout: DefaultTimeout, Auth: CloudAuth{Google: &GoogleConfig{}}}, f, 2)
	if d := cmp.Diff([]string{"Bearer gke-wi", "Bearer gke-wi"}, got); d != "" {
		t.Errorf("Authorization headers (-want +got):\n%s", d)
	}
	mu.Lock()
	defer mu.Unlock()
	tokens := 0
	for _, p := range paths {
		if strings.HasSuffix(p, "/token") {
			tokens++
		}
	}
	if tokens != 1 {
		t.Errorf("%d token requests to the metadata server (%v), want 1", tokens, paths)
	}
}
