package promclient

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
	for _, l := range [][]string{
		{"default", "query", "success"}, {"default", "query", "server_error"},
		{"mimir", "query", "success"}, {"mimir", "query", "server_error"},
	} {
		var d dto.Metric
		if err := m.PrometheusRequestDuration.WithLabelValues(l...).(prometheus.Metric).Write(&d); err != nil {
			t.Fatal(err)
		}
		if n := d.GetHistogram().GetSampleCount(); n > 0 {
			got[strings.Join(l, " ")] = n
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
