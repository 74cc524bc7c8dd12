package promclient

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promscaler/promscaler/internal/metrics"
)

// Backends is the adapter's set of backends: the default one (the
// --prometheus-* flags, what a rule naming no backend uses) and the named
// ones (--backends-config). It is built from the flags and the backends
// file, every consumer looks a backend up here by name, and Reload
// replaces the named ones when the file changes: a lookup reads the set in
// service at that moment (an atomic pointer), never a torn one.
type Backends struct {
	cur atomic.Pointer[backendSet]
	// m and arrival build the clients of a reload.
	m       *metrics.Metrics
	arrival ArrivalFunc
	// parent and timeout make a derived view (WithTimeout): it reads the
	// parent's set in service, each client with its timeout replaced.
	parent  *Backends
	timeout func(own time.Duration) time.Duration
	// reloadMu serialises reloads.
	reloadMu sync.Mutex
}

// backendSet is one version of the set: read-only once published.
type backendSet struct {
	def   *Client
	named map[string]*Client
	// configs are the named backends' configurations, to keep the client
	// (and its guard, flights and cache) of one a reload does not change.
	configs map[string]Backend
}

// NewBackends builds the client of every backend: backends[0] is the
// default one (its Name "" or DefaultBackendName), the others are named.
// m receives the request metrics; arrival is Config.ArrivalTime.
func NewBackends(backends []Backend, m *metrics.Metrics, arrival ArrivalFunc) (*Backends, error) {
	if len(backends) == 0 {
		return nil, fmt.Errorf("no default backend")
	}
	def, err := NewForBackend(backends[0], m, arrival)
	if err != nil {
		return nil, fmt.Errorf("building the client of backend %s: %w", nameOr(backends[0].Name), err)
	}
	s := &Backends{m: m, arrival: arrival}
	set, err := s.build(def, backends[1:], nil)
	if err != nil {
		return nil, err
	}
	s.cur.Store(set)
	return s, nil
}

// build returns a set of def and the named backends, reusing the clients
// of old (may be nil) whose configuration is unchanged.
func (s *Backends) build(def *Client, named []Backend, old *backendSet) (*backendSet, error) {
	set := &backendSet{def: def, named: make(map[string]*Client, len(named)), configs: make(map[string]Backend, len(named))}
	for _, b := range named {
		if isDefault(b.Name) {
			return nil, fmt.Errorf("backend %q: the default backend's name is reserved", b.Name)
		}
		if _, dup := set.named[b.Name]; dup {
			return nil, fmt.Errorf("backend %q: defined twice", b.Name)
		}
		if old != nil && old.named[b.Name] != nil && reflect.DeepEqual(old.configs[b.Name], b) {
			set.named[b.Name], set.configs[b.Name] = old.named[b.Name], b
			continue
		}
		c, err := NewForBackend(b, s.m, s.arrival)
		if err != nil {
			return nil, fmt.Errorf("building the client of backend %s: %w", nameOr(b.Name), err)
		}
		set.named[b.Name], set.configs[b.Name] = c, b
	}
	return set, nil
}

// Reload replaces the named backends with these (a changed backends file,
// its entries in order; the default backend stays). A backend whose
// configuration is unchanged keeps its client: its guard (breaker state,
// requests in flight), flights and cache carry on. It returns an error,
// and changes nothing, when a backend cannot be built. The clients of
// removed or changed backends close their idle connections; their
// requests in flight complete.
func (s *Backends) Reload(named []Backend) (added, changed, removed []string, err error) {
	if s.parent != nil {
		return nil, nil, nil, errors.New("a derived set of backends cannot be reloaded: reload its parent")
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	old := s.cur.Load()
	set, err := s.build(old.def, named, old)
	if err != nil {
		return nil, nil, nil, err
	}
	for name, c := range set.named {
		switch oc := old.named[name]; {
		case oc == nil:
			added = append(added, name)
		case oc != c:
			changed = append(changed, name)
		}
	}
	for name := range old.named {
		if _, ok := set.named[name]; !ok {
			removed = append(removed, name)
		}
	}
	s.cur.Store(set)
	for name, oc := range old.named {
		if set.named[name] != oc {
			oc.CloseIdleConnections()
			s.m.PrometheusMaxSampleAge.DeleteLabelValues(name)
			if c := set.named[name]; c != nil {
				s.m.PrometheusMaxSampleAge.WithLabelValues(name).Set(c.MaxSampleAge().Seconds())
			}
		}
	}
	slices.Sort(added)
	slices.Sort(changed)
	slices.Sort(removed)
	return added, changed, removed, nil
}

// set returns the set in service, each client derived when s is a view.
func (s *Backends) set() *backendSet {
	if s.parent == nil {
		return s.cur.Load()
	}
	p := s.parent.set()
	out := &backendSet{def: p.def.WithTimeout(s.timeout(p.def.Timeout())), named: make(map[string]*Client, len(p.named)), configs: p.configs}
	for n, c := range p.named {
		out.named[n] = c.WithTimeout(s.timeout(c.Timeout()))
	}
	return out
}

func nameOr(name string) string {
	if name == "" {
		return DefaultBackendName
	}
	return name
}

func isDefault(name string) bool { return name == "" || name == DefaultBackendName }

// Default returns the default backend's client.
func (s *Backends) Default() *Client {
	c, _ := s.Lookup(DefaultBackendName)
	return c
}

// Lookup returns the client of the backend a rule names: "" and
// DefaultBackendName are the default one; ok is false for a name the set
// does not have.
func (s *Backends) Lookup(name string) (*Client, bool) {
	if s.parent != nil {
		c, ok := s.parent.Lookup(name)
		if !ok {
			return nil, false
		}
		return c.WithTimeout(s.timeout(c.Timeout())), true
	}
	set := s.cur.Load()
	if isDefault(name) {
		return set.def, true
	}
	c, ok := set.named[name]
	return c, ok
}

// Names returns the named backends' names, sorted (the default one's is
// not among them).
func (s *Backends) Names() []string { return slices.Sorted(maps.Keys(s.set().named)) }

// Clients returns every client, the default one first, then by name.
func (s *Backends) Clients() []*Client {
	set := s.set()
	out := []*Client{set.def}
	for _, n := range slices.Sorted(maps.Keys(set.named)) {
		out = append(out, set.named[n])
	}
	return out
}

// Guards returns every backend's guard, in Clients order.
func (s *Backends) Guards() []*Guard {
	var out []*Guard
	for _, c := range s.Clients() {
		out = append(out, c.Guard())
	}
	return out
}

// WithTimeout returns a view of the set with each client's per-call
// timeout replaced by timeout(the client's own): see Client.WithTimeout.
// The clients share their transports, guards and coalescing with s's, and
// the view follows s's reloads.
func (s *Backends) WithTimeout(timeout func(own time.Duration) time.Duration) *Backends {
	return &Backends{parent: s, timeout: timeout}
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
