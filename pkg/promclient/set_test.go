package promclient

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/internal/metrics"
)

func TestBackendsLookup(t *testing.T) {
	s := newBackendSet(t, []Backend{
		{URL: "http://prometheus:9090", Timeout: 3 * time.Second},
		{Name: "thanos", URL: "http://thanos:10902", Timeout: DefaultTimeout},
		{Name: "amp", URL: "http://amp:8080", Timeout: 20 * time.Second},
	})
	if diff := cmp.Diff([]string{"amp", "thanos"}, s.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	for _, name := range []string{"", DefaultBackendName} {
		if c, ok := s.Lookup(name); !ok || c != s.Default() {
			t.Errorf("Lookup(%q) = %v, %v, want the default client", name, c, ok)
		}
	}
	if c, ok := s.Lookup("thanos"); !ok || c.Backend() != "thanos" {
		t.Errorf("Lookup(thanos) = %v, %v", c, ok)
	}
	if _, ok := s.Lookup("mimir"); ok {
		t.Error("Lookup(mimir) found a backend the set does not have")
	}
	if got := len(s.Guards()); got != 3 {
		t.Errorf("%d guards, want one per backend", got)
	}
	// A derived set: each client's timeout from its own, the set unchanged.
	long := s.WithTimeout(func(own time.Duration) time.Duration { return 2 * own })
	var got []time.Duration
	for _, c := range long.Clients() {
		got = append(got, c.Timeout())
	}
	if diff := cmp.Diff([]time.Duration{6 * time.Second, 40 * time.Second, 2 * DefaultTimeout}, got); diff != "" {
		t.Errorf("derived timeouts, default then by name (-want +got):\n%s", diff)
	}
	if s.Default().Timeout() != 3*time.Second {
		t.Errorf("the set's own default timeout changed to %v", s.Default().Timeout())
	}
	q := LookupAs[SampleQuerier](s)
	if _, ok := q("amp"); !ok {
		t.Error("LookupAs(amp) not found")
	}
	if v, ok := q("nope"); ok || v != nil {
		t.Errorf("LookupAs(nope) = %v, %v, want nil, false", v, ok)
	}
}

func TestNewBackendsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		backends []Backend
		want     string
	}{
		{"none", nil, "no default backend"},
		{"default named again", []Backend{{URL: "http://a", Timeout: DefaultTimeout}, {Name: "default", URL: "http://b", Timeout: DefaultTimeout}}, `backend "default": the default backend's name is reserved`},
		{"twice", []Backend{{URL: "http://a", Timeout: DefaultTimeout}, {Name: "x", URL: "http://b", Timeout: DefaultTimeout}, {Name: "x", URL: "http://c", Timeout: DefaultTimeout}}, `backend "x": defined twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewBackends(tc.backends, metrics.New(), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSingle(t *testing.T) {
	one := Single[string]("only")
	if v, ok := one(""); !ok || v != "only" {
		t.Errorf(`Single("") = %q, %v`, v, ok)
	}
	if v, ok := one(DefaultBackendName); !ok || v != "only" {
		t.Errorf("Single(default) = %q, %v", v, ok)
	}
	if _, ok := one("thanos"); ok {
		t.Error("Single answered for a named backend")
	}
}
