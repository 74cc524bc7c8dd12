//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// debianPrometheus is the Prometheus 2.42 of Debian's package (hack/install-deps.sh).
const debianPrometheus = "/usr/bin/prometheus"

// TestPrometheusVersions runs the adapter against each Prometheus the
// project supports: the 3.x built by hack/tools.sh and, when installed,
// Debian's 2.42. The rest of the suite uses one of them (3.x by default,
// PROMSCALER_PROMETHEUS to choose); this keeps the other one working too.
func TestPrometheusVersions(t *testing.T) {
	env := framework.New(t, framework.Config{})
	requireAdapter(t, env)
	ctx := ctxFor(t, 4*time.Minute)
	x, addr := serveExporter(t)
	const ns = "promver"
	if err := env.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := x.FPM(ns, "pod-a", 3, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CreateReadyPods(ctx, ns, map[string]string{"app": "promver"}, time.Minute, time.Minute, "pod-a"); err != nil {
		t.Fatal(err)
	}
	binaries := []string{env.Tool("prometheus")}
	if _, err := os.Stat(debianPrometheus); err == nil {
		binaries = append(binaries, debianPrometheus)
	} else {
		t.Logf("%s not installed (hack/install-deps.sh): checking only %s", debianPrometheus, binaries[0])
	}
	for _, bin := range binaries {
		t.Run(bin, func(t *testing.T) {
			out, err := runVersion(ctx, bin)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", out)
			prom, err := env.StartPrometheus(ctx, framework.PrometheusConfig{
				Binary:  bin,
				Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addr}, HonorLabels: true}},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer prom.Process.Stop(10 * time.Second)
			a, err := env.StartAdapter(ctx, framework.AdapterConfig{ConfigFile: testdata("metrics-config.yaml"), PrometheusURL: prom.URL})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Stop()
			eventually(t, ctx, 60*time.Second, "fpm_active_rate of pod-a through "+bin, func(ctx context.Context) error {
				list, body, err := getJSON[cmv1beta2.MetricValueList](ctx, env, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/pods/pod-a/fpm_active_rate")
				if err != nil {
					return err
				}
				if len(list.Items) != 1 || !near(list.Items[0].Value.AsApproximateFloat64(), 0.75, 0.002) {
					return fmt.Errorf("want pod-a at 0.75, got %s", body)
				}
				return nil
			})
		})
	}
}

func runVersion(ctx context.Context, bin string) (string, error) {
	out, err := execOutput(ctx, bin, "--version")
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	first, _, _ := strings.Cut(out, "\n")
	return first, nil
}
