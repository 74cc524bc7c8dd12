//go:build e2e

// Package e2e holds the end-to-end tests: real etcd, kube-apiserver,
// Prometheus, the promscaler adapter and kube-controller-manager, started by
// the framework package. Run with `make e2e` (build tag e2e).
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// ctxFor returns a context that ends at the test's deadline (minus a margin
// for cleanup) or after max, whichever is first.
func ctxFor(t *testing.T, max time.Duration) context.Context {
	t.Helper()
	deadline := time.Now().Add(max)
	if d, ok := t.Deadline(); ok && d.Add(-30*time.Second).Before(deadline) {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// serveExporter serves a fresh test exporter on 127.0.0.1 for the test's duration.
func serveExporter(t *testing.T) (*exporter.Exporter, string) {
	t.Helper()
	x := exporter.New(nil)
	addr, stop, err := x.Serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return x, addr
}

// startStack starts the control plane, the exporter and Prometheus scraping it.
func startStack(t *testing.T) (*framework.Env, *exporter.Exporter, *framework.Prometheus) {
	t.Helper()
	env := framework.New(t, framework.Config{})
	x, addr := serveExporter(t)
	prom := env.MustStartPrometheus(t, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addr}, HonorLabels: true}},
	})
	return env, x, prom
}

// requireAdapter skips the test, visibly, when the adapter binary says its
// server is not implemented yet; a missing binary fails the test.
func requireAdapter(t *testing.T, env *framework.Env) {
	t.Helper()
	if _, err := os.Stat(env.Bin("adapter")); err != nil {
		t.Fatalf("adapter binary: %v (run `make build`)", err)
	}
	if ok, msg := env.AdapterImplemented(context.Background()); !ok {
		t.Skipf("adapter serve not implemented (adapter says: %s)", msg)
	}
}

func testdata(name string) string {
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return p
}

// fatalOn returns a function that fails the test on a non-nil error.
func fatalOn(t *testing.T) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// execOutput runs a short command and returns its combined output.
func execOutput(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}
