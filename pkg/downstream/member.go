package downstream

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/pkg/promclient"
)

// apiServices is the resource of APIService objects.
var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// Target is where a downstream answers and how its certificate is checked.
type Target struct {
	Host       string
	CAData     []byte
	ServerName string
	Insecure   bool
}

// APIServiceResolver reads where an APIService sends its requests.
type APIServiceResolver interface {
	Resolve(ctx context.Context, name string) (Target, error)
}

// DynamicResolver resolves APIServices with a dynamic client.
type DynamicResolver struct{ Client dynamic.Interface }

var _ APIServiceResolver = DynamicResolver{}

// Resolve implements APIServiceResolver: the APIService's service (its
// in-cluster DNS name and port) and caBundle.
func (r DynamicResolver) Resolve(ctx context.Context, name string) (Target, error) {
	obj, err := r.Client.Resource(apiServices).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Target{}, fmt.Errorf("reading APIService %s: %w", name, err)
	}
	return targetOf(obj)
}

// targetOf reads an APIService object's spec.
func targetOf(obj *unstructured.Unstructured) (Target, error) {
	ns, _, _ := unstructured.NestedString(obj.Object, "spec", "service", "namespace")
	svc, _, _ := unstructured.NestedString(obj.Object, "spec", "service", "name")
	if ns == "" || svc == "" {
		return Target{}, fmt.Errorf("APIService %s has no spec.service: it is served by the API server itself", obj.GetName())
	}
	port, found, _ := unstructured.NestedInt64(obj.Object, "spec", "service", "port")
	if !found || port == 0 {
		port = DefaultServicePort
	}
	ref := ServiceRef{Namespace: ns, Name: svc, Port: int(port)}
	t := Target{Host: "https://" + ref.Host() + ":" + strconv.Itoa(ref.Port), ServerName: ref.Host()}
	t.Insecure, _, _ = unstructured.NestedBool(obj.Object, "spec", "insecureSkipTLSVerify")
	if b64, _, _ := unstructured.NestedString(obj.Object, "spec", "caBundle"); b64 != "" {
		ca, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return Target{}, fmt.Errorf("APIService %s: spec.caBundle: %w", obj.GetName(), err)
		}
		t.CAData = ca
	}
	return t, nil
}

// member is one configured downstream: its settings, client, guard and
// last discovery.
type member struct {
	cfg    Server
	guard  *promclient.Guard
	client *Client
	target Target // what the client was built for

	mu         sync.Mutex
	found      *Discovered // last good discovery, nil before the first
	lastTry    time.Time
	lastGood   time.Time
	lastErr    string
	failures   int
	retargeted bool // the APIService points elsewhere, logged once
}

// newMember builds the member of cfg answering at t.
func newMember(cfg Server, t Target, base *rest.Config, clk clock.PassiveClock) (*member, error) {
	guard, err := promclient.NewGuard("downstream/"+cfg.Name, promclient.GuardConfig{
		MaxConcurrent: cfg.MaxInFlight, BreakerFailures: cfg.BreakerFailures, BreakerOpen: cfg.BreakerOpen,
	}, nil, clk)
	if err != nil {
		return nil, err
	}
	rc := restConfig(cfg, t, base)
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return guard.RoundTripper(rt) }
	client, err := NewClient(cfg.Name, rc)
	if err != nil {
		return nil, err
	}
	return &member{cfg: cfg, guard: guard, client: client, target: t}, nil
}

// restConfig is the client configuration of a downstream at t.
func restConfig(cfg Server, t Target, base *rest.Config) *rest.Config {
	// No rest.Config.Timeout: each call's context carries the timeout
	// (the config's would also add ?timeout= to every request).
	rc := &rest.Config{Host: t.Host, UserAgent: "promscaler-downstream/" + cfg.Name}
	if base != nil {
		rc.UserAgent = base.UserAgent
	}
	rc.TLSClientConfig = rest.TLSClientConfig{
		CAFile: cfg.TLS.CAFile, CAData: t.CAData, ServerName: t.ServerName,
		Insecure: cfg.TLS.InsecureSkipVerify || (t.Insecure && cfg.TLS.CAFile == "" && len(t.CAData) == 0),
	}
	if cfg.TLS.CAFile != "" {
		rc.CAData = nil
	}
	if cfg.TLS.ServerName != "" {
		rc.ServerName = cfg.TLS.ServerName
	}
	if !rc.Insecure && rc.CAFile == "" && len(rc.CAData) == 0 && base != nil {
		// The cluster's CA, as the aggregator would use none other for
		// a Service without caBundle.
		rc.CAFile, rc.CAData = base.CAFile, base.CAData
	}
	if !cfg.Credentials.None {
		rc.BearerTokenFile = cfg.Credentials.TokenFile
		rc.CertFile, rc.KeyFile = cfg.Credentials.ClientCert, cfg.Credentials.ClientKey
	}
	return rc
}

// discover refreshes the member's discovery, keeping the last good one on
// failure.
func (m *member) discover(ctx context.Context, clk clock.PassiveClock) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	d, err := m.client.Discover(ctx, m.cfg.APIs)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastTry = clk.Now()
	if err != nil {
		m.failures++
		m.lastErr = err.Error()
		klog.V(2).InfoS("Downstream discovery failed; keeping its last list", "downstream", m.cfg.Name, "err", err)
		return
	}
	m.found, m.lastGood, m.lastErr, m.failures = d, m.lastTry, "", 0
}

// discovered returns the last good discovery (nil before one).
func (m *member) discovered() *Discovered {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.found
}

// Status is one downstream's state, for /readyz?verbose and logs.
type Status struct {
	Name                 string
	Guard                promclient.GuardStatus
	Custom, External     int
	CatchAll             []API
	LastDiscovery        time.Time
	DiscoveryError       string
	DiscoveryFailures    int
	DiscoveredAtLeastOne bool
}

// String renders the status on one line.
func (s Status) String() string {
	state := "up"
	if !s.Guard.Up {
		state = fmt.Sprintf("down since %s (last: %s); its metrics answer 503, promscaler's are unaffected", s.Guard.DownSince.UTC().Format(time.RFC3339), s.Guard.LastError)
	}
	out := fmt.Sprintf("downstream %q: %s; lists %d custom and %d external metrics", s.Name, state, s.Custom, s.External)
	for _, api := range s.CatchAll {
		out += fmt.Sprintf("; lists no %s metrics of its own (the library's placeholder): asked for every %s metric promscaler does not serve", api, api)
	}
	switch {
	case !s.DiscoveredAtLeastOne && s.DiscoveryError != "":
		out += "; discovery never succeeded: " + s.DiscoveryError
	case s.DiscoveryError != "":
		out += fmt.Sprintf("; discovery failing (%d times, last: %s), serving the list of %s", s.DiscoveryFailures, s.DiscoveryError, s.LastDiscovery.UTC().Format(time.RFC3339))
	}
	return out
}

func (m *member) status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Status{Name: m.cfg.Name, Guard: m.guard.Status(), LastDiscovery: m.lastGood, DiscoveryError: m.lastErr,
		DiscoveryFailures: m.failures, DiscoveredAtLeastOne: m.found != nil}
	if m.found != nil {
		s.Custom, s.External, s.CatchAll = len(m.found.Custom), len(m.found.External), m.found.CatchAll
	}
	return s
}
