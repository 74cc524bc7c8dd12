//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// TestNamedBackends runs the adapter against two real Prometheus servers,
// the default backend (--prometheus-url) and "second" (--backends-config),
// both holding a series be_queue with a different value (1 and 2). Each
// rule answers from its own backend; with the second Prometheus stopped,
// its metrics answer 503, at once once its own guard marks it down, and the
// default backend's keep their values (issue 22 item 3).
func TestNamedBackends(t *testing.T) {
	env := framework.New(t, framework.Config{})
	requireAdapter(t, env)
	ctx := ctxFor(t, 4*time.Minute)
	must := fatalOn(t)
	xDefault, addrDefault := serveExporter(t)
	xSecond, addrSecond := serveExporter(t)
	must(xDefault.Set(exporter.Series{Name: "be_queue", Labels: map[string]string{"queue": "a"}, Value: 1}))
	must(xSecond.Set(exporter.Series{Name: "be_queue", Labels: map[string]string{"queue": "a"}, Value: 2}))
	promDefault := env.MustStartPrometheus(t, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addrDefault}, HonorLabels: true}},
	})
	promSecond := env.MustStartPrometheus(t, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addrSecond}, HonorLabels: true}},
	})
	_, err := promDefault.WaitForQuery(ctx, `be_queue == 1`, 1, time.Minute)
	must(err)
	_, err = promSecond.WaitForQuery(ctx, `be_queue == 2`, 1, time.Minute)
	must(err)

	backends := filepath.Join(t.TempDir(), "backends.yaml")
	must(os.WriteFile(backends, []byte(`backends:
- name: second
  url: `+promSecond.URL+`
  timeout: 5s
  headers: {X-Scope-OrgID: team-b}
  breaker_failures: 1
  breaker_open: 10m
`), 0o644))
	env.MustStartAdapter(t, framework.AdapterConfig{
		ConfigFile: testdata("backends-config.yaml"), PrometheusURL: promDefault.URL,
		ExtraArgs: []string{"--backends-config=" + backends},
	})
	path := func(metric string) string { return emV1beta1 + "/namespaces/default/" + metric }
	want := func(metric, value string) func(context.Context) error {
		return func(ctx context.Context) error {
			got, err := externalValues(getAnswer(ctx, env, path(metric)), metric)
			if err != nil {
				return err
			}
			return diffValues(map[string]string{"": value}, got)
		}
	}

	t.Run("each rule answers from its backend", func(t *testing.T) {
		eventually(t, ctx, time.Minute, "be_default_queue from the default backend", want("be_default_queue", "1"))
		eventually(t, ctx, time.Minute, "be_second_queue from the second backend", want("be_second_queue", "2"))
		eventually(t, ctx, time.Minute, "be_second_fixed from the second backend", want("be_second_fixed", "20"))
	})

	t.Run("second backend down", func(t *testing.T) {
		promSecond.Process.Stop(10 * time.Second)
		for _, m := range []string{"be_second_queue", "be_second_fixed"} {
			a := getAnswer(ctx, env, path(m))
			if err := a.wantError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable); err != nil {
				t.Errorf("%s: %v", m, err)
			}
		}
		// Its own guard (breaker_failures: 1, breaker_open: 10m, where the
		// flags say 5 and 1s): one failed request marked it down, and it is
		// not asked again; the default backend keeps the flags' guard.
		if err := getAnswer(ctx, env, path("be_second_queue")).wantError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "backend_down"); err != nil {
			t.Errorf("after a failure with breaker_failures: 1: %v", err)
		}
		// The default backend's metric keeps its value, on every request
		// for a while (relists included).
		deadline := time.Now().Add(5 * time.Second)
		for n := 0; time.Now().Before(deadline); n++ {
			if err := want("be_default_queue", "1")(ctx); err != nil {
				t.Fatalf("request %d with the second backend down: %v", n, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
}
