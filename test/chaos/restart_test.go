//go:build e2e && chaos

package chaos

import (
	"context"
	"github.com/promscaler/promscaler/test/e2e/framework"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// promPid is the running Prometheus (the framework's, or the suite's restart).
func (s *stack) promPid() int {
	if s.promProc != nil {
		return s.promProc.Pid()
	}
	return s.prom.Process.Pid()
}

func (s *stack) killPrometheus(t *testing.T) {
	t.Helper()
	if s.promProc != nil {
		_ = syscall.Kill(-s.promProc.Pid(), syscall.SIGKILL)
		<-s.promProc.Done()
		return
	}
	_ = syscall.Kill(-s.prom.Process.Pid(), syscall.SIGKILL)
	<-s.prom.Process.Done()
}

// restartPrometheus starts Prometheus again with its first argv (same port,
// same TSDB) and returns how long it took to be ready.
func (s *stack) restartPrometheus(t *testing.T, ctx context.Context) time.Duration {
	t.Helper()
	t0 := time.Now()
	s.promRestarts++
	s.promProc = startProc(t, s.env, "prometheus-restart-"+strconv.Itoa(s.promRestarts), s.prom.Process.Args)
	if err := waitHTTP(ctx, http.DefaultClient, s.prom.URL+"/-/ready", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return time.Since(t0)
}

// restartAPIServer stops kube-apiserver (SIGTERM, as a rolling update
// would), starts it again with the same argv and waits for /readyz; it
// returns how long the API was down.
func (s *stack) restartAPIServer(t *testing.T, ctx context.Context) time.Duration {
	t.Helper()
	args := s.apiArgs
	if s.apiProc != nil {
		s.apiProc.Stop(30 * time.Second)
	} else {
		p := findProcess(s.env, "kube-apiserver")
		if p == nil {
			t.Fatal("no kube-apiserver process")
		}
		args = p.Args
		s.apiArgs = args
		p.Stop(30 * time.Second)
	}
	down := time.Now()
	s.apiRestarts++
	s.apiProc = startProc(t, s.env, "kube-apiserver-restart-"+strconv.Itoa(s.apiRestarts), args)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var code int
		s.env.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
		if code == http.StatusOK {
			return time.Since(down)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("kube-apiserver not ready 2 minutes after its restart:\n%s", s.apiProc.Tail(30))
	return 0
}

// reloadNote reports the adapter's reload counters from its /metrics.
func (s *stack) reloadNote(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, _, err := framework.Get(ctx, s.direct, s.adapter.URL+"/metrics")
	if err != nil {
		return "reload metrics: " + err.Error()
	}
	var parts []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "promscaler_config_reloads_total") || strings.HasPrefix(line, "promscaler_config_last_reload_successful") {
			parts = append(parts, "`"+line+"`")
		}
	}
	return strings.Join(parts, ", ")
}

// metricsNote quotes the adapter's /metrics lines of the named families.
func (s *stack) metricsNote(ctx context.Context, families ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, _, err := framework.Get(ctx, s.direct, s.adapter.URL+"/metrics")
	if err != nil {
		return "metrics: " + err.Error()
	}
	var parts []string
	for _, line := range strings.Split(string(body), "\n") {
		for _, f := range families {
			if strings.HasPrefix(line, f) {
				parts = append(parts, "`"+line+"`")
			}
		}
	}
	return strings.Join(parts, ", ")
}
