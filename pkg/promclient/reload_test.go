package promclient

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/internal/metrics"
)

// A reload keeps the client (and guard) of each unchanged backend, builds
// the changed and added ones, drops the removed ones, and its derived
// views follow; a reload that cannot be built changes nothing.
func TestBackendsReload(t *testing.T) {
	s := newBackendSet(t, []Backend{
		{URL: "http://prometheus:9090", Timeout: DefaultTimeout},
		{Name: "thanos", URL: "http://thanos:10902", Timeout: DefaultTimeout},
		{Name: "vm", URL: "http://vm:8428", Timeout: DefaultTimeout},
		{Name: "old", URL: "http://old:9090", Timeout: DefaultTimeout},
	})
	def, thanos, vm := s.Default(), lookup(t, s, "thanos"), lookup(t, s, "vm")
	view := s.WithTimeout(func(own time.Duration) time.Duration { return 3 * own })

	added, changed, removed, err := s.Reload([]Backend{
		{Name: "thanos", URL: "http://thanos:10902", Timeout: DefaultTimeout},
		{Name: "vm", URL: "http://vm:8428", Timeout: 20 * time.Second},
		{Name: "mimir", URL: "http://mimir:8080", Timeout: DefaultTimeout},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([][]string{{"mimir"}, {"vm"}, {"old"}}, [][]string{added, changed, removed}); d != "" {
		t.Errorf("added, changed, removed (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"mimir", "thanos", "vm"}, s.Names()); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
	if s.Default() != def || lookup(t, s, "thanos") != thanos || lookup(t, s, "thanos").Guard() != thanos.Guard() {
		t.Error("the default or the unchanged backend got a new client")
	}
	if c := lookup(t, s, "vm"); c == vm || c.Timeout() != 20*time.Second {
		t.Errorf("the changed backend kept its client (timeout %v)", c.Timeout())
	}
	if _, ok := s.Lookup("old"); ok {
		t.Error("the removed backend is still looked up")
	}
	if c, ok := view.Lookup("mimir"); !ok || c.Timeout() != 3*DefaultTimeout {
		t.Errorf("the derived view does not follow the reload: %v %v", c, ok)
	}

	// Refused: the set in service stays.
	if _, _, _, err := s.Reload([]Backend{{Name: "a", URL: "http://a:1", Timeout: DefaultTimeout}, {Name: "a", URL: "http://a:2", Timeout: DefaultTimeout}}); err == nil {
		t.Fatal("a reload defining a backend twice was accepted")
	}
	if d := cmp.Diff([]string{"mimir", "thanos", "vm"}, s.Names()); d != "" {
		t.Errorf("names after a refused reload (-want +got):\n%s", d)
	}
	if _, _, _, err := view.Reload(nil); err == nil {
		t.Error("a derived view reloaded")
	}
}

// Lookups during reloads read one whole set or the other (run with -race).
func TestBackendsReloadConcurrentLookups(t *testing.T) {
	s := newBackendSet(t, []Backend{{URL: "http://prometheus:9090", Timeout: DefaultTimeout}, {Name: "a", URL: "http://a:9090", Timeout: DefaultTimeout}})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, ok := s.Lookup("a"); !ok {
					t.Error("backend a missing during reloads that all keep it")
					return
				}
				_ = s.Clients()
			}
		})
	}
	for i := range 50 {
		if _, _, _, err := s.Reload([]Backend{{Name: "a", URL: "http://a:9090", Timeout: time.Duration(i+1) * time.Second}}); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}

// newBackendSet builds the set of backends (the first the default) or fails t.
func newBackendSet(t *testing.T, backends []Backend) *Backends {
	t.Helper()
	s, err := NewBackends(backends, metrics.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func lookup(t *testing.T, s *Backends, name string) *Client {
	t.Helper()
	c, ok := s.Lookup(name)
	if !ok {
		t.Fatalf("backend %s not found", name)
	}
	return c
}
