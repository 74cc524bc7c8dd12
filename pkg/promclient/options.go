package promclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/common/config"
	"github.com/spf13/pflag"

	"github.com/promscaler/promscaler/internal/metrics"
)

// Options are the command-line options of the Prometheus client. Flag names
// and meanings are prometheus-adapter's, so a deployment keeps its args;
// basic auth, the proxy, the timeout and the cache are promscaler
// additions. Backend turns them into the plain values the client is built
// from.
type Options struct {
	// Default is the default backend as the flags set it: the flags of
	// its plain values (--prometheus-url, -verb, -timeout, -cache-ttl,
	// -coalesce-window, -compression, -max-sample-age) write into it, and
	// Backend completes it from the other options. A flag's value reaches
	// the client through this Backend and the client's Config only.
	Default Backend
	// AuthInCluster authenticates with the pod's service account (token and
	// cluster CA), as for the Kubernetes API.
	AuthInCluster bool
	// AuthConfig is a kubeconfig file whose current context's credentials
	// (and CA) are used; its server address is ignored.
	AuthConfig string
	// CAFile verifies Prometheus' serving certificate.
	CAFile string
	// ClientCertFile and ClientKeyFile are a TLS client certificate, re-read
	// when they change (without --prometheus-auth-*; with those, client-go
	// loads them).
	ClientCertFile string
	ClientKeyFile  string
	// TokenFile holds a bearer token, re-read when it changes.
	TokenFile string
	// Headers are "name=value" headers set on every request; repeatable.
	Headers []string
	// BasicAuthUsername and BasicAuthPasswordFile configure basic auth; the
	// password file is re-read when it changes.
	BasicAuthUsername     string
	BasicAuthPasswordFile string
	// ProxyURL is the HTTP proxy to Prometheus; empty means the
	// environment's (HTTP_PROXY, HTTPS_PROXY, NO_PROXY).
	ProxyURL string
	// BackendsFile is a BackendsFile defining more backends, which rules
	// name with their backend: key; empty means none.
	BackendsFile string
	// MaxInFlight, BreakerFailures and BreakerOpen are the default
	// backend's Guard (0 in the first two: no bound, never marked down);
	// the backends file's entries take them unless they set their own.
	//
	// The guard's flags and the backends file's keys read 0 as "no bound"
	// (never marked down, for the breaker): an operator switches a bound
	// off with 0, as documented in docs/adapter.md; GuardConfig reads 0 as its default and a negative value as "no
	// bound", so that a Backend or Guard built in code without these
	// settings (tests, the downstream servers' guards) is bounded, not
	// unbounded. The two readings meet in three places only: guardLimits
	// (these flags, in Backend), BackendEntry.guard (the file) and
	// GuardConfig.WithTeamLimits (the team flags of cmd/adapter/app,
	// --team-rules-max-in-flight and --team-rules-max-waiting), all
	// through noneIfZero. The defaults shown by the flags are GuardConfig's
	// (NewOptions), DefaultMaxConcurrentPerTeam's included; the team
	// waiting bound's default is a quarter of each backend's waiting bound,
	// which differs per backend and so has no one value to show: that flag
	// not given keeps GuardConfig's 0.
	MaxInFlight     int
	BreakerFailures int
	BreakerOpen     time.Duration
	// MaxWaiting is the default backend's GuardConfig.MaxWaiting (0: no
	// bound); the backends file's entries take it unless they set
	// max_waiting.
	MaxWaiting int
	// Cloud is the default backend's cloud authentication (CloudAuth):
	// the --prometheus-auth-sigv4, --prometheus-auth-azure and
	// --prometheus-auth-google flags and theirs.
	Cloud CloudFlags
	// MaxAnswerBytes is the default backend's GuardConfig.MaxAnswerBytes
	// (0: no bound); the backends file's entries take it unless they set
	// max_answer_bytes.
	MaxAnswerBytes int64
}

// NewOptions returns the options with prometheus-adapter's defaults, each
// set in one place. The guard's are GuardConfig's (withDefaults, their one
// place), shown as the flags' defaults; the timeout's one place is here (New
// takes no zero: a zero timeout could be read as "none"). The verb and the
// compression are left empty: their one place is their zero value, which
// means GET (New, verb.go) and no Accept-Encoding (CompressionNone,
// compression.go) to every caller, the flags' and the backends file's
// included; their flags' help says so.
func NewOptions() *Options {
	guard := GuardConfig{}.withDefaults()
	return &Options{
		Default: Backend{
			URL:            "https://localhost",
			Timeout:        DefaultTimeout,
			CoalesceWindow: DefaultCoalesceWindow,
		},
		MaxInFlight:     guard.MaxConcurrent,
		MaxWaiting:      guard.MaxWaiting,
		BreakerFailures: guard.BreakerFailures,
		BreakerOpen:     guard.BreakerOpen,
		MaxAnswerBytes:  guard.MaxAnswerBytes,
	}
}

// AddFlags registers the options' flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Default.URL, "prometheus-url", o.Default.URL, "URL of the Prometheus HTTP API (or Thanos, Mimir, VictoriaMetrics), without /api/v1.")
	fs.BoolVar(&o.AuthInCluster, "prometheus-auth-incluster", o.AuthInCluster, "Authenticate to Prometheus with the pod's service account token and the cluster CA.")
	fs.StringVar(&o.AuthConfig, "prometheus-auth-config", o.AuthConfig, "kubeconfig file whose credentials are used to connect to Prometheus (its server address is ignored).")
	fs.StringVar(&o.CAFile, "prometheus-ca-file", o.CAFile, "CA bundle verifying Prometheus' serving certificate.")
	fs.StringVar(&o.ClientCertFile, "prometheus-client-tls-cert-file", o.ClientCertFile, "TLS client certificate presented to Prometheus (with --prometheus-client-tls-key-file); re-read when it changes.")
	fs.StringVar(&o.ClientKeyFile, "prometheus-client-tls-key-file", o.ClientKeyFile, "Key of the TLS client certificate presented to Prometheus.")
	fs.StringVar(&o.TokenFile, "prometheus-token-file", o.TokenFile, "File holding a bearer token for Prometheus; re-read when it changes (rotated secrets).")
	fs.StringArrayVar(&o.Headers, "prometheus-header", o.Headers, "Header name=value set on every request to Prometheus, e.g. X-Scope-OrgID=tenant. Repeatable.")
	fs.StringVar(&o.BasicAuthUsername, "prometheus-basic-auth-username", o.BasicAuthUsername, "Basic auth user name for Prometheus (with --prometheus-basic-auth-password-file).")
	fs.StringVar(&o.BasicAuthPasswordFile, "prometheus-basic-auth-password-file", o.BasicAuthPasswordFile, "File holding the basic auth password for Prometheus; re-read when it changes.")
	fs.StringVar(&o.ProxyURL, "prometheus-proxy-url", o.ProxyURL, "HTTP proxy to reach Prometheus through; empty uses the environment's HTTP_PROXY, HTTPS_PROXY and NO_PROXY.")
	fs.StringVar(&o.Default.Verb, "prometheus-verb", o.Default.Verb, `HTTP verb of requests to Prometheus: "GET" (default) or "POST". With GET, requests whose URL would exceed 4 KiB are sent as POST.`)
	fs.DurationVar(&o.Default.Timeout, "prometheus-timeout", o.Default.Timeout, "Timeout of each request to Prometheus, sent as its timeout= parameter and enforced by the adapter.")
	fs.DurationVar(&o.Default.CacheTTL, "prometheus-cache-ttl", o.Default.CacheTTL, "Answer identical Prometheus requests from a result cache for this long; 0 disables the cache.")
	fs.DurationVar(&o.Default.CoalesceWindow, "prometheus-coalesce-window", o.Default.CoalesceWindow, "In a burst of identical requests, also share a query's answer with requests that arrived up to this long after it was sent, even after it landed, once that answer has answered more than the request that sent the query; a client asking one request at a time never gets an answer that landed before its request arrived. 0 shares an answer only with requests that arrived before it landed. At most 1s.")
	fs.StringVar(&o.BackendsFile, "backends-config", o.BackendsFile, "File defining more Prometheus-compatible backends (Thanos, Mimir/Cortex tenants, VictoriaMetrics, other Prometheus servers), each with its own URL, TLS, authorization, headers and timeout; a rule names one with its backend: key. The --prometheus-* flags define the backend named default.")
	fs.IntVar(&o.MaxInFlight, "prometheus-max-in-flight", o.MaxInFlight, "Requests in flight to Prometheus at most; one more is answered 503 at once, so that a stalled Prometheus cannot hold every request slot of the adapter. 0: no bound. A --backends-config entry takes it unless it sets max_in_flight.")
	fs.IntVar(&o.MaxWaiting, "prometheus-max-waiting", o.MaxWaiting, "Requests waiting on one Prometheus backend's answers at most, every request counted (those sharing one query too): one more waits 1s, then, unless the backend has answered the query it waits on or a later one, it and the next ones are answered 503 at once, so that a stalled backend holds at most this many request slots of the adapter and of kube-apiserver (where each priority level has few) and the other backends' metrics and discovery keep the rest. 0: no bound. A --backends-config entry takes it unless it sets max_waiting.")
	fs.IntVar(&o.BreakerFailures, "prometheus-breaker-failures", o.BreakerFailures, "Consecutive timeouts or connection errors after which Prometheus is marked down: its requests are answered 503 at once until a probe request gets an answer. 0: never marked down. A --backends-config entry takes it unless it sets breaker_failures.")
	fs.DurationVar(&o.BreakerOpen, "prometheus-breaker-open", o.BreakerOpen, "How long Prometheus, once marked down, is not asked before one probe request, and again after each failed probe (never longer: Prometheus is asked again within this time of its return). A --backends-config entry takes it unless it sets breaker_open.")
	fs.DurationVar(&o.Default.MaxSampleAge, "prometheus-max-sample-age", o.Default.MaxSampleAge, "A sample older than this is no value (the HPA holds, or the rule's defaultValue or fallback applies), however long the backend looks back: sent as lookback_delta (Prometheus 2.43 and later) and checked on the answer's timestamps. 0 (default): off, as prometheus-adapter. A rule's maxSampleAge and a --backends-config entry's max_sample_age override it.")
	o.Cloud.addFlags(fs)
	fs.Int64Var(&o.MaxAnswerBytes, "prometheus-max-answer-bytes", o.MaxAnswerBytes, "Bytes of one Prometheus answer at most (after decompression); a longer one is refused after that many bytes and its request answered 503 naming this limit, and the answers being read from one backend at once are bounded to 4 times it, so that the adapter's memory stays bounded whatever Prometheus sends (docs/reliability.md). 0: no bound. A --backends-config entry takes it unless it sets max_answer_bytes.")
	fs.StringVar(&o.Default.Compression, "prometheus-compression", o.Default.Compression, `Encoding asked of Prometheus' answers: "none" (default; cheapest in CPU for Prometheus and the adapter on a fast in-cluster link) or "gzip" (10-20x fewer bytes, for remote or metered links).`)
}

// Validate checks every option and returns all the problems found, each
// naming its flag.
func (o *Options) Validate() []error {
	errs := o.validateRequests()
	errs = append(errs, o.validateAuth()...)
	errs = append(errs, o.Cloud.validate(o)...)
	if o.BackendsFile != "" {
		if _, err := LoadBackends(o.BackendsFile, Backend{}); err != nil {
			errs = append(errs, fmt.Errorf("--backends-config: %w", err))
		}
	}
	return errs
}

// validateRequests checks the options of the requests: where they go,
// how, and their bounds.
func (o *Options) validateRequests() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if u, err := url.Parse(o.Default.URL); err != nil {
		add("--prometheus-url: %v", redactURLError(err))
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		add("--prometheus-url %q: must be an http:// or https:// URL with a host", u.Redacted())
	}
	if v := strings.ToUpper(o.Default.Verb); v != "" && v != http.MethodGet && v != http.MethodPost {
		add("--prometheus-verb %q: must be GET or POST", o.Default.Verb)
	}
	if o.Default.Timeout <= 0 {
		add("--prometheus-timeout %v: must be positive", o.Default.Timeout)
	}
	if o.Default.CacheTTL < 0 {
		add("--prometheus-cache-ttl %v: must not be negative", o.Default.CacheTTL)
	}
	if o.Default.CoalesceWindow < 0 || o.Default.CoalesceWindow > MaxCoalesceWindow {
		add("--prometheus-coalesce-window %v: must be between 0 and %v", o.Default.CoalesceWindow, MaxCoalesceWindow)
	}
	if c := o.Default.Compression; c != "" && c != CompressionNone && c != CompressionGzip {
		add("--prometheus-compression %q: must be %s or %s", o.Default.Compression, CompressionNone, CompressionGzip)
	}
	if o.MaxInFlight < 0 {
		add("--prometheus-max-in-flight %d: must not be negative (0: no bound)", o.MaxInFlight)
	}
	if o.MaxWaiting < 0 {
		add("--prometheus-max-waiting %d: must not be negative (0: no bound)", o.MaxWaiting)
	}
	if o.BreakerFailures < 0 {
		add("--prometheus-breaker-failures %d: must not be negative (0: never marked down)", o.BreakerFailures)
	}
	if o.Default.MaxSampleAge < 0 {
		add("--prometheus-max-sample-age %v: must not be negative (0: off)", o.Default.MaxSampleAge)
	}
	if o.BreakerOpen <= 0 {
		add("--prometheus-breaker-open %v: must be positive", o.BreakerOpen)
	}
	if o.MaxAnswerBytes < 0 {
		add("--prometheus-max-answer-bytes %d: must not be negative (0: no bound)", o.MaxAnswerBytes)
	}
	if o.ProxyURL != "" {
		if u, err := url.Parse(o.ProxyURL); err != nil {
			add("--prometheus-proxy-url: %v", redactURLError(err))
		} else if u.Scheme == "" || u.Host == "" {
			add("--prometheus-proxy-url %q: must be a URL with a scheme and a host", u.Redacted())
		}
	}
	return errs
}

// validateAuth checks the credentials, TLS and header options: one
// source of each, readable files.
func (o *Options) validateAuth() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.AuthInCluster && o.AuthConfig != "" {
		add("--prometheus-auth-incluster and --prometheus-auth-config: choose one source of credentials")
	}
	if o.AuthConfig != "" {
		if _, err := os.Stat(o.AuthConfig); err != nil {
			add("--prometheus-auth-config: %v", err)
		}
	}
	if o.CAFile != "" {
		if err := checkCAFile(o.CAFile); err != nil {
			add("--prometheus-ca-file: %v", err)
		}
	}
	switch {
	case o.ClientCertFile != "" && o.ClientKeyFile == "":
		add("--prometheus-client-tls-cert-file needs --prometheus-client-tls-key-file")
	case o.ClientCertFile == "" && o.ClientKeyFile != "":
		add("--prometheus-client-tls-key-file needs --prometheus-client-tls-cert-file")
	case o.ClientCertFile != "":
		if _, err := tls.LoadX509KeyPair(o.ClientCertFile, o.ClientKeyFile); err != nil {
			add("--prometheus-client-tls-cert-file/--prometheus-client-tls-key-file: %v", err)
		}
	}
	if o.TokenFile != "" {
		if err := checkSecretFile(o.TokenFile); err != nil {
			add("--prometheus-token-file: %v", err)
		}
	}
	switch {
	case o.BasicAuthUsername != "" && o.BasicAuthPasswordFile == "":
		add("--prometheus-basic-auth-username needs --prometheus-basic-auth-password-file")
	case o.BasicAuthUsername == "" && o.BasicAuthPasswordFile != "":
		add("--prometheus-basic-auth-password-file needs --prometheus-basic-auth-username")
	case o.BasicAuthPasswordFile != "":
		if err := checkSecretFile(o.BasicAuthPasswordFile); err != nil {
			add("--prometheus-basic-auth-password-file: %v", err)
		}
		if o.TokenFile != "" {
			add("--prometheus-token-file and --prometheus-basic-auth-*: choose one authorization")
		}
	}
	if strings.Contains(o.BasicAuthUsername, ":") {
		add("--prometheus-basic-auth-username: must not contain ':'")
	}
	for i, h := range o.Headers {
		if _, _, err := parseHeader(h); err != nil {
			add("--prometheus-header[%d]: %v", i, err)
		}
	}
	return errs
}

// Backend returns the backend the validated options describe.
func (o *Options) Backend() (Backend, error) {
	b := o.Default
	b.Name = DefaultBackendName
	b.HTTP = config.DefaultHTTPClientConfig
	b.Verb = strings.ToUpper(b.Verb)
	b.Guard = guardLimits(o.MaxInFlight, o.MaxWaiting, o.BreakerFailures, o.BreakerOpen, o.MaxAnswerBytes)
	b.HTTP.ProxyFromEnvironment = true
	if o.ProxyURL != "" {
		u, err := url.Parse(o.ProxyURL)
		if err != nil {
			return Backend{}, fmt.Errorf("--prometheus-proxy-url: %w", redactURLError(err))
		}
		b.HTTP.ProxyFromEnvironment = false
		b.HTTP.ProxyURL = config.URL{URL: u}
	}
	b.HTTP.TLSConfig = config.TLSConfig{CAFile: o.CAFile, CertFile: o.ClientCertFile, KeyFile: o.ClientKeyFile, MinVersion: config.TLSVersion(tls.VersionTLS12)}
	if o.TokenFile != "" {
		b.HTTP.Authorization = &config.Authorization{Type: "Bearer", CredentialsFile: o.TokenFile}
	}
	if o.BasicAuthPasswordFile != "" {
		b.HTTP.BasicAuth = &config.BasicAuth{Username: o.BasicAuthUsername, PasswordFile: o.BasicAuthPasswordFile}
	}
	if len(o.Headers) > 0 {
		b.Headers = make(http.Header, len(o.Headers))
		for i, raw := range o.Headers {
			k, v, err := parseHeader(raw)
			if err != nil {
				return Backend{}, fmt.Errorf("--prometheus-header[%d]: %w", i, err)
			}
			b.Headers.Add(k, v)
		}
	}
	switch {
	case o.AuthConfig != "":
		b.Kubeconfig = o.AuthConfig
	case o.AuthInCluster:
		b.InCluster = true
	}
	b.Auth = o.Cloud.auth()
	return b, nil
}

// Backends returns the default backend (Backend) followed by those of
// --backends-config, in the file's order.
func (o *Options) Backends() ([]Backend, error) {
	def, err := o.Backend()
	if err != nil {
		return nil, err
	}
	out := []Backend{def}
	if o.BackendsFile == "" {
		return out, nil
	}
	more, err := LoadBackends(o.BackendsFile, def)
	if err != nil {
		return nil, fmt.Errorf("--backends-config: %w", err)
	}
	return append(out, more...), nil
}

// NewClient builds the Prometheus client from validated options, for
// programs with one backend (the explain tool). m receives the request
// metrics.
func (o *Options) NewClient(m *metrics.Metrics) (*Client, error) {
	b, err := o.Backend()
	if err != nil {
		return nil, err
	}
	return NewForBackend(b, m, nil)
}

func checkCAFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return fmt.Errorf("no PEM certificate found in %s", path)
	}
	return nil
}

func checkSecretFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(data)) == "" {
		return fmt.Errorf("%s is empty", path)
	}
	return nil
}

// parseHeader splits "name=value". The name must be a valid HTTP field name
// and the value must not contain line breaks.
func parseHeader(raw string) (string, string, error) {
	name, value, ok := strings.Cut(raw, "=")
	if !ok {
		return "", "", errors.New("want name=value")
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return "", "", errors.New("empty header name")
	}
	for _, r := range name {
		if !isTokenChar(r) {
			return "", "", fmt.Errorf("header name %q has invalid character %q", name, r)
		}
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return "", "", fmt.Errorf("value of header %q contains a line break or NUL", name)
	}
	return http.CanonicalHeaderKey(name), value, nil
}

// isTokenChar reports whether r may appear in an HTTP field name (RFC 9110 token).
func isTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}
