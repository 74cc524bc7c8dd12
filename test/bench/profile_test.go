//go:build e2e && bench

package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// EnvProfile names a folder where every measured run writes the adapter's
// profiles from its /debug/pprof (the generic API server's, on by default):
// the allocations before and after the run (compare them with
// `go tool pprof -base`) and a CPU profile over the run.
const EnvProfile = "PROMSCALER_BENCH_PROFILE"

var profileRun atomic.Int64

// profiler records one run's profiles; the zero value does nothing.
type profiler struct {
	dir, prefix string
	wg          sync.WaitGroup
}

// startProfile takes the allocations profile and starts a CPU profile of
// the adapter for the run's expected length, when EnvProfile is set.
func (s *stack) startProfile(ctx context.Context, a *adapterProc, d time.Duration) *profiler {
	dir := os.Getenv(EnvProfile)
	if dir == "" {
		return &profiler{}
	}
	p := &profiler{dir: dir, prefix: fmt.Sprintf("%02d-%s", profileRun.Add(1), a.name)}
	p.fetch(ctx, s.admin, a.url+"/debug/pprof/allocs", "allocs-before.pb.gz")
	// The CPU profile answers after d: longer than the admin client's
	// timeout in a run of more than a few periods.
	long := *s.admin
	long.Timeout = d + time.Minute
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.fetch(ctx, &long, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", a.url, max(int(d.Seconds()), 1)), "cpu.pb.gz")
	}()
	return p
}

// stop waits for the CPU profile and takes the allocations profile again.
func (p *profiler) stop(ctx context.Context, s *stack, a *adapterProc) {
	if p.dir == "" {
		return
	}
	p.wg.Wait()
	p.fetch(ctx, s.admin, a.url+"/debug/pprof/allocs", "allocs-after.pb.gz")
	progress("profiles of the run: %s", filepath.Join(p.dir, p.prefix+"-*"))
}

func (p *profiler) fetch(ctx context.Context, hc *http.Client, url, name string) {
	body, code, err := framework.Get(ctx, hc, url)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("HTTP %d: %.200s", code, body)
	}
	if err == nil {
		err = os.MkdirAll(p.dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(p.dir, p.prefix+"-"+name), body, 0o644)
	}
	if err != nil {
		progress("%s: GET %s: %v", EnvProfile, url, err)
	}
}
