//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// TestBackendsFileReload: a changed --backends-config file is applied
// without a restart (the backend "second" moves from one Prometheus to
// another and its metric follows), and a file that does not load keeps the
// backends in service, reported in the log as a rules file is (issue 31
// item 4).
func TestBackendsFileReload(t *testing.T) {
	env := framework.New(t, framework.Config{})
	requireAdapter(t, env)
	ctx := ctxFor(t, 4*time.Minute)
	must := fatalOn(t)
	var proms []*framework.Prometheus
	for _, v := range []float64{2, 5} {
		x, addr := serveExporter(t)
		must(x.Set(exporter.Series{Name: "be_queue", Labels: map[string]string{"queue": "a"}, Value: v}))
		p := env.MustStartPrometheus(t, framework.PrometheusConfig{
			Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addr}, HonorLabels: true}},
		})
		_, err := p.WaitForQuery(ctx, fmt.Sprintf("be_queue == %g", v), 1, time.Minute)
		must(err)
		proms = append(proms, p)
	}
	backends := filepath.Join(t.TempDir(), "backends.yaml")
	write := func(url string) {
		t.Helper()
		must(os.WriteFile(backends+".tmp", []byte("backends:\n- name: second\n  url: "+url+"\n"), 0o644))
		must(os.Rename(backends+".tmp", backends))
	}
	write(proms[0].URL)
	a := env.MustStartAdapter(t, framework.AdapterConfig{
		ConfigFile: testdata("backends-config.yaml"), PrometheusURL: proms[0].URL,
		ExtraArgs: []string{"--backends-config=" + backends, "--config-reload-interval=1s"},
	})
	want := func(value string) func(context.Context) error {
		return func(ctx context.Context) error {
			got, err := externalValues(getAnswer(ctx, env, emV1beta1+"/namespaces/default/be_second_fixed"), "be_second_fixed")
			if err != nil {
				return err
			}
			return diffValues(map[string]string{"": value}, got)
		}
	}
	eventually(t, ctx, time.Minute, "be_second_fixed from the first Prometheus", want("20"))

	start := time.Now()
	write(proms[1].URL)
	eventually(t, ctx, 30*time.Second, "be_second_fixed from the second Prometheus after the file changed", want("50"))
	t.Logf("the changed backends file was in service %s after it was written (reload interval 1s, applied once two reads agree)", time.Since(start).Round(100*time.Millisecond))
	if !strings.Contains(a.Process.Tail(400), "Backends reloaded") {
		t.Error(`the adapter log does not say "Backends reloaded"`)
	}

	write("ftp://nowhere")
	eventually(t, ctx, 30*time.Second, "the bad backends file reported", func(context.Context) error {
		if tail := a.Process.Tail(400); !strings.Contains(tail, "Configuration reload failed") || !strings.Contains(tail, "backends[0].url") {
			return fmt.Errorf("no reload failure naming backends[0].url in the log")
		}
		return nil
	})
	if err := want("50")(ctx); err != nil {
		t.Errorf("after a bad backends file, the last good one should serve: %v", err)
	}
}
