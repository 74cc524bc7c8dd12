package promclient

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/test/promtest"
)

// awsIsolated keeps the AWS default chain off this machine's files, the
// instance metadata service and the real STS.
func awsIsolated(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": dir + "/config", "AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_REGION": "", "AWS_DEFAULT_REGION": "",
		"AWS_ROLE_ARN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_AUTHORIZATION_TOKEN": "",
		"AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_STS": "",
	} {
		t.Setenv(k, v)
	}
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// sigV4Signature is the signature of a canonical request, written from
// AWS's specification (independently of the signer under test).
func sigV4Signature(secret, amzDate, region, service, canonicalRequest string) string {
	day := amzDate[:8]
	scope := day + "/" + region + "/" + service + "/aws4_request"
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + sha256Hex([]byte(canonicalRequest))
	k := hmacSHA256([]byte("AWS4"+secret), day)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	k = hmacSHA256(k, "aws4_request")
	return hex.EncodeToString(hmacSHA256(k, toSign))
}

// The verifier itself against AWS's published test vector (the SigV4 test
// suite's get-vanilla: fixed date, fixed credentials, a fixed signature).
func TestSigV4SignatureKnownAnswer(t *testing.T) {
	canonical := "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" +
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	got := sigV4Signature("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830T123600Z", "us-east-1", "service", canonical)
	if want := "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

// awsEscape is SigV4's URI encoding: everything but A-Z a-z 0-9 - _ . ~.
func awsEscape(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// canonicalRequest rebuilds, on the receiving side, the canonical request of
// r over the headers its Authorization header says are signed.
func canonicalRequest(r *http.Request, body []byte, signed []string) string {
	var q []string
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			q = append(q, awsEscape(k)+"="+awsEscape(v))
		}
	}
	slices.Sort(q)
	var hs strings.Builder
	for _, h := range signed {
		v := r.Header.Get(h)
		if h == "host" {
			v = r.Host
		}
		fmt.Fprintf(&hs, "%s:%s\n", h, strings.TrimSpace(v))
	}
	return strings.Join([]string{r.Method, r.URL.EscapedPath(), strings.Join(q, "&"), hs.String(),
		strings.Join(signed, ";"), sha256Hex(body)}, "\n")
}

// sigV4Check is what the fake managed Prometheus found of a request's
// signature.
type sigV4Check struct {
	KeyID, Scope, Signed string
	Valid                bool
}

// sigV4Server is a fake Amazon Managed Service for Prometheus: it checks
// each request's SigV4 signature with the secret of its access key.
type sigV4Server struct {
	srv     *promtest.Server
	secrets map[string]string
	mu      sync.Mutex
	checks  []sigV4Check
}

func newSigV4Server(t *testing.T, secrets map[string]string) *sigV4Server {
	s := &sigV4Server{secrets: secrets}
	s.srv = promtest.New(nil)
	s.srv.Handle(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.checks = append(s.checks, s.check(r, body))
		s.mu.Unlock()
		answerVector(w, r)
	})
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sigV4Server) check(r *http.Request, body []byte) sigV4Check {
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ")
	if !ok {
		return sigV4Check{}
	}
	fields := map[string]string{}
	for _, f := range strings.Split(auth, ", ") {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	keyID, scope, _ := strings.Cut(fields["Credential"], "/")
	parts := strings.Split(scope, "/")
	if len(parts) != 4 {
		return sigV4Check{KeyID: keyID}
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	want := sigV4Signature(s.secrets[keyID], r.Header.Get("X-Amz-Date"), parts[1], parts[2], canonicalRequest(r, body, signed))
	return sigV4Check{KeyID: keyID, Scope: strings.Join(parts[1:], "/"), Signed: fields["SignedHeaders"], Valid: hmac.Equal([]byte(want), []byte(fields["Signature"]))}
}

func (s *sigV4Server) got() []sigV4Check {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sigV4Check(nil), s.checks...)
}

// Each request, GET or POST (its body hashed), reaches the server signed
// with the configured credentials, region and service, the backend's own
// headers signed too.
func TestSigV4SignsRequests(t *testing.T) {
	awsIsolated(t)
	for _, verb := range []string{http.MethodGet, http.MethodPost} {
		t.Run(verb, func(t *testing.T) {
			s := newSigV4Server(t, map[string]string{"AKIDEXAMPLE": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"})
			queryFromFile(t, `backends:
- name: amp
  url: `+s.srv.URL+`/workspaces/ws-1
  verb: `+verb+`
  headers: {X-Scope-OrgID: team-a}
  sigv4: {region: eu-west-1, access_key: AKIDEXAMPLE, secret_key: wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY}
`, `sum(rate(http_requests_total{job="a b"}[2m]))`)
			want := []sigV4Check{{KeyID: "AKIDEXAMPLE", Scope: "eu-west-1/aps/aws4_request", Valid: true}}
			got := s.got()
			if len(got) == 1 && !strings.Contains(got[0].Signed, "x-scope-orgid") {
				t.Errorf("signed headers %q lack the backend's x-scope-orgid", got[0].Signed)
			}
			if d := cmp.Diff(want, got, cmpIgnoreSigned); d != "" {
				t.Errorf("signatures (-want +got):\n%s", d)
			}
		})
	}
}

var cmpIgnoreSigned = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Signed" }, cmp.Ignore())

// Without keys, the AWS default chain's credentials sign: here EKS Pod
// Identity's container endpoint, asked again when they expire (refreshed
// without a restart).
func TestSigV4DefaultChainRefreshes(t *testing.T) {
	awsIsolated(t)
	var mu sync.Mutex
	n := 0
	secrets := map[string]string{}
	creds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "pod-identity-token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		n++
		id, secret := fmt.Sprintf("ASIAPOD%d", n), fmt.Sprintf("secret-%d", n)
		secrets[id] = secret
		mu.Unlock()
		// Already within the cache's expiry window: the next request asks again.
		exp := time.Now().Add(5 * time.Second).UTC().Format(time.RFC3339)
		fmt.Fprintf(w, `{"AccessKeyId":%q,"SecretAccessKey":%q,"Token":"session","Expiration":%q}`, id, secret, exp)
	}))
	t.Cleanup(creds.Close)
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", creds.URL+"/v1/credentials")
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "pod-identity-token")
	t.Setenv("AWS_REGION", "us-west-2")

	s := newSigV4Server(t, secrets)
	o := NewOptions()
	o.Default.URL = s.srv.URL
	o.Cloud.SigV4 = true
	if errs := o.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	c, err := o.NewClient(metrics.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"up", "up == 1"} {
		if _, err := c.QuerySamples(context.Background(), q, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	got := s.got()
	if len(got) != 2 || !got[0].Valid || !got[1].Valid || got[0].KeyID == got[1].KeyID {
		t.Errorf("want two valid signatures with successive credentials, got %+v", got)
	}
	if len(got) > 0 && got[0].Scope != "us-west-2/aps/aws4_request" {
		t.Errorf("scope %q, want the chain's region", got[0].Scope)
	}
}

// stsServer is a fake AWS STS answering AssumeRole and
// AssumeRoleWithWebIdentity.
func stsServer(t *testing.T, secrets map[string]string, calls *[]url.Values) *httptest.Server {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		*calls = append(*calls, r.PostForm)
		mu.Unlock()
		action := r.PostForm.Get("Action")
		id := "ASIA" + strings.ToUpper(action)
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<%[1]sResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><%[1]sResult>
<Credentials><AccessKeyId>%[2]s</AccessKeyId><SecretAccessKey>%[3]s</SecretAccessKey><SessionToken>tok</SessionToken>
<Expiration>%[4]s</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::111122223333:assumed-role/reader/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser>
</%[1]sResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></%[1]sResponse>`,
			action, id, secrets[id], time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// IRSA (a web identity token and a role from the environment) and
// role_arn (a role assumed with the chain's credentials) go through STS.
func TestSigV4AssumesRoles(t *testing.T) {
	secrets := map[string]string{
		"ASIAASSUMEROLEWITHWEBIDENTITY": "web-secret", "ASIAASSUMEROLE": "role-secret", "AKIDBASE": "base-secret",
	}
	for _, tc := range []struct {
		name, sigv4 string
		env         map[string]string
		wantKey     string
		wantAction  string
	}{
		{name: "irsa", sigv4: `{region: eu-central-1}`, wantKey: "ASIAASSUMEROLEWITHWEBIDENTITY", wantAction: "AssumeRoleWithWebIdentity",
			env: map[string]string{"AWS_ROLE_ARN": "arn:aws:iam::111122223333:role/reader"}},
		{name: "role_arn", sigv4: `{region: eu-central-1, role_arn: "arn:aws:iam::111122223333:role/reader"}`,
			wantKey: "ASIAASSUMEROLE", wantAction: "AssumeRole",
			env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIDBASE", "AWS_SECRET_ACCESS_KEY": "base-secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			awsIsolated(t)
			var calls []url.Values
			sts := stsServer(t, secrets, &calls)
			t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
			if tc.name == "irsa" {
				tokenFile := writeFile(t, t.TempDir()+"/token", "projected-sa-token")
				t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tokenFile)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			s := newSigV4Server(t, secrets)
			queryFromFile(t, "backends:\n- name: amp\n  url: "+s.srv.URL+"\n  sigv4: "+tc.sigv4+"\n", "up")
			want := []sigV4Check{{KeyID: tc.wantKey, Scope: "eu-central-1/aps/aws4_request", Valid: true}}
			if d := cmp.Diff(want, s.got(), cmpIgnoreSigned); d != "" {
				t.Errorf("signatures (-want +got):\n%s", d)
			}
			if len(calls) == 0 || calls[0].Get("Action") != tc.wantAction || calls[0].Get("RoleArn") != "arn:aws:iam::111122223333:role/reader" {
				t.Errorf("STS calls %v, want %s of the role", calls, tc.wantAction)
			}
			if tc.name == "irsa" && calls[0].Get("WebIdentityToken") != "projected-sa-token" {
				t.Errorf("web identity token %q, want the projected token file's", calls[0].Get("WebIdentityToken"))
			}
		})
	}
}

// The sigv4 key's validation is the library's, reported at the backend.
func TestSigV4ConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, entry, want string }{
		{"key without secret", "sigv4: {region: r, access_key: AKID}", "Access key and Secret Key"},
		{"with basic auth", "sigv4: {region: r}\n  basic_auth: {username: u, password: p}", "backends[0].sigv4: sigv4 and authorization"},
		{"two clouds", "sigv4: {region: r}\n  google: {}", "choose one cloud authentication"},
		{"azure without a way", "azuread: {cloud: AzurePublic}", "exactly one of managed_identity"},
		{"azure bad cloud", "azuread: {cloud: Mars, sdk: {}}", `cloud "Mars"`},
		{"azure oauth without secret", "azuread: {oauth: {client_id: c, tenant_id: t}}", "one of client_secret and client_secret_file"},
		{"google bad file", "google: {credentials_file: /nonexistent/creds.json}", "backends[0].google: google: credentials_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBackends([]byte("backends:\n- name: amp\n  url: http://amp:9090\n  "+tc.entry+"\n"), "b.yaml", Backend{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "b.yaml") {
				t.Errorf("error %v, want one naming b.yaml and containing %q", err, tc.want)
			}
		})
	}
}
