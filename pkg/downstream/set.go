package downstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/promclient"
)

// Ours says which metrics promscaler serves itself, from memory (its
// discovery index, externalQueries and team rules): a request for one of
// them is never forwarded unless the configuration routes its name to a
// downstream.
type Ours interface {
	ServesCustom(info cmprovider.CustomMetricInfo, namespace string) bool
	ServesExternal(namespace, metric string) bool
}

// OurMetrics lists the metrics promscaler serves, from memory, for the
// overlap report.
type OurMetrics func() ([]cmprovider.CustomMetricInfo, []cmprovider.ExternalMetricInfo)

// Options configure a Set.
type Options struct {
	// Path is the configuration file, re-read at every refresh (a file
	// that does not parse keeps the previous configuration in service).
	Path string
	// Base is the adapter's own client configuration: its user agent, and
	// the cluster CA for downstreams given no other. Nil outside a cluster.
	Base *rest.Config
	// Resolver reads APIServices for downstreams given by apiService.
	Resolver APIServiceResolver
	// Ours and OurMetrics are what promscaler serves itself.
	Ours       Ours
	OurMetrics OurMetrics
	// Registerer takes the downstream series of /metrics (nil: none).
	Registerer prometheus.Registerer
	// Clock times refreshes and breakers (nil: the real clock).
	Clock clock.WithTicker
}

// Set is the configured downstream metrics servers: it refreshes their
// discovery documents on an interval and answers from memory which of them
// serves a metric promscaler does not.
type Set struct {
	opts    Options
	clock   clock.WithTicker
	metrics *setMetrics

	// mu serialises refreshes, which own file, members and pending;
	// requests, /metrics and /readyz read table, published by each.
	mu      sync.Mutex
	file    *File
	members map[string]*member
	pending map[string]string // name -> why it has no client yet

	table     atomic.Pointer[table]
	refreshed atomic.Bool
}

// New loads the configuration file and returns the Set; Run starts it.
func New(opts Options) (*Set, error) {
	f, err := LoadFile(opts.Path)
	if err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Ours == nil {
		return nil, errors.New("downstream: Options.Ours is required")
	}
	s := &Set{opts: opts, clock: opts.Clock, file: f, members: map[string]*member{}, pending: map[string]string{}}
	s.metrics = newSetMetrics(s)
	if opts.Registerer != nil {
		if err := s.metrics.register(opts.Registerer); err != nil {
			return nil, err
		}
	}
	s.table.Store(&table{file: f})
	return s, nil
}

// File returns the configuration in service.
func (s *Set) File() *File { return s.table.Load().file }

// Run refreshes at once, then every RefreshInterval, until ctx is done.
func (s *Set) Run(ctx context.Context) {
	s.Refresh(ctx)
	for {
		t := s.clock.NewTimer(s.File().RefreshInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
			s.Refresh(ctx)
		}
	}
}

// Refresh re-reads the file, resolves APIServices, fetches every
// downstream's discovery documents (concurrently, each within its
// timeout) and publishes the routing table.
func (s *Set) Refresh(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reload()
	s.applyFile(ctx)
	var wg sync.WaitGroup
	for _, m := range s.members {
		wg.Go(func() { m.discover(ctx, s.clock) })
	}
	wg.Wait()
	t := buildTable(s.file, s.members)
	t.pending = maps.Clone(s.pending)
	if s.opts.OurMetrics != nil {
		custom, external := s.opts.OurMetrics()
		t.overlaps = findOverlaps(t, custom, external)
		logNewOverlaps(s.table.Load().overlaps, t.overlaps)
	}
	s.table.Store(t)
	s.refreshed.Store(true)
}

// Refreshed reports whether the first refresh is done: until then no
// metric is forwarded, and the adapter is not ready (Ready).
func (s *Set) Refreshed() bool { return s.refreshed.Load() }

// Ready is the readiness of the downstream routing: nil once the first
// refresh is done, whether or not the downstreams answered it (a
// downstream that is down makes its own metrics 503, not promscaler
// unready).
func (s *Set) Ready() error {
	if !s.Refreshed() {
		return errors.New("the downstreams' discovery documents are not fetched yet")
	}
	return nil
}

// reload re-reads the file, keeping the one in service if it fails.
func (s *Set) reload() {
	f, err := LoadFile(s.opts.Path)
	if err != nil {
		klog.ErrorS(err, "Downstream configuration not reloaded; the previous one stays in service", "file", s.opts.Path)
		s.metrics.reloadFailures.Inc()
		return
	}
	s.file = f
}

// applyFile builds the members the file lists, keeping those whose
// settings and target did not change (and their breaker state).
func (s *Set) applyFile(ctx context.Context) {
	next := make(map[string]*member, len(s.file.Downstreams))
	clear(s.pending)
	for _, cfg := range s.file.Downstreams {
		old := s.members[cfg.Name]
		t, err := s.target(ctx, cfg, old)
		if err != nil {
			s.pending[cfg.Name] = err.Error()
			if old != nil {
				next[cfg.Name] = old
			}
			klog.ErrorS(err, "Downstream not resolved", "downstream", cfg.Name)
			continue
		}
		if old != nil && sameServer(old.cfg, cfg) && reflect.DeepEqual(old.target, t) {
			next[cfg.Name] = old
			continue
		}
		m, err := newMember(cfg, t, s.opts.Base, s.clock)
		if err != nil {
			s.pending[cfg.Name] = err.Error()
			continue
		}
		if old != nil {
			m.found = old.discovered()
			klog.InfoS("Downstream reconfigured", "downstream", cfg.Name, "host", t.Host)
		}
		next[cfg.Name] = m
	}
	s.members = next
}

// sameServer compares two entries, ignoring where they are in the file.
func sameServer(a, b Server) bool {
	a.Line, b.Line = 0, 0
	return reflect.DeepEqual(a, b)
}

// target is where cfg answers. An APIService is followed while it keeps
// pointing at the same Service (its caBundle may rotate); once it points
// elsewhere - at promscaler, after the hand-over - the last target stays.
func (s *Set) target(ctx context.Context, cfg Server, old *member) (Target, error) {
	switch {
	case cfg.URL != "":
		return Target{Host: cfg.URL}, nil
	case cfg.Service != nil:
		return Target{Host: "https://" + cfg.Service.Host() + ":" + strconv.Itoa(cfg.Service.Port), ServerName: cfg.Service.Host()}, nil
	}
	if s.opts.Resolver == nil {
		return Target{}, fmt.Errorf("downstream %s: apiService %s cannot be read: the adapter has no Kubernetes client", cfg.Name, cfg.APIService)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	t, err := s.opts.Resolver.Resolve(ctx, cfg.APIService)
	if err != nil {
		return Target{}, fmt.Errorf("downstream %s: %w", cfg.Name, err)
	}
	if old != nil && old.cfg.APIService == cfg.APIService && old.target.Host != t.Host {
		if !old.retargeted {
			klog.InfoS("APIService now sends its requests elsewhere; the downstream keeps the Service and CA it had",
				"downstream", cfg.Name, "apiService", cfg.APIService, "kept", old.target.Host, "apiServiceHost", t.Host)
			old.retargeted = true
		}
		return old.target, nil
	}
	return t, nil
}

// Status is every downstream's state, in the file's order.
func (s *Set) Status() []Status {
	t := s.table.Load()
	var out []Status
	for _, cfg := range t.file.Downstreams {
		if m := t.member(cfg.Name); m != nil {
			st := m.status()
			if why, ok := t.pending[cfg.Name]; ok {
				st.DiscoveryError = why
			}
			out = append(out, st)
			continue
		}
		why, ok := t.pending[cfg.Name]
		if !ok {
			why = "not refreshed yet"
		}
		out = append(out, Status{Name: cfg.Name, Guard: guardDown(cfg.Name), DiscoveryError: why})
	}
	return out
}

// Details are the lines of /readyz?verbose: one per downstream. A
// downstream never makes promscaler unready: its metrics answer 503, ours
// are served.
func (s *Set) Details() []string {
	var lines []string
	for _, st := range s.Status() {
		lines = append(lines, st.String())
	}
	return lines
}

// Overlaps are the metric names both promscaler and a downstream serve,
// as of the last refresh.
func (s *Set) Overlaps() []Overlap { return slices.Clone(s.table.Load().overlaps) }

// guardDown is the guard status of a downstream without a client.
func guardDown(name string) promclient.GuardStatus {
	return promclient.GuardStatus{Backend: "downstream/" + name, LastError: "not resolved"}
}
