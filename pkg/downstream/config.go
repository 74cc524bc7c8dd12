package downstream

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults of the configuration file's optional fields.
const (
	// DefaultRefreshInterval is how often the downstreams' discovery
	// documents are fetched (and the file re-read).
	DefaultRefreshInterval = 30 * time.Second
	// DefaultTimeout bounds one request to a downstream. The HPA controller
	// reads metrics every 15s; a downstream slower than this is as good as
	// down for it.
	DefaultTimeout = 5 * time.Second
	// DefaultTokenFile is the adapter's ServiceAccount token, the
	// credential presented to a downstream unless the file names another.
	DefaultTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	// DefaultServicePort is an in-cluster Service's port when none is given
	// (APIService's default too).
	DefaultServicePort = 443
)

// API is one of the metrics APIs a downstream serves.
type API string

// The metrics APIs.
const (
	Custom   API = "custom"
	External API = "external"
)

// Group is the API group of the API.
func (a API) Group() string { return string(a) + ".metrics.k8s.io" }

// File is a parsed downstream configuration file.
type File struct {
	// Path is where it was read from (for messages).
	Path string
	// RefreshInterval is how often discovery documents are fetched.
	RefreshInterval time.Duration
	// Downstreams are the servers, in the file's order (which is also the
	// order in which they are asked for a name more than one lists).
	Downstreams []Server
}

// Server is one downstream metrics server.
type Server struct {
	// Name identifies it in logs, /metrics, /readyz and the
	// X-Promscaler-Served-By header.
	Name string
	// Line is where its entry starts in the file.
	Line int
	// Exactly one of URL, Service and APIService says where it is.
	URL        string
	Service    *ServiceRef
	APIService string
	// TLS is how its serving certificate is checked.
	TLS TLS
	// Credentials are what the adapter presents to it.
	Credentials Credentials
	// APIs are the metrics APIs it is asked for.
	APIs []API
	// Timeout bounds one request.
	Timeout time.Duration
	// MaxInFlight bounds the requests in flight to it (0: the Prometheus
	// backends' default; negative: none); BreakerFailures consecutive
	// timeouts or connection errors mark it down for BreakerOpen.
	MaxInFlight     int
	BreakerFailures int
	BreakerOpen     time.Duration
	// Routes are the metric names served by this downstream even when
	// promscaler serves the same name (by API).
	Routes map[API][]string
}

// Serves reports whether the server is asked for api.
func (s *Server) Serves(api API) bool { return slices.Contains(s.APIs, api) }

// ServiceRef is an in-cluster Service.
type ServiceRef struct {
	Namespace, Name string
	Port            int
}

// Host is the Service's in-cluster DNS name, also the name its serving
// certificate is checked against (as the aggregator does).
func (s ServiceRef) Host() string { return s.Name + "." + s.Namespace + ".svc" }

// TLS is how a downstream's serving certificate is checked.
type TLS struct {
	// CAFile is a PEM bundle; empty: the APIService's caBundle when the
	// server is given by apiService, else the adapter's in-cluster CA
	// (the system pool outside a cluster).
	CAFile string
	// ServerName overrides the name the certificate is checked against.
	ServerName string
	// InsecureSkipVerify checks nothing (only for an APIService that says
	// insecureSkipTLSVerify, or tests).
	InsecureSkipVerify bool
}

// Credentials are what the adapter presents to a downstream: a bearer
// token file (DefaultTokenFile unless set), or a client certificate.
type Credentials struct {
	TokenFile             string
	ClientCert, ClientKey string
	// None presents nothing (a downstream that allows anonymous reads).
	None bool
}

// LoadFile reads and parses a configuration file.
func LoadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the downstream configuration: %w", err)
	}
	return Parse(path, data)
}

// Parse parses a configuration file's content; path names it in errors,
// which are every problem found, each as path:line: what.
func Parse(path string, data []byte) (*File, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p := &parser{path: path}
	f := &File{Path: path, RefreshInterval: DefaultRefreshInterval}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	p.mapping(root, "", map[string]func(*yaml.Node, string){
		"refreshInterval": func(n *yaml.Node, at string) { f.RefreshInterval = p.duration(n, at) },
		"downstreams": func(n *yaml.Node, at string) {
			if p.kind(n, at, yaml.SequenceNode) {
				for i, e := range n.Content {
					f.Downstreams = append(f.Downstreams, p.server(e, fmt.Sprintf("%s[%d]", at, i)))
				}
			}
		},
	})
	if f.RefreshInterval <= 0 {
		p.errorf(root, "refreshInterval", "must be positive")
	}
	p.unique(f.Downstreams)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return f, nil
}

// parser walks the YAML nodes, collecting errors with their lines.
type parser struct {
	path string
	errs []error
}

func (p *parser) errorf(n *yaml.Node, at, format string, args ...any) {
	if at != "" {
		format = at + ": " + format
	}
	p.errs = append(p.errs, fmt.Errorf("%s:%d: "+format, append([]any{p.path, n.Line}, args...)...))
}

var kindNames = map[yaml.Kind]string{yaml.MappingNode: "a mapping", yaml.SequenceNode: "a list", yaml.ScalarNode: "a scalar"}

// kind checks that n is of kind k.
func (p *parser) kind(n *yaml.Node, at string, k yaml.Kind) bool {
	if n.Kind == k {
		return true
	}
	if n.Kind == 0 { // empty document
		return false
	}
	p.errorf(n, at, "must be %s", kindNames[k])
	return false
}

// mapping calls the field's function for each key of n, reporting unknown
// and repeated keys.
func (p *parser) mapping(n *yaml.Node, at string, fields map[string]func(*yaml.Node, string)) {
	if !p.kind(n, at, yaml.MappingNode) {
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if at != "" {
			path = at + "." + k.Value
		}
		fn, ok := fields[k.Value]
		switch {
		case !ok:
			p.errorf(k, path, "unknown field")
		case seen[k.Value]:
			p.errorf(k, path, "repeated field")
		default:
			seen[k.Value] = true
			fn(v, path)
		}
	}
}

func (p *parser) str(n *yaml.Node, at string) string {
	if !p.kind(n, at, yaml.ScalarNode) {
		return ""
	}
	return n.Value
}

func (p *parser) boolean(n *yaml.Node, at string) bool {
	v, err := strconv.ParseBool(p.str(n, at))
	if err != nil && n.Kind == yaml.ScalarNode {
		p.errorf(n, at, "must be true or false, not %q", n.Value)
	}
	return v
}

func (p *parser) integer(n *yaml.Node, at string) int {
	v, err := strconv.Atoi(p.str(n, at))
	if err != nil && n.Kind == yaml.ScalarNode {
		p.errorf(n, at, "must be an integer, not %q", n.Value)
	}
	return v
}

func (p *parser) duration(n *yaml.Node, at string) time.Duration {
	s := p.str(n, at)
	if n.Kind != yaml.ScalarNode {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.errorf(n, at, "must be a duration such as 5s, not %q", s)
	}
	return d
}

func (p *parser) strings(n *yaml.Node, at string) []string {
	if !p.kind(n, at, yaml.SequenceNode) {
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, e := range n.Content {
		out = append(out, p.str(e, fmt.Sprintf("%s[%d]", at, i)))
	}
	return out
}

// dnsLabel is a Kubernetes object name (RFC 1123 label), which a
// downstream's name also is: it appears in label values and headers.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// server parses one downstreams entry.
func (p *parser) server(n *yaml.Node, at string) Server {
	s := Server{Line: n.Line, Timeout: DefaultTimeout, APIs: []API{Custom, External},
		Credentials: Credentials{TokenFile: DefaultTokenFile}}
	p.mapping(n, at, map[string]func(*yaml.Node, string){
		"name":        func(v *yaml.Node, at string) { s.Name = p.str(v, at) },
		"url":         func(v *yaml.Node, at string) { s.URL = p.str(v, at) },
		"service":     func(v *yaml.Node, at string) { s.Service = p.service(v, at) },
		"apiService":  func(v *yaml.Node, at string) { s.APIService = p.str(v, at) },
		"tls":         func(v *yaml.Node, at string) { s.TLS = p.tls(v, at) },
		"credentials": func(v *yaml.Node, at string) { s.Credentials = p.credentials(v, at) },
		"apis":        func(v *yaml.Node, at string) { s.APIs = p.apis(v, at) },
		"timeout":     func(v *yaml.Node, at string) { s.Timeout = p.duration(v, at) },
		"maxInFlight": func(v *yaml.Node, at string) { s.MaxInFlight = p.integer(v, at) },
		"breaker": func(v *yaml.Node, at string) {
			p.mapping(v, at, map[string]func(*yaml.Node, string){
				"failures": func(v *yaml.Node, at string) { s.BreakerFailures = p.integer(v, at) },
				"openFor":  func(v *yaml.Node, at string) { s.BreakerOpen = p.duration(v, at) },
			})
		},
		"routes": func(v *yaml.Node, at string) { s.Routes = p.routes(v, at) },
	})
	if n.Kind == yaml.MappingNode {
		p.checkServer(n, at, &s)
	}
	return s
}

// checkServer reports what is wrong with a parsed entry as a whole.
func (p *parser) checkServer(n *yaml.Node, at string, s *Server) {
	switch {
	case s.Name == "":
		p.errorf(n, at+".name", "is required")
	case !dnsLabel.MatchString(s.Name) || len(s.Name) > 63:
		p.errorf(n, at+".name", "%q must be a DNS label (lowercase letters, digits and '-')", s.Name)
	}
	where := 0
	for _, set := range []bool{s.URL != "", s.Service != nil, s.APIService != ""} {
		if set {
			where++
		}
	}
	if where != 1 {
		p.errorf(n, at, "exactly one of url, service and apiService is required")
	}
	if s.URL != "" {
		if u, err := url.Parse(s.URL); err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			p.errorf(n, at+".url", "%q must be https://host[:port]", s.URL)
		}
	}
	if s.Timeout <= 0 {
		p.errorf(n, at+".timeout", "must be positive")
	}
	if s.BreakerOpen < 0 {
		p.errorf(n, at+".breaker.openFor", "must not be negative")
	}
	if len(s.APIs) == 0 {
		p.errorf(n, at+".apis", "must list custom, external or both")
	}
	for api := range s.Routes {
		if !s.Serves(api) {
			p.errorf(n, at+".routes."+string(api), "routes names of an API the downstream is not asked for (apis)")
		}
	}
	c := &s.Credentials
	if (c.ClientCert == "") != (c.ClientKey == "") {
		p.errorf(n, at+".credentials", "clientCertFile and clientKeyFile go together")
	}
	if c.None && (c.TokenFile != "" || c.ClientCert != "") {
		p.errorf(n, at+".credentials", "none: true excludes tokenFile and the client certificate")
	}
}

func (p *parser) service(n *yaml.Node, at string) *ServiceRef {
	s := &ServiceRef{Port: DefaultServicePort}
	p.mapping(n, at, map[string]func(*yaml.Node, string){
		"namespace": func(v *yaml.Node, at string) { s.Namespace = p.str(v, at) },
		"name":      func(v *yaml.Node, at string) { s.Name = p.str(v, at) },
		"port":      func(v *yaml.Node, at string) { s.Port = p.integer(v, at) },
	})
	if !dnsLabel.MatchString(s.Namespace) || !dnsLabel.MatchString(s.Name) {
		p.errorf(n, at, "namespace and name are required Kubernetes names")
	}
	if s.Port < 1 || s.Port > 65535 {
		p.errorf(n, at+".port", "must be 1-65535")
	}
	return s
}

func (p *parser) tls(n *yaml.Node, at string) TLS {
	var t TLS
	p.mapping(n, at, map[string]func(*yaml.Node, string){
		"caFile":             func(v *yaml.Node, at string) { t.CAFile = p.str(v, at) },
		"serverName":         func(v *yaml.Node, at string) { t.ServerName = p.str(v, at) },
		"insecureSkipVerify": func(v *yaml.Node, at string) { t.InsecureSkipVerify = p.boolean(v, at) },
	})
	if t.InsecureSkipVerify && t.CAFile != "" {
		p.errorf(n, at, "caFile and insecureSkipVerify exclude each other")
	}
	return t
}

func (p *parser) credentials(n *yaml.Node, at string) Credentials {
	var c Credentials
	p.mapping(n, at, map[string]func(*yaml.Node, string){
		"tokenFile":      func(v *yaml.Node, at string) { c.TokenFile = p.str(v, at) },
		"clientCertFile": func(v *yaml.Node, at string) { c.ClientCert = p.str(v, at) },
		"clientKeyFile":  func(v *yaml.Node, at string) { c.ClientKey = p.str(v, at) },
		"none":           func(v *yaml.Node, at string) { c.None = p.boolean(v, at) },
	})
	if c.TokenFile == "" && c.ClientCert == "" && !c.None {
		c.TokenFile = DefaultTokenFile
	}
	return c
}

func (p *parser) apis(n *yaml.Node, at string) []API {
	var out []API
	for i, s := range p.strings(n, at) {
		api := API(s)
		switch {
		case api != Custom && api != External:
			p.errorf(n.Content[i], fmt.Sprintf("%s[%d]", at, i), "%q is neither custom nor external", s)
		case slices.Contains(out, api):
			p.errorf(n.Content[i], fmt.Sprintf("%s[%d]", at, i), "%q is listed twice", s)
		default:
			out = append(out, api)
		}
	}
	return out
}

func (p *parser) routes(n *yaml.Node, at string) map[API][]string {
	out := map[API][]string{}
	p.mapping(n, at, map[string]func(*yaml.Node, string){
		"custom":   func(v *yaml.Node, at string) { out[Custom] = p.names(v, at) },
		"external": func(v *yaml.Node, at string) { out[External] = p.names(v, at) },
	})
	return out
}

func (p *parser) names(n *yaml.Node, at string) []string {
	names := p.strings(n, at)
	for i, s := range names {
		if s == "" || bytes.ContainsAny([]byte(s), "/ ") {
			p.errorf(n.Content[i], fmt.Sprintf("%s[%d]", at, i), "%q is not a metric name", s)
		}
	}
	return names
}

// unique reports servers sharing a name, and a route given to two.
func (p *parser) unique(servers []Server) {
	names := map[string]int{}
	routed := map[API]map[string]string{Custom: {}, External: {}}
	for _, s := range servers {
		if s.Name != "" {
			if line, ok := names[s.Name]; ok {
				p.errs = append(p.errs, fmt.Errorf("%s:%d: downstream %q is also defined at line %d", p.path, s.Line, s.Name, line))
			}
			names[s.Name] = s.Line
		}
		for api, ms := range s.Routes {
			for _, m := range ms {
				if other, ok := routed[api][m]; ok && other != s.Name {
					p.errs = append(p.errs, fmt.Errorf("%s:%d: %s metric %q is routed to both %q and %q", p.path, s.Line, api, m, other, s.Name))
				}
				routed[api][m] = s.Name
			}
		}
	}
}
