package promclient

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/internal/metrics"
)

// Two clients on one registry record their requests under their own
// backend label; a client built without a name is the default backend.
func TestClientMetricsCarryBackend(t *testing.T) {
	up := newFakeProm(t, nil)
	down := newFakeProm(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	})
	m := metrics.New()
	def := newTestClient(t, Config{Address: up.srv.URL, Metrics: m})
	mimir := newTestClient(t, Config{Backend: "mimir", Address: down.srv.URL, Metrics: m})
	if def.Backend() != DefaultBackendName || mimir.Backend() != "mimir" {
		t.Fatalf("Backend() = %q, %q", def.Backend(), mimir.Backend())
	}
	ctx := context.Background()
	if _, err := def.Query(ctx, "up", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mimir.Query(ctx, "up", time.Time{}); !IsUnavailable(err) {
		t.Fatalf("mimir: err = %v, want unavailable", err)
	}

	got := map[string]uint64{}
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "promscaler_prometheus_request_duration_seconds" {
			continue
		}
		for _, mm := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range mm.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			got[l["backend"]+" "+l["endpoint"]+" "+l["outcome"]] = mm.GetHistogram().GetSampleCount()
		}
	}
	want := map[string]uint64{
		"default query success":    1,
		"mimir query server_error": 1,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("request metrics (-want +got):\n%s", d)
	}
}
