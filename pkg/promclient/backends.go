package promclient

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/sigv4"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/promscaler/promscaler/internal/truncate"
)

// BackendsFile is the format of --backends-config: the backends besides
// the default one (the --prometheus-* flags), each a Prometheus-compatible
// server that rules name with their backend: key.
//
//	backends:
//	- name: thanos
//	  url: https://thanos-query.monitoring.svc:9090
//	  timeout: 30s
//	  compression: gzip
//	  max_in_flight: 20
//	  tls_config: {ca_file: /etc/thanos/ca.crt}
//	- name: mimir-team-a
//	  url: http://mimir-query-frontend.mimir.svc:8080/prometheus
//	  headers: {X-Scope-OrgID: team-a}
//	  basic_auth: {username: adapter, password_file: /etc/mimir/password}
//
// An entry's other keys are prometheus/common's HTTP client configuration
// (the keys of Prometheus' own scrape and remote-read configurations):
// tls_config, authorization, basic_auth, oauth2, proxy_url,
// proxy_from_environment, no_proxy, follow_redirects, enable_http2.
type BackendsFile struct {
	Backends []BackendEntry `yaml:"backends"`
}

// BackendEntry is one backend of a BackendsFile.
type BackendEntry struct {
	// Name is what rules name in their backend: key: a DNS label
	// (lowercase letters, digits, '-'), unique, not DefaultBackendName.
	Name string `yaml:"name"`
	// URL is the base URL of the Prometheus HTTP API, without /api/v1.
	URL string `yaml:"url"`
	// Timeout bounds each call and is sent as timeout=; 0 means the
	// --prometheus-timeout flag's value.
	Timeout model.Duration `yaml:"timeout,omitempty"`
	// Verb is GET or POST; empty means --prometheus-verb's.
	Verb string `yaml:"verb,omitempty"`
	// Compression is none or gzip; empty means --prometheus-compression's.
	Compression string `yaml:"compression,omitempty"`
	// Headers are set on every request, e.g. X-Scope-OrgID for a Mimir or
	// Cortex tenant.
	Headers map[string]string `yaml:"headers,omitempty"`
	// MaxInFlight, BreakerFailures and BreakerOpen are the backend's guard
	// (0 in the first two: no bound, never marked down); absent means the
	// --prometheus-max-in-flight, --prometheus-breaker-* flags' values.
	MaxInFlight *int `yaml:"max_in_flight,omitempty"`
	// MaxWaiting bounds the requests waiting on the backend's answers (0:
	// no bound); absent means --prometheus-max-waiting's.
	MaxWaiting      *int           `yaml:"max_waiting,omitempty"`
	BreakerFailures *int           `yaml:"breaker_failures,omitempty"`
	BreakerOpen     model.Duration `yaml:"breaker_open,omitempty"`
	// MaxSampleAge makes a sample older than it no value; absent means
	// --prometheus-max-sample-age's (0: off).
	MaxSampleAge *model.Duration `yaml:"max_sample_age,omitempty"`
	// SigV4, AzureAD and Google are a managed Prometheus' cloud
	// authentication (CloudAuth), at most one, instead of authorization,
	// basic_auth or oauth2.
	SigV4   *sigv4.SigV4Config `yaml:"sigv4,omitempty"`
	AzureAD *AzureADConfig     `yaml:"azuread,omitempty"`
	Google  *GoogleConfig      `yaml:"google,omitempty"`
	// MaxAnswerBytes bounds one answer's bytes (0: no bound); absent means
	// --prometheus-max-answer-bytes.
	MaxAnswerBytes *int64 `yaml:"max_answer_bytes,omitempty"`
	// HTTP is TLS, authorization, proxy and redirects, served by
	// prometheus/common/config (files re-read when they change), with its
	// keys inline. Its http_headers key is refused: use headers. (A named
	// field: embedded, its UnmarshalYAML would decode the whole entry.)
	HTTP config.HTTPClientConfig `yaml:",inline"`
}

// LoadBackends reads a --backends-config file and returns its backends,
// each built over base (the default backend: the --prometheus-* flags'),
// from which an entry takes the verb, timeout, compression, cache and
// coalescing settings it does not set. Every problem is reported, each as
// file:line: backends[i].key: what is wrong.
func LoadBackends(path string, base Backend) ([]Backend, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the backends file: %w", err)
	}
	return ParseBackends(data, path, base)
}

// ParseBackends is LoadBackends on the file's content; file names it in
// errors.
func ParseBackends(data []byte, file string, base Backend) ([]Backend, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(file, err)
	}
	if keyNode(docMapping(&root), "backends") == nil {
		return nil, fmt.Errorf("%s: no backends: key (a list of backends, each with a name and a url)", file)
	}
	if err := checkDurations(entryNodes(&root), file); err != nil {
		return nil, err
	}
	var f BackendsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, yamlError(file, err)
	}
	entries := entryNodes(&root)
	if len(entries) != len(f.Backends) {
		return nil, fmt.Errorf("%s: the backends key must hold a list of backends", file)
	}
	var (
		errs []error
		out  = make([]Backend, 0, len(f.Backends))
		seen = map[string]int{}
	)
	for i := range f.Backends {
		e, n := &f.Backends[i], entries[i]
		errorf := func(key, format string, args ...any) {
			line := n.Line
			if k := keyNode(n, key); k != nil {
				line = k.Line
			}
			errs = append(errs, fmt.Errorf("%s:%d: backends[%d].%s: %s", file, line, i, key, fmt.Sprintf(format, args...)))
		}
		if err := ValidBackendName(e.Name); err != nil {
			errorf("name", "%v", err)
		} else if first, dup := seen[e.Name]; dup {
			errorf("name", "backend %q is already defined by backends[%d] (line %d)", e.Name, first, entries[first].Line)
		} else {
			seen[e.Name] = i
		}
		b, problems := e.backend(base, n)
		for _, p := range problems {
			errorf(p.key, "%s", p.msg)
		}
		out = append(out, b)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// backendNameMaxLen bounds a backend name (a DNS label).
const backendNameMaxLen = validation.DNS1123LabelMaxLength

// ValidBackendName checks that name can name a backend: a DNS label
// (lowercase letters, digits and '-', at most 63 characters), not
// DefaultBackendName, which names the --prometheus-* flags' backend.
func ValidBackendName(name string) error {
	switch {
	case name == "":
		return errors.New("a backend needs a name (what rules name in their backend: key)")
	case name == DefaultBackendName:
		return fmt.Errorf("%q names the backend of the --prometheus-* flags; choose another name", name)
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("backend name %q: %s", truncate.String(name, backendNameMaxLen+8), strings.Join(msgs, "; "))
	}
	return nil
}

type problem struct{ key, msg string }

// backend turns the entry into a Backend over base, listing its problems.
func (e *BackendEntry) backend(base Backend, n *yaml.Node) (Backend, []problem) {
	var ps []problem
	add := func(key, format string, args ...any) { ps = append(ps, problem{key, fmt.Sprintf(format, args...)}) }
	b := Backend{
		Name:           e.Name,
		URL:            e.URL,
		HTTP:           e.HTTP,
		Verb:           base.Verb,
		Timeout:        base.Timeout,
		CacheTTL:       base.CacheTTL,
		CoalesceWindow: base.CoalesceWindow,
		Compression:    base.Compression,
		Guard:          base.Guard,
		MaxSampleAge:   base.MaxSampleAge,
		Auth:           CloudAuth{SigV4: e.SigV4, AzureAD: e.AzureAD, Google: e.Google},
	}
	if u, err := url.Parse(e.URL); err != nil {
		add("url", "%v", redactURLError(err))
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		add("url", "%q must be an http:// or https:// URL with a host", u.Redacted())
	}
	switch {
	case e.Timeout < 0:
		add("timeout", "%v must not be negative", e.Timeout)
	case e.Timeout > 0:
		b.Timeout = time.Duration(e.Timeout)
	}
	e.guard(&b.Guard, add)
	if e.MaxSampleAge != nil {
		b.MaxSampleAge = time.Duration(*e.MaxSampleAge)
	}
	if e.Verb != "" {
		b.Verb = strings.ToUpper(e.Verb)
		if b.Verb != http.MethodGet && b.Verb != http.MethodPost {
			add("verb", "%q must be GET or POST", e.Verb)
		}
	}
	if e.Compression != "" {
		b.Compression = e.Compression
		if b.Compression != CompressionNone && b.Compression != CompressionGzip {
			add("compression", "%q must be %s or %s", e.Compression, CompressionNone, CompressionGzip)
		}
	}
	// Absent keys take prometheus/common's defaults, and the environment's
	// proxy as the --prometheus-* flags' backend does.
	if keyNode(n, "follow_redirects") == nil {
		b.HTTP.FollowRedirects = true
	}
	if keyNode(n, "enable_http2") == nil {
		b.HTTP.EnableHTTP2 = true
	}
	if keyNode(n, "proxy_from_environment") == nil && b.HTTP.ProxyURL.URL == nil {
		b.HTTP.ProxyFromEnvironment = true
	}
	if b.HTTP.HTTPHeaders != nil {
		add("http_headers", "not supported here: set headers (name: value)")
	}
	if err := b.HTTP.Validate(); err != nil {
		add(httpConfigKey(n), "%v", err)
	}
	if len(e.Headers) > 0 {
		b.Headers = make(http.Header, len(e.Headers))
		for name, v := range e.Headers {
			k, v, err := parseHeader(name + "=" + v)
			if err != nil {
				add("headers", "%v", err)
				continue
			}
			b.Headers.Set(k, v)
		}
	}
	if key := b.Auth.name(); key != "" {
		if err := b.Auth.Validate(); err != nil {
			add(key, "%v", err)
		} else if err := b.Auth.conflictsWithHTTPAuth(b); err != nil {
			add(key, "%v", err)
		}
	}
	return b, ps
}

// guard sets the limits the entry sets on g (the base backend's), adding
// a problem for each bad one.
func (e *BackendEntry) guard(g *GuardConfig, add func(key, format string, args ...any)) {
	if e.MaxInFlight != nil {
		if *e.MaxInFlight < 0 {
			add("max_in_flight", "%d must not be negative (0: no bound)", *e.MaxInFlight)
		}
		g.MaxConcurrent = noneIfZero(*e.MaxInFlight)
	}
	if e.MaxWaiting != nil {
		if *e.MaxWaiting < 0 {
			add("max_waiting", "%d must not be negative (0: no bound)", *e.MaxWaiting)
		}
		g.MaxWaiting = noneIfZero(*e.MaxWaiting)
	}
	if e.BreakerFailures != nil {
		if *e.BreakerFailures < 0 {
			add("breaker_failures", "%d must not be negative (0: never marked down)", *e.BreakerFailures)
		}
		g.BreakerFailures = noneIfZero(*e.BreakerFailures)
	}
	if e.BreakerOpen > 0 {
		g.BreakerOpen = time.Duration(e.BreakerOpen)
	}
	if e.MaxAnswerBytes != nil {
		if *e.MaxAnswerBytes < 0 {
			add("max_answer_bytes", "%d must not be negative (0: no bound)", *e.MaxAnswerBytes)
		}
		g.MaxAnswerBytes = noneIfZero(*e.MaxAnswerBytes)
	}
}

// durationKeys are the entry keys holding a duration.
var durationKeys = []string{"timeout", "breaker_open", "max_sample_age"}

// checkDurations reports each duration key of the entries whose value does
// not parse, at its line: the YAML decoder's error for it carries none.
func checkDurations(entries []*yaml.Node, file string) error {
	var errs []error
	for i, n := range entries {
		for _, key := range durationKeys {
			k, v := mappingEntry(n, key)
			if v == nil || v.Kind != yaml.ScalarNode {
				continue
			}
			if _, err := model.ParseDuration(v.Value); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: backends[%d].%s: %q is not a duration (e.g. 500ms, 30s, 2m)", file, k.Line, i, key, v.Value))
			}
		}
	}
	return errors.Join(errs...)
}

// httpConfigKey names the HTTP client key an HTTPClientConfig.Validate
// error is most likely about: the first of the entry's keys that is one.
func httpConfigKey(n *yaml.Node) string {
	for _, k := range []string{"authorization", "basic_auth", "oauth2", "bearer_token", "bearer_token_file", "tls_config", "proxy_url", "no_proxy", "proxy_from_environment"} {
		if keyNode(n, k) != nil {
			return k
		}
	}
	return "url"
}

// entryNodes returns the mapping nodes of the backends list.
func entryNodes(root *yaml.Node) []*yaml.Node {
	_, list := mappingEntry(docMapping(root), "backends")
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil
	}
	return list.Content
}

// docMapping returns the document's top mapping, nil when it is not one.
func docMapping(root *yaml.Node) *yaml.Node {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	return root.Content[0]
}

// keyNode returns the key node of key in mapping n, nil when absent.
func keyNode(n *yaml.Node, key string) *yaml.Node {
	k, _ := mappingEntry(n, key)
	return k
}

// mappingEntry returns the key and value nodes of key in mapping n, nils
// when absent.
func mappingEntry(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// yamlLineRE finds yaml.v3's "line N: " prefixes.
var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// unknownFieldRE finds yaml.v3's strict-mode message, which names Go types.
var unknownFieldRE = regexp.MustCompile(`^field (\S+) not found in type \S+$`)

// yamlError turns yaml.v3's errors ("yaml: line 3: ...", or a TypeError
// listing "line 7: field x not found in type y") into file:line: messages.
func yamlError(file string, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if sm := yamlLineRE.FindStringSubmatch(m); sm != nil {
			line, _ := strconv.Atoi(sm[1])
			errs[i] = fmt.Errorf("%s:%d: %s", file, line, unknownFieldRE.ReplaceAllString(m[len(sm[0]):], "unknown key $1"))
			continue
		}
		errs[i] = fmt.Errorf("%s: %s", file, strings.TrimPrefix(m, "yaml: "))
	}
	return errors.Join(errs...)
}
