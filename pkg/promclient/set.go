package promclient

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/promscaler/promscaler/internal/metrics"
)

// Backends is the adapter's set of backends: the default one (the
// --prometheus-* flags, what a rule naming no backend uses) and the named
// ones (--backends-config). It is built once, from the flags and the
// backends file, and every consumer looks a backend up here by name.
type Backends struct {
	def   *Client
	named map[string]*Client
}

// NewBackends builds the client of every backend: backends[0] is the
// default one (its Name "" or DefaultBackendName), the others are named.
// m receives the request metrics; arrival is Config.ArrivalTime.
func NewBackends(backends []Backend, m *metrics.Metrics, arrival ArrivalFunc) (*Backends, error) {
	if len(backends) == 0 {
		return nil, fmt.Errorf("no default backend")
	}
	s := &Backends{named: make(map[string]*Client, len(backends)-1)}
	for i, b := range backends {
		c, err := NewForBackend(b, m, arrival)
		if err != nil {
			return nil, fmt.Errorf("building the client of backend %s: %w", nameOr(b.Name), err)
		}
		if i == 0 {
			s.def = c
			continue
		}
		if isDefault(b.Name) {
			return nil, fmt.Errorf("backend %q: the default backend's name is reserved", b.Name)
		}
		if _, dup := s.named[b.Name]; dup {
			return nil, fmt.Errorf("backend %q: defined twice", b.Name)
		}
		s.named[b.Name] = c
	}
	return s, nil
}

func nameOr(name string) string {
	if name == "" {
		return DefaultBackendName
	}
	return name
}

func isDefault(name string) bool { return name == "" || name == DefaultBackendName }

// Default returns the default backend's client.
func (s *Backends) Default() *Client { return s.def }

// Lookup returns the client of the backend a rule names: "" and
// DefaultBackendName are the default one; ok is false for a name the set
// does not have.
func (s *Backends) Lookup(name string) (*Client, bool) {
	if isDefault(name) {
		return s.def, true
	}
	c, ok := s.named[name]
	return c, ok
}

// Names returns the named backends' names, sorted (the default one's is
// not among them).
func (s *Backends) Names() []string { return slices.Sorted(maps.Keys(s.named)) }

// Clients returns every client, the default one first, then by name.
func (s *Backends) Clients() []*Client {
	out := []*Client{s.def}
	for _, n := range s.Names() {
		out = append(out, s.named[n])
	}
	return out
}

// Guards returns every backend's guard, in Clients order.
func (s *Backends) Guards() []*Guard {
	out := make([]*Guard, 0, len(s.named)+1)
	for _, c := range s.Clients() {
		out = append(out, c.Guard())
	}
	return out
}

// WithTimeout returns the set with each client's per-call timeout replaced
// by timeout(the client's own): see Client.WithTimeout. The clients share
// their transports, guards and coalescing with s's.
func (s *Backends) WithTimeout(timeout func(own time.Duration) time.Duration) *Backends {
	out := &Backends{def: s.def.WithTimeout(timeout(s.def.Timeout())), named: make(map[string]*Client, len(s.named))}
	for n, c := range s.named {
		out.named[n] = c.WithTimeout(timeout(c.Timeout()))
	}
	return out
}

// CloseIdleConnections closes every client's idle connections.
func (s *Backends) CloseIdleConnections() {
	for _, c := range s.Clients() {
		c.CloseIdleConnections()
	}
}

// LookupAs returns s's Lookup as a function returning a consumer's own
// interface T (one that *Client implements: discovery.Prometheus,
// SampleQuerier), so that each consumer declares only what it reads.
func LookupAs[T any](s *Backends) func(name string) (T, bool) {
	return func(name string) (T, bool) {
		var zero T
		c, ok := s.Lookup(name)
		if !ok {
			return zero, false
		}
		t, ok := any(c).(T)
		return t, ok
	}
}

// Single is the lookup of one backend, the default one ("" and
// DefaultBackendName): for programs and tests with one Prometheus.
func Single[T any](def T) func(name string) (T, bool) {
	return func(name string) (T, bool) {
		if isDefault(name) {
			return def, true
		}
		var zero T
		return zero, false
	}
}
