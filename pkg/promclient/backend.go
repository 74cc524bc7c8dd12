package promclient

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/common/config"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/promscaler/promscaler/internal/metrics"
)

// DefaultBackendName is the name of the backend the --prometheus-* flags
// define: the one rules use when they name none.
const DefaultBackendName = metrics.DefaultBackend

// Backend is one Prometheus-compatible server and how to reach it, in plain
// values: the --prometheus-* flags fill one (Options.Backend); a program
// serving several backends fills one per backend.
type Backend struct {
	// Name names the backend in rules (their backend: key), logs and the
	// "backend" label of its request metrics; it is also the key of
	// anything kept per backend. "" means DefaultBackendName.
	Name string
	// URL is the base URL of the Prometheus HTTP API (without /api/v1).
	URL string
	// HTTP is the transport's configuration, served by
	// prometheus/common/config: TLS (CA, client certificate and key, files
	// re-read when they change), authorization (a bearer token file, read on
	// every request), basic auth (a password file, likewise), proxy,
	// redirects, HTTP/2. Its HTTPHeaders are not used: see Headers.
	HTTP config.HTTPClientConfig
	// Headers are set on every request. Unlike HTTP.HTTPHeaders they may
	// include reserved names (an Authorization header, which then wins over
	// HTTP's authorization), as prometheus-adapter's --prometheus-header.
	Headers http.Header
	// Kubeconfig, when set, takes TLS and credentials from this kubeconfig
	// file's current context (its server address is ignored), through
	// client-go; InCluster takes them from the pod's service account. HTTP's
	// CA and client certificate files, when set, replace the kubeconfig's;
	// its authorization and basic auth apply on top.
	Kubeconfig string
	InCluster  bool
	// Verb is GET (default) or POST.
	Verb string
	// Timeout bounds each call and is sent as timeout=; it must be
	// positive (NewOptions' default is DefaultTimeout).
	Timeout time.Duration
	// CacheTTL, CoalesceWindow: see Config.
	CacheTTL       time.Duration
	CoalesceWindow time.Duration
	// Compression is CompressionNone (default) or CompressionGzip.
	Compression string
	// Guard bounds the requests to the backend: concurrency and the
	// breaker (zero values: the defaults).
	Guard GuardConfig
	// MaxSampleAge, when positive, makes a sample older than it no value
	// (Config.MaxSampleAge); a rule's maxSampleAge overrides it.
	MaxSampleAge time.Duration
	// Auth is a managed Prometheus' cloud authentication (SigV4, Entra ID,
	// Google), at most one, instead of HTTP's authorization.
	Auth CloudAuth

	// inClusterConfig returns the in-cluster config; tests replace it.
	inClusterConfig func() (*rest.Config, error)
}

// NewForBackend builds the client of a backend. m receives the request
// metrics; arrival is Config.ArrivalTime (nil: coalesce with flights only).
func NewForBackend(b Backend, m *metrics.Metrics, arrival ArrivalFunc) (*Client, error) {
	hc, err := b.HTTPClient()
	if err != nil {
		return nil, err
	}
	guard, err := NewGuard(b.Name, b.Guard, m, nil)
	if err != nil {
		return nil, err
	}
	m.PrometheusMaxSampleAge.WithLabelValues(nameOr(b.Name)).Set(b.MaxSampleAge.Seconds())
	return New(Config{
		MaxSampleAge:   b.MaxSampleAge,
		Backend:        b.Name,
		Guard:          guard,
		Address:        b.URL,
		HTTPClient:     hc,
		Verb:           b.Verb,
		Timeout:        b.Timeout,
		CacheTTL:       b.CacheTTL,
		Metrics:        m,
		ArrivalTime:    arrival,
		CoalesceWindow: b.CoalesceWindow,
	})
}

// HTTPClient builds the *http.Client that carries the backend's TLS,
// credentials and headers. It never shares or modifies http.DefaultClient
// or http.DefaultTransport.
func (b Backend) HTTPClient() (*http.Client, error) {
	if err := b.HTTP.Validate(); err != nil {
		return nil, fmt.Errorf("backend %s: %w", b.Name, err)
	}
	if err := b.Auth.Validate(); err != nil {
		return nil, fmt.Errorf("backend %s: %w", b.Name, err)
	}
	if err := b.Auth.conflictsWithHTTPAuth(b); err != nil {
		return nil, fmt.Errorf("backend %s: %w", b.Name, err)
	}
	var rt http.RoundTripper
	var err error
	if b.Kubeconfig != "" || b.InCluster {
		rt, err = b.kubeTransport()
	} else {
		rt, err = config.NewRoundTripperFromConfig(b.HTTP, b.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("backend %s: building the transport: %w", b.Name, err)
	}
	// Below the headers: SigV4 signs them.
	if rt, err = b.Auth.roundTripper(rt); err != nil {
		return nil, fmt.Errorf("backend %s: %w", b.Name, err)
	}
	headers := b.Headers.Clone()
	if b.Compression == CompressionGzip && headers.Get("Accept-Encoding") == "" {
		if headers == nil {
			headers = http.Header{}
		}
		headers.Set("Accept-Encoding", "gzip")
	}
	if len(headers) > 0 {
		h := &config.Headers{Headers: make(map[string]config.Header, len(headers))}
		for k, vs := range headers {
			h.Headers[k] = config.Header{Values: vs}
		}
		rt = config.NewHeadersRoundTripper(h, rt)
	}
	// Outermost: neither transport inflates answers it did not ask to be
	// compressed itself.
	rt = &gunzipRoundTripper{next: rt}
	return &http.Client{Transport: rt}, nil
}

// kubeTransport is the transport with Kubernetes-style credentials (a
// kubeconfig's or the service account's, via client-go), HTTP's CA and
// client certificate files over them, and HTTP's authorization and basic
// auth on top.
func (b Backend) kubeTransport() (http.RoundTripper, error) {
	var cfg *rest.Config
	var err error
	if b.Kubeconfig != "" {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: b.Kubeconfig}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the kubeconfig %s: %w", b.Kubeconfig, err)
		}
	} else {
		inCluster := b.inClusterConfig
		if inCluster == nil {
			inCluster = rest.InClusterConfig
		}
		if cfg, err = inCluster(); err != nil {
			return nil, fmt.Errorf("in-cluster credentials: %w", err)
		}
	}
	cfg = rest.CopyConfig(cfg)
	tlsCfg := b.HTTP.TLSConfig
	if tlsCfg.CAFile != "" {
		cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.CAData = tlsCfg.CAFile, nil
	}
	if tlsCfg.CertFile != "" {
		cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.CertData = tlsCfg.CertFile, nil
		cfg.TLSClientConfig.KeyFile, cfg.TLSClientConfig.KeyData = tlsCfg.KeyFile, nil
	}
	// Answers are inflated by the client (gunzipRoundTripper), as with the
	// library's transport.
	cfg.DisableCompression = true
	// Without TLS options or a proxy, client-go hands out
	// http.DefaultTransport (shared with the rest of the process).
	cfg.Proxy = b.HTTP.Proxy()
	if cfg.Proxy == nil {
		cfg.Proxy = http.ProxyFromEnvironment
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	if a := b.HTTP.Authorization; a != nil && a.CredentialsFile != "" {
		rt = config.NewAuthorizationCredentialsRoundTripper(a.Type, config.NewFileSecret(a.CredentialsFile), rt)
	}
	if ba := b.HTTP.BasicAuth; ba != nil && ba.PasswordFile != "" {
		rt = config.NewBasicAuthRoundTripper(config.NewInlineSecret(ba.Username), config.NewFileSecret(ba.PasswordFile), rt)
	}
	return rt, nil
}
