package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// live tracks the environments of this process so an interrupt (Ctrl-C on
// `go test`, SIGTERM from a timeout) stops their processes before exiting.
var live = struct {
	sync.Mutex
	envs map[*Env]bool
	once sync.Once
}{envs: map[*Env]bool{}}

// StopOnSignal makes SIGINT/SIGTERM close every environment of this process
// and exit with status 130. New installs it; programs may call it too.
func StopOnSignal() {
	live.once.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			sig := <-ch
			fmt.Fprintf(os.Stderr, "promscaler e2e: %v: stopping the environment\n", sig)
			live.Lock()
			envs := make([]*Env, 0, len(live.envs))
			for e := range live.envs {
				envs = append(envs, e)
			}
			live.Unlock()
			for _, e := range envs {
				e.Close()
			}
			os.Exit(130)
		}()
	})
}

func track(e *Env) {
	live.Lock()
	live.envs[e] = true
	live.Unlock()
	e.OnClose(func() {
		live.Lock()
		delete(live.envs, e)
		live.Unlock()
	})
}

// New starts an environment for a test (see Start) and registers its
// teardown: when the test has failed, the last lines of every process log
// are printed first; then every process is stopped and the working
// directory removed (kept with PROMSCALER_E2E_KEEP=1).
func New(t testing.TB, cfg Config) *Env {
	t.Helper()
	StopOnSignal()
	if cfg.Logf == nil {
		cfg.Logf = func(format string, args ...any) { t.Logf(format, args...) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("starting the e2e environment: %v", err)
	}
	track(e)
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			e.DumpLogs(&b, 40)
			t.Logf("process logs (dir %s):\n%s", e.Dir, b.String())
		}
		e.Close()
	})
	return e
}

// MustStartAdapter is StartAdapter for tests: it skips the test when the
// adapter binary says its server is not implemented, and fails it on any
// other error.
func (e *Env) MustStartAdapter(t testing.TB, cfg AdapterConfig) *Adapter {
	t.Helper()
	return mustStart(t, "the adapter", func(ctx context.Context) (*Adapter, error) {
		a, err := e.StartAdapter(ctx, cfg)
		if errors.Is(err, ErrNotImplemented) {
			t.Skip("adapter serve not implemented (the adapter binary says so)")
		}
		return a, err
	})
}

// MustStartPrometheus is StartPrometheus for tests.
func (e *Env) MustStartPrometheus(t testing.TB, cfg PrometheusConfig) *Prometheus {
	t.Helper()
	return mustStart(t, "prometheus", func(ctx context.Context) (*Prometheus, error) { return e.StartPrometheus(ctx, cfg) })
}

// MustStartControllerManager is StartControllerManager for tests.
func (e *Env) MustStartControllerManager(t testing.TB, cfg ControllerManagerConfig) *Process {
	t.Helper()
	return mustStart(t, "kube-controller-manager", func(ctx context.Context) (*Process, error) { return e.StartControllerManager(ctx, cfg) })
}

// mustStart runs start with two minutes to go and fails the test when it
// fails to start what.
func mustStart[T any](t testing.TB, what string, start func(context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v, err := start(ctx)
	if err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	return v
}
