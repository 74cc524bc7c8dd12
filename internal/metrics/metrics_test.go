package metrics

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestNewRegistersEveryMetric(t *testing.T) {
	m := New()
	m.DiscoveryDuration.Observe(1)
	m.DiscoveredSeries.WithLabelValues(APICustom, "rules[0]").Set(3)
	m.DiscoveredMetrics.WithLabelValues(APICustom, "rules[0]").Set(2)
	m.DiscoveryFailures.WithLabelValues(APIExternal, "externalRules[1]").Inc()
	m.MetricConflicts.WithLabelValues(APICustom).Set(1)
	m.PrometheusRequestDuration.WithLabelValues(DefaultBackend, EndpointQuery, PromOutcomeSuccess).Observe(0.01)
	m.CoalescedQueries.WithLabelValues(DefaultBackend, EndpointQuery).Inc()
	m.CacheHits.WithLabelValues(DefaultBackend, EndpointQuery).Inc()
	m.APIRequests.WithLabelValues(APICustom, "200").Inc()
	m.APIRequestDuration.WithLabelValues(APICustom).Observe(0.001)
	m.ClientCertAuthentications.WithLabelValues("cached").Inc()

	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	sort.Strings(got)
	want := []string{
		"promscaler_api_answer_turn_wait_seconds",
		"promscaler_api_client_cert_authentications_total",
		"promscaler_api_request_duration_seconds",
		"promscaler_api_requests_total",
		"promscaler_build_info",
		"promscaler_config_last_reload_success_timestamp_seconds",
		"promscaler_config_last_reload_successful",
		"promscaler_config_reloads_total",
		"promscaler_discovery_duration_seconds",
		"promscaler_discovery_last_success_timestamp_seconds",
		"promscaler_discovery_metric_conflicts",
		"promscaler_discovery_metrics",
		"promscaler_discovery_refreshes_total",
		"promscaler_discovery_rule_failures_total",
		"promscaler_discovery_runs_total",
		"promscaler_discovery_series",
		"promscaler_prometheus_cache_hits_total",
		"promscaler_prometheus_coalesced_requests_total",
		"promscaler_prometheus_request_duration_seconds",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registered metrics (-want +got):\n%s", diff)
	}
}

func TestRegistriesAreIndependent(t *testing.T) {
	a, b := New(), New()
	a.ConfigReloads.WithLabelValues(OutcomeFailure).Inc()
	if got := testutil.ToFloat64(b.ConfigReloads.WithLabelValues(OutcomeFailure)); got != 0 {
		t.Errorf("second registry saw the first one's counter: %v", got)
	}
	if got := testutil.ToFloat64(a.ConfigLastReloadSuccessful); got != 1 {
		t.Errorf("ConfigLastReloadSuccessful starts at %v, want 1", got)
	}
	const wantExposition = `
# HELP promscaler_config_reloads_total Configuration reload attempts by outcome.
# TYPE promscaler_config_reloads_total counter
promscaler_config_reloads_total{outcome="failure"} 1
promscaler_config_reloads_total{outcome="success"} 0
`
	if err := testutil.GatherAndCompare(a.Registry, strings.NewReader(wantExposition), "promscaler_config_reloads_total"); err != nil {
		t.Error(err)
	}
}
