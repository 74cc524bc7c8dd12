package discovery_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/test/promtest"
	"github.com/promscaler/promscaler/test/ruletest"
)

// Two rules with the same seriesQuery on two backends: each backend is
// asked for its own rule only, and serves what it holds.
const backendsConfig = `
rules:
- seriesQuery: '{__name__=~"^req_.*",namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: '^req_(.*)$', as: 'default_${1}'}
- seriesQuery: '{__name__=~"^req_.*",namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: '^req_(.*)$', as: 'thanos_${1}'}
  backend: thanos
externalRules:
- seriesQuery: '{__name__="queue_length"}'
  resources: {namespaced: false}
  backend: thanos
`

func TestDiscoveryPerBackend(t *testing.T) {
	for _, strategy := range discovery.Strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			def := newProm(t, req("a"))
			thanos := newProm(t, req("b"), ls("__name__", "queue_length", "queue", "q"))
			m := metrics.New()
			d := newBackendsDiscoverer(t, strategy, m, def, thanos)
			if err := d.RunOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			// want is the index with the default backend's series req_<x>.
			want := func(x string) []string {
				return strings.Split(strings.ReplaceAll(`custom namespaces/default_X default_X <- rules[0] (series "req_X") []
custom namespaces/thanos_b thanos_b <- rules[1] (series "req_b") []
custom pods/default_X(namespaced) default_X <- rules[0] (series "req_X") [n]
custom pods/thanos_b(namespaced) thanos_b <- rules[1] (series "req_b") [n]
external queue_length <- externalRules[0] (series "queue_length") []`, "X", x), "\n")
			}
			if diff := cmp.Diff(want("a"), dump(d.Index())); diff != "" {
				t.Errorf("index (-want +got):\n%s", diff)
			}

			// The thanos backend goes down: its rules keep their last
			// good result, the default backend's are relisted.
			for _, ep := range []string{promtest.Query, promtest.Series, promtest.Labels, promtest.LabelValues} {
				thanos.Fail(ep, promtest.Failure{Status: http.StatusServiceUnavailable})
			}
			def.SetSeries([]model.LabelSet{req("c")})
			if err := d.RunOnce(context.Background()); err == nil {
				t.Fatal("no error for the backend down")
			}
			if diff := cmp.Diff(want("c"), dump(d.Index())); diff != "" {
				t.Errorf("index with thanos down (-want +got):\n%s", diff)
			}
			up := map[string]float64{
				"default": testutil.ToFloat64(m.DiscoveryBackendUp.WithLabelValues("default")),
				"thanos":  testutil.ToFloat64(m.DiscoveryBackendUp.WithLabelValues("thanos")),
			}
			if diff := cmp.Diff(map[string]float64{"default": 1, "thanos": 0}, up); diff != "" {
				t.Errorf("backend_up (-want +got):\n%s", diff)
			}
		})
	}
}

// A backend down from the start does not hold the others back: discovery
// is ready with the reachable backend's metrics, and the down one is
// pending until it answers. (With one backend, down means not ready:
// TestNotReadyUntilComplete and friends.)
func TestDiscoveryBackendDownAtStart(t *testing.T) {
	tests := []struct {
		name        string
		down        string
		wantReady   bool
		wantPending []string
	}{
		{name: "thanos down", down: "thanos", wantReady: true, wantPending: []string{"thanos"}},
		{name: "default down", down: "default", wantReady: true, wantPending: []string{"default"}},
		{name: "none down", wantReady: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers := map[string]*promtest.Server{"default": newProm(t, req("a")), "thanos": newProm(t, req("b"))}
			if s := servers[tt.down]; s != nil {
				s.Fail(promtest.LabelValues, promtest.Failure{Status: http.StatusBadGateway})
			}
			d := newBackendsDiscoverer(t, discovery.StrategyLabels, metrics.New(), servers["default"], servers["thanos"])
			_ = d.RunOnce(context.Background())
			if got := d.Ready(); got != tt.wantReady {
				t.Errorf("Ready() = %t, want %t", got, tt.wantReady)
			}
			if diff := cmp.Diff(tt.wantPending, d.Pending()); diff != "" {
				t.Errorf("Pending (-want +got):\n%s", diff)
			}
		})
	}
}

// A rule naming a backend discovery has no client for (the server refuses
// such rules at load) fails its discovery and holds readiness back: that
// is a bug, not an outage.
func TestDiscoveryUnknownBackendNotReady(t *testing.T) {
	d := newBackendsDiscoverer(t, discovery.StrategyLabels, metrics.New(), newProm(t, req("a")), nil)
	err := d.RunOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), `unknown backend "thanos"`) {
		t.Errorf("RunOnce: %v, want the unknown backend named", err)
	}
	if d.Ready() {
		t.Error("ready although rules name a backend without a client")
	}
}

// req is a series of backendsConfig's rules: req_<x> of pod p in namespace n.
func req(x string) model.LabelSet { return ls("__name__", "req_"+x, "namespace", "n", "pod", "p") }

// newBackendsDiscoverer discovers backendsConfig with def as the default
// backend and thanos (when not nil) as "thanos".
func newBackendsDiscoverer(t *testing.T, strategy discovery.Strategy, m *metrics.Metrics, def, thanos *promtest.Server) *discovery.Discoverer {
	t.Helper()
	backends := map[string]discovery.Prometheus{}
	backends[""] = newClient(t, "default", def, m)
	backends["default"] = backends[""]
	if thanos != nil {
		backends["thanos"] = newClient(t, "thanos", thanos, m)
	}
	lookup := func(name string) (discovery.Prometheus, bool) {
		p, ok := backends[name]
		return p, ok
	}
	return newDiscoverer(t, options(lookup, ruletest.Compile(t, backendsConfig), strategy, m))
}
