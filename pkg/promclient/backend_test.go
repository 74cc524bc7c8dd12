package promclient

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/config"

	"github.com/promscaler/promscaler/internal/metrics"
)

// Two clients on one registry record their requests under their own
// backend label; a client built without a name is the default backend.
func TestClientMetricsCarryBackend(t *testing.T) {
	up := newFakeProm(t, nil)
	down := newFakeProm(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	})
	m := metrics.New()
	def := newTestClient(t, Config{Address: up.URL, Metrics: m})
	mimir := newTestClient(t, Config{Backend: "mimir", Address: down.URL, Metrics: m})
	if def.Backend() != DefaultBackendName || mimir.Backend() != "mimir" {
		t.Fatalf("Backend() = %q, %q", def.Backend(), mimir.Backend())
	}
	ctx := context.Background()
	if _, err := def.QuerySamples(ctx, "up", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mimir.QuerySamples(ctx, "up", time.Time{}); !IsUnavailable(err) {
		t.Fatalf("mimir: err = %v, want unavailable", err)
	}

	got := map[string]uint64{}
	for _, l := range [][]string{
		{"default", "query", "success"}, {"default", "query", "server_error"},
		{"mimir", "query", "success"}, {"mimir", "query", "server_error"},
	} {
		var d dto.Metric
		if err := m.PrometheusRequestDuration.WithLabelValues(l...).(prometheus.Metric).Write(&d); err != nil {
			t.Fatal(err)
		}
		if n := d.GetHistogram().GetSampleCount(); n > 0 {
			got[strings.Join(l, " ")] = n
		}
	}
	want := map[string]uint64{
		"default query success":    1,
		"mimir query server_error": 1,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("request metrics (-want +got):\n%s", d)
	}
}

func TestParseBackends(t *testing.T) {
	base := Backend{Name: DefaultBackendName, Verb: http.MethodGet, Timeout: 10 * time.Second, Compression: CompressionNone, CacheTTL: time.Second,
		Guard: GuardConfig{MaxConcurrent: 50, BreakerFailures: 3, BreakerOpen: 2 * time.Second}}
	httpDefaults := func(edit func(*config.HTTPClientConfig)) config.HTTPClientConfig {
		c := config.DefaultHTTPClientConfig
		c.ProxyFromEnvironment = true
		if edit != nil {
			edit(&c)
		}
		return c
	}
	tests := []struct {
		name string
		file string
		want []Backend
	}{{
		name: "thanos, a mimir tenant and victoriametrics",
		file: `backends:
- name: thanos
  url: https://thanos-query.monitoring.svc:9090
  timeout: 30s
  compression: gzip
  tls_config:
    ca_file: /etc/thanos/ca.crt
    server_name: thanos-query
- name: mimir-team-a
  url: http://mimir.mimir.svc:8080/prometheus
  headers:
    X-Scope-OrgID: team-a
  basic_auth: {username: adapter, password_file: /etc/mimir/password}
  verb: post
- name: vm
  url: http://vmselect.vm.svc:8481/select/0/prometheus
  authorization: {credentials_file: /var/run/secrets/token}
  proxy_url: http://proxy.example:3128
  follow_redirects: false
`,
		want: []Backend{{
			Name: "thanos", URL: "https://thanos-query.monitoring.svc:9090", Verb: "GET", Timeout: 30 * time.Second,
			Compression: CompressionGzip, CacheTTL: time.Second, Guard: base.Guard,
			HTTP: httpDefaults(func(c *config.HTTPClientConfig) {
				c.TLSConfig = config.TLSConfig{CAFile: "/etc/thanos/ca.crt", ServerName: "thanos-query"}
			}),
		}, {
			Name: "mimir-team-a", URL: "http://mimir.mimir.svc:8080/prometheus", Verb: "POST", Timeout: 10 * time.Second,
			Compression: CompressionNone, CacheTTL: time.Second, Guard: base.Guard,
			Headers: http.Header{"X-Scope-Orgid": {"team-a"}},
			HTTP: httpDefaults(func(c *config.HTTPClientConfig) {
				c.BasicAuth = &config.BasicAuth{Username: "adapter", PasswordFile: "/etc/mimir/password"}
			}),
		}, {
			Name: "vm", URL: "http://vmselect.vm.svc:8481/select/0/prometheus", Verb: "GET", Timeout: 10 * time.Second,
			Compression: CompressionNone, CacheTTL: time.Second, Guard: base.Guard,
			HTTP: httpDefaults(func(c *config.HTTPClientConfig) {
				c.Authorization = &config.Authorization{Type: "Bearer", CredentialsFile: "/var/run/secrets/token"}
				c.FollowRedirects = false
				c.ProxyFromEnvironment = false
				c.ProxyURL = config.URL{URL: &url.URL{Scheme: "http", Host: "proxy.example:3128"}}
			}),
		}},
	}, {
		name: "an empty list",
		file: "backends: []\n",
		want: []Backend{},
	}, {
		name: "guard limits: the flags' unless set, 0 for no bound",
		file: `backends:
- name: inherits
  url: http://a:9090
- name: own
  url: http://b:9090
  max_in_flight: 20
  max_waiting: 40
  breaker_failures: 0
  breaker_open: 5s
  max_answer_bytes: 1000000
- name: unbounded
  url: http://c:9090
  max_in_flight: 0
  max_waiting: 0
  max_answer_bytes: 0
`,
		want: []Backend{{
			Name: "inherits", URL: "http://a:9090", Verb: "GET", Timeout: 10 * time.Second, Compression: CompressionNone, CacheTTL: time.Second,
			HTTP: httpDefaults(nil), Guard: base.Guard,
		}, {
			Name: "own", URL: "http://b:9090", Verb: "GET", Timeout: 10 * time.Second, Compression: CompressionNone, CacheTTL: time.Second,
			HTTP: httpDefaults(nil), Guard: GuardConfig{MaxConcurrent: 20, MaxWaiting: 40, BreakerFailures: -1, BreakerOpen: 5 * time.Second, MaxAnswerBytes: 1000000},
		}, {
			Name: "unbounded", URL: "http://c:9090", Verb: "GET", Timeout: 10 * time.Second, Compression: CompressionNone, CacheTTL: time.Second,
			HTTP: httpDefaults(nil), Guard: GuardConfig{MaxConcurrent: -1, MaxWaiting: -1, BreakerFailures: 3, BreakerOpen: 2 * time.Second, MaxAnswerBytes: -1},
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseBackends([]byte(tt.file), "b.yaml", base)
			if err != nil {
				t.Fatal(err)
			}
			opts := cmp.Options{cmpopts.IgnoreUnexported(Backend{}, config.ProxyConfig{})}
			if d := cmp.Diff(tt.want, got, opts); d != "" {
				t.Errorf("backends (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseBackendsErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // each a line of the error
	}{{
		name: "YAML syntax",
		file: "backends:\n- name: a\n  url: [\n",
		want: []string{"b.yaml:3: did not find expected node content"},
	}, {
		name: "no backends key",
		file: "backend:\n- name: a\n",
		want: []string{"b.yaml: no backends: key (a list of backends, each with a name and a url)"},
	}, {
		name: "unknown keys, with the line of each",
		file: "backends:\n- name: a\n  url: http://a:9090\n  tls_confg: {}\n  tls_config: {ca_fle: x}\n",
		want: []string{
			"b.yaml:4: unknown key tls_confg",
			"b.yaml:5: unknown key ca_fle",
		},
	}, {
		name: "names: missing, reserved, not a DNS label, duplicate",
		file: `backends:
- url: http://a:9090
- name: default
  url: http://a:9090
- name: Team_A
  url: http://a:9090
- name: thanos
  url: http://a:9090
- name: thanos
  url: http://b:9090
`,
		want: []string{
			"b.yaml:2: backends[0].name: a backend needs a name (what rules name in their backend: key)",
			`b.yaml:3: backends[1].name: "default" names the backend of the --prometheus-* flags; choose another name`,
			`b.yaml:5: backends[2].name: backend name "Team_A": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
			`b.yaml:9: backends[4].name: backend "thanos" is already defined by backends[3] (line 7)`,
		},
	}, {
		name: "url, verb, compression, headers, http_headers, authorization",
		file: `backends:
- name: a
  url: thanos:9090
  verb: PUT
  compression: br
  headers: {"Bad Name": x}
  http_headers: {X-A: {values: [b]}}
  basic_auth: {username: u, password: p, password_file: /p}
`,
		want: []string{
			`b.yaml:3: backends[0].url: "thanos:9090" must be an http:// or https:// URL with a host`,
			`b.yaml:4: backends[0].verb: "PUT" must be GET or POST`,
			`b.yaml:5: backends[0].compression: "br" must be none or gzip`,
			`b.yaml:7: backends[0].http_headers: not supported here: set headers (name: value)`,
			`b.yaml:8: backends[0].basic_auth: at most one of basic_auth password, password_file & password_ref must be configured`,
			`b.yaml:6: backends[0].headers: header name "Bad Name" has invalid character ' '`,
		},
	}, {
		name: "durations that do not parse, at their lines",
		file: `backends:
- name: a
  url: http://a:9090
  breaker_open: soon
- name: b
  url: http://b:9090
  timeout: 10
`,
		want: []string{
			`b.yaml:4: backends[0].breaker_open: "soon" is not a duration (e.g. 500ms, 30s, 2m)`,
			`b.yaml:7: backends[1].timeout: "10" is not a duration (e.g. 500ms, 30s, 2m)`,
		},
	}, {
		name: "negative guard limits",
		file: `backends:
- name: a
  url: http://a:9090
  max_in_flight: -1
  max_waiting: -4
  breaker_failures: -2
  max_answer_bytes: -3
`,
		want: []string{
			"b.yaml:4: backends[0].max_in_flight: -1 must not be negative (0: no bound)",
			"b.yaml:5: backends[0].max_waiting: -4 must not be negative (0: no bound)",
			"b.yaml:6: backends[0].breaker_failures: -2 must not be negative (0: never marked down)",
			"b.yaml:7: backends[0].max_answer_bytes: -3 must not be negative (0: no bound)",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseBackends([]byte(tt.file), "b.yaml", Backend{})
			if err == nil {
				t.Fatal("no error")
			}
			if d := cmp.Diff(tt.want, strings.Split(err.Error(), "\n")); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}

// A backend of the file reaches its server with its own headers and
// credentials.
func TestBackendFromFileSendsItsHeaders(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/token", "s3cret\n")
	f := newFakeProm(t, nil)
	queryFromFile(t, `backends:
- name: mimir
  url: `+f.URL+`
  headers: {X-Scope-OrgID: team-a}
  authorization: {credentials_file: `+dir+`/token}
`, "up")
	h := f.requests()[0].Header
	got := []string{h.Get("X-Scope-OrgID"), h.Get("Authorization")}
	if d := cmp.Diff([]string{"team-a", "Bearer s3cret"}, got); d != "" {
		t.Errorf("headers (-want +got):\n%s", d)
	}
}

// queryFromFile parses a backends file (timeout a minute by default),
// builds the client of its first backend and sends it query.
func queryFromFile(t *testing.T, file, query string) {
	t.Helper()
	bs, err := ParseBackends([]byte(file), "b.yaml", Backend{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewForBackend(bs[0], metrics.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.QuerySamples(context.Background(), query, time.Time{}); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseBackends: any file is a list of backends that validate or an
// error naming the file; never a panic.
func FuzzParseBackends(f *testing.F) {
	for _, seed := range []string{
		"backends:\n- name: a\n  url: http://a:9090\n",
		"backends:\n- name: a\n  url: http://a:9090\n  headers: {X-Scope-OrgID: t}\n  tls_config: {insecure_skip_verify: true}\n",
		"backends: []\n", "backends: {}\n", "backends: x\n", "- a\n", "", "backends:\n- &a {name: b}\n- *a\n",
		"backends:\n- name: a\n  url: http://a:9090\n  timeout: 5s\n  max_in_flight: 0\n  breaker_failures: 2\n  breaker_open: 1m\n",
		"backends:\n- name: a\n  url: http://a:9090\n  breaker_open: [1s]\n  max_in_flight: -3\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, file string) {
		bs, err := ParseBackends([]byte(file), "b.yaml", Backend{Verb: http.MethodGet})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "b.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, b := range bs {
			if err := ValidBackendName(b.Name); err != nil {
				t.Fatalf("accepted backend %q: %v", b.Name, err)
			}
			if _, err := url.Parse(b.URL); err != nil {
				t.Fatalf("accepted url %q: %v", b.URL, err)
			}
			if g := b.Guard; g.MaxConcurrent < -1 || g.BreakerFailures < -1 || g.BreakerOpen < 0 {
				t.Fatalf("accepted guard %+v", g)
			}
		}
	})
}
