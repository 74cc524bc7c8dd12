package promclient

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/promscaler/promscaler/internal/metrics"
)

// optionsClient builds a client from NewOptions for url, changed by modify
// when it is not nil, after checking that they validate. A nil m is a
// private metrics set.
func optionsClient(t *testing.T, url string, m *metrics.Metrics, modify func(o *Options)) *Client {
	t.Helper()
	o := NewOptions()
	o.Default.URL = url
	if modify != nil {
		modify(o)
	}
	if errs := o.Validate(); len(errs) != 0 {
		t.Fatalf("Validate: %v", errs)
	}
	if m == nil {
		m = metrics.New()
	}
	c, err := o.NewClient(m)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// inCluster authenticates with a fake in-cluster service account token.
func inCluster(o *Options) {
	o.AuthInCluster = true
	o.Default.inClusterConfig = func() (*rest.Config, error) {
		return &rest.Config{Host: "https://10.0.0.1", BearerToken: "sa-token"}, nil
	}
}

func TestFlagsParseAndDefaults(t *testing.T) {
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	err := fs.Parse([]string{
		"--prometheus-url=http://thanos-query:9090/",
		"--prometheus-header=X-Scope-OrgID=tenant-a",
		"--prometheus-header=X-Extra=a,b=c",
		"--prometheus-verb=POST",
		"--prometheus-timeout=3s",
	})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if diff := cmp.Diff([]string{"X-Scope-OrgID=tenant-a", "X-Extra=a,b=c"}, o.Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if errs := o.Validate(); len(errs) != 0 {
		t.Errorf("Validate: %v", errs)
	}
	if d := NewOptions(); d.Default.URL != "https://localhost" || d.Default.Verb != "" || d.Default.Timeout != DefaultTimeout || d.Default.CacheTTL != 0 || d.Default.CoalesceWindow != DefaultCoalesceWindow || d.Default.Compression != "" {
		t.Errorf("defaults = %+v", d)
	}
}

// The verb and the compression have one default each, their zero value:
// the flags left alone send GET and ask for no compression.
func TestOptionsVerbAndCompressionDefaults(t *testing.T) {
	f := newFakeProm(t, nil)
	c := optionsClient(t, f.URL, nil, nil)
	if _, err := c.QuerySamples(context.Background(), "up", time.Time{}); err != nil {
		t.Fatalf("Query: %v", err)
	}
	r := f.requests()[0]
	if diff := cmp.Diff([]string{http.MethodGet, ""}, []string{r.Method, r.Header.Get("Accept-Encoding")}); diff != "" {
		t.Errorf("method and Accept-Encoding (-want +got):\n%s", diff)
	}
}

// The guard flags reach the default backend, 0 meaning no bound; the
// defaults are the Guard's.
func TestGuardFlags(t *testing.T) {
	tests := []struct {
		args []string
		want GuardConfig
	}{
		{want: GuardConfig{MaxConcurrent: DefaultMaxConcurrent, MaxWaiting: DefaultMaxWaiting, BreakerFailures: DefaultBreakerFailures, BreakerOpen: DefaultBreakerOpen, MaxAnswerBytes: DefaultMaxAnswerBytes}},
		{
			args: []string{"--prometheus-max-in-flight=0", "--prometheus-max-waiting=0", "--prometheus-breaker-failures=0", "--prometheus-breaker-open=10s", "--prometheus-max-answer-bytes=0"},
			want: GuardConfig{MaxConcurrent: -1, MaxWaiting: -1, BreakerFailures: -1, BreakerOpen: 10 * time.Second, MaxAnswerBytes: -1},
		},
		{
			args: []string{"--prometheus-max-in-flight=7", "--prometheus-max-waiting=30", "--prometheus-breaker-failures=2", "--prometheus-max-answer-bytes=1048576"},
			want: GuardConfig{MaxConcurrent: 7, MaxWaiting: 30, BreakerFailures: 2, BreakerOpen: DefaultBreakerOpen, MaxAnswerBytes: 1 << 20},
		},
	}
	for _, tt := range tests {
		o := NewOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if errs := o.Validate(); len(errs) != 0 {
			t.Fatalf("%v: Validate: %v", tt.args, errs)
		}
		b, err := o.Backend()
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tt.want, b.Guard); d != "" {
			t.Errorf("%v: guard (-want +got):\n%s", tt.args, d)
		}
	}
	// One default for both entries: the flags left unset and a program's
	// GuardConfig left zero make the same guard.
	b, err := NewOptions().Backend()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(GuardConfig{}.withDefaults(), b.Guard.withDefaults()); d != "" {
		t.Errorf("guard of the flags' defaults vs of a zero GuardConfig (-zero +flags):\n%s", d)
	}
}

func TestValidateReportsEveryBadFlag(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, filepath.Join(dir, "empty"), "  \n")
	notPEM := writeFile(t, filepath.Join(dir, "ca.pem"), "not a certificate")
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name   string
		modify func(o *Options)
		want   []string // one substring per expected error, in order
	}{
		{name: "defaults are valid", modify: func(o *Options) {}},
		{
			name: "everything wrong at once",
			modify: func(o *Options) {
				o.Default.URL = "ftp://prom"
				o.Default.Verb = "PUT"
				o.Default.Timeout = 0
				o.Default.CacheTTL = -time.Second
				o.Default.CoalesceWindow = 2 * time.Second
				o.Default.Compression = "zstd"
				o.AuthInCluster = true
				o.AuthConfig = missing
				o.CAFile = notPEM
				o.ClientCertFile = missing
				o.TokenFile = empty
				o.BasicAuthUsername = "a:b"
				o.Headers = []string{"X-Ok=1", "novalue", "Bad Name=1", "X-Crlf=a\r\nInjected: 1"}
				o.MaxInFlight = -1
				o.MaxWaiting = -2
				o.BreakerFailures = -1
				o.BreakerOpen = 0
				o.MaxAnswerBytes = -5
			},
			want: []string{
				"--prometheus-url", "--prometheus-verb", "--prometheus-timeout", "--prometheus-cache-ttl",
				"--prometheus-coalesce-window", "--prometheus-compression",
				"--prometheus-max-in-flight -1", "--prometheus-max-waiting -2", "--prometheus-breaker-failures -1", "--prometheus-breaker-open 0s",
				"--prometheus-max-answer-bytes -5",
				"--prometheus-auth-incluster and --prometheus-auth-config", "--prometheus-auth-config:",
				"--prometheus-ca-file", "--prometheus-client-tls-cert-file needs", "--prometheus-token-file",
				"--prometheus-basic-auth-username needs", "--prometheus-basic-auth-username: must not contain",
				"--prometheus-header[1]", "--prometheus-header[2]", "--prometheus-header[3]",
			},
		},
		{
			name:   "negative coalesce window",
			modify: func(o *Options) { o.Default.CoalesceWindow = -time.Millisecond },
			want:   []string{"--prometheus-coalesce-window -1ms: must be between 0 and 1s"},
		},
		{
			name:   "URL without host",
			modify: func(o *Options) { o.Default.URL = "http:///api" },
			want:   []string{"--prometheus-url"},
		},
		{
			name: "key without cert, password without user",
			modify: func(o *Options) {
				o.ClientKeyFile = missing
				o.BasicAuthPasswordFile = missing
			},
			want: []string{"--prometheus-client-tls-key-file needs", "--prometheus-basic-auth-password-file needs"},
		},
		{
			name: "token and basic auth together",
			modify: func(o *Options) {
				tok := writeFile(t, filepath.Join(dir, "tok"), "t")
				o.TokenFile = tok
				o.BasicAuthUsername = "u"
				o.BasicAuthPasswordFile = tok
			},
			want: []string{"choose one authorization"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.modify(o)
			errs := o.Validate()
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("error %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}

func TestAuthHeaders(t *testing.T) {
	dir := t.TempDir()
	tok := writeFile(t, filepath.Join(dir, "token"), "tok-1\n")
	pw := writeFile(t, filepath.Join(dir, "password"), "pw-1")

	tests := []struct {
		name   string
		modify func(o *Options)
		want   map[string]string
	}{
		{
			name:   "bearer token and tenant header",
			modify: func(o *Options) { o.TokenFile = tok; o.Headers = []string{"X-Scope-OrgID=tenant-a"} },
			want:   map[string]string{"Authorization": "Bearer tok-1", "X-Scope-Orgid": "tenant-a"},
		},
		{
			name:   "basic auth from a file",
			modify: func(o *Options) { o.BasicAuthUsername = "admin"; o.BasicAuthPasswordFile = pw },
			want:   map[string]string{"Authorization": "Basic YWRtaW46cHctMQ=="},
		},
		{
			name:   "explicit Authorization header wins over the token file",
			modify: func(o *Options) { o.TokenFile = tok; o.Headers = []string{"authorization=Bearer explicit"} },
			want:   map[string]string{"Authorization": "Bearer explicit"},
		},
		{
			name:   "in-cluster service account token",
			modify: inCluster,
			want:   map[string]string{"Authorization": "Bearer sa-token"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProm(t, nil)
			c := optionsClient(t, f.URL, nil, tc.modify)
			if _, err := c.QuerySamples(context.Background(), "up", time.Time{}); err != nil {
				t.Fatalf("Query: %v", err)
			}
			h := f.requests()[0].Header
			for k, v := range tc.want {
				if got := h.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestTokenRotation(t *testing.T) {
	dir := t.TempDir()
	tok := writeFile(t, filepath.Join(dir, "token"), "old")
	reject := ""
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == reject {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte(vectorBody))
	})
	c := optionsClient(t, f.URL, nil, func(o *Options) { o.TokenFile = tok })
	ctx := context.Background()
	lastAuth := func() string {
		reqs := f.requests()
		return reqs[len(reqs)-1].Header.Get("Authorization")
	}

	if _, err := c.QuerySamples(ctx, "up", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := lastAuth(); got != "Bearer old" {
		t.Fatalf("first request sent %q", got)
	}
	// The file is read for every request: a rotated token is used at once.
	writeFile(t, tok, "new")
	if _, err := c.QuerySamples(ctx, "up", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := lastAuth(); got != "Bearer new" {
		t.Errorf("after rotation sent %q, want the rotated token", got)
	}
	// A missing file fails the request, naming the credentials.
	if err := os.Remove(tok); err != nil {
		t.Fatal(err)
	}
	n := len(f.requests())
	if _, err := c.QuerySamples(ctx, "up", time.Time{}); err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("with the token file missing: err %v, want one about the credentials", err)
	}
	if len(f.requests()) != n {
		t.Error("a request was sent without credentials")
	}
}

// TestNewClientPassesArrivalTime checks that the arrival function reaches
// the client: a call whose request arrived before the last answer landed
// takes it instead of querying again.
func TestNewClientPassesArrivalTime(t *testing.T) {
	f := newFakeProm(t, nil)
	o := NewOptions()
	o.Default.URL = f.URL
	b, err := o.Backend()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewForBackend(b, metrics.New(), func(context.Context) (time.Time, bool) { return time.Unix(1000, 0), true })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	for range 2 {
		if _, err := c.QuerySamples(context.Background(), "up", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(f.requests()); got != 1 {
		t.Errorf("served %d requests, want 1", got)
	}
}

// TestProxyURL checks that --prometheus-proxy-url sends the requests through
// the proxy: the proxy sees them in absolute form, for Prometheus' host.
func TestProxyURL(t *testing.T) {
	var mu sync.Mutex
	var proxied []string
	// The fake Prometheus stands as the proxy, answering for Prometheus.
	proxy := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		proxied = append(proxied, r.URL.Host+r.URL.Path)
		mu.Unlock()
		answerVector(w, r)
	})
	c := optionsClient(t, "http://prometheus.monitoring.svc:9090", nil, func(o *Options) { o.ProxyURL = proxy.URL })
	if _, err := c.QuerySamples(context.Background(), "up", time.Time{}); err != nil {
		t.Fatalf("Query: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"prometheus.monitoring.svc:9090/api/v1/query"}, proxied); diff != "" {
		t.Errorf("proxied requests (-want +got):\n%s", diff)
	}
	o := NewOptions()
	o.ProxyURL = "proxy:3128"
	if errs := o.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "--prometheus-proxy-url") {
		t.Errorf("Validate with a bad proxy URL = %v, want one error naming the flag", errs)
	}
}

// TestTimeoutDefault: the timeout is defaulted in one place, NewOptions. A
// timeout the flags leave unset is DefaultTimeout; a backends file's entry
// without one (or with 0) takes the flag's value; a zero flag is refused
// by Validate, naming the flag.
func TestTimeoutDefault(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		entry   string // the keys a backends file's entry adds; "-": no file
		want    map[string]time.Duration
		wantErr string
	}{
		{name: "flags unset", entry: "-", want: map[string]time.Duration{"default": DefaultTimeout}},
		{name: "flag set", args: []string{"--prometheus-timeout=3s"}, entry: "-", want: map[string]time.Duration{"default": 3 * time.Second}},
		{name: "flag zero", args: []string{"--prometheus-timeout=0"}, entry: "-", wantErr: "--prometheus-timeout 0s: must be positive"},
		{name: "entry unset", want: map[string]time.Duration{"default": DefaultTimeout, "thanos": DefaultTimeout}},
		{name: "entry unset, flag set", args: []string{"--prometheus-timeout=3s"}, want: map[string]time.Duration{"default": 3 * time.Second, "thanos": 3 * time.Second}},
		{name: "entry zero", entry: "timeout: 0s", want: map[string]time.Duration{"default": DefaultTimeout, "thanos": DefaultTimeout}},
		{name: "entry set", entry: "timeout: 30s", want: map[string]time.Duration{"default": DefaultTimeout, "thanos": 30 * time.Second}},
		{name: "entry negative", entry: "timeout: -1s", wantErr: "backends[0].timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			args := append([]string{"--prometheus-url=http://prometheus:9090"}, tc.args...)
			if tc.entry != "-" {
				file := filepath.Join(t.TempDir(), "backends.yaml")
				writeFile(t, file, "backends:\n- name: thanos\n  url: http://thanos:10902\n  "+tc.entry+"\n")
				args = append(args, "--backends-config="+file)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if errs := o.Validate(); len(errs) != 0 || tc.wantErr != "" {
				if tc.wantErr == "" || len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr) {
					t.Fatalf("Validate: %v, want one error saying %q", errs, tc.wantErr)
				}
				return
			}
			bs, err := o.Backends()
			if err != nil {
				t.Fatal(err)
			}
			set := newBackendSet(t, bs)
			got := map[string]time.Duration{"default": set.Default().Timeout()}
			for _, n := range set.Names() {
				c, _ := set.Lookup(n)
				got[n] = c.Timeout()
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("timeouts (-want +got):\n%s", d)
			}
		})
	}
}

// TestTimeoutRequired: a program building a client or a backend set
// without the flags gets no default behind its back: a zero timeout is
// refused, naming the backend and the flags' default.
func TestTimeoutRequired(t *testing.T) {
	hc := &http.Client{}
	tests := []struct {
		name  string
		build func() error
		want  string
	}{
		{
			name:  "Config",
			build: func() error { _, err := New(Config{Address: "http://prometheus:9090", HTTPClient: hc}); return err },
			want:  `backend "default": timeout 0s must be positive (the --prometheus-timeout default is 10s)`,
		},
		{
			name: "Backend",
			build: func() error {
				_, err := NewBackends([]Backend{{URL: "http://prometheus:9090", Timeout: time.Second}, {Name: "thanos", URL: "http://thanos:10902"}}, metrics.New(), nil)
				return err
			},
			want: `backend "thanos": timeout 0s must be positive (the --prometheus-timeout default is 10s)`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.build(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("without a timeout: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
