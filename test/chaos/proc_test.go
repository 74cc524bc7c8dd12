//go:build e2e && chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// proc is a process the suite (re)started itself, with the argv of one the
// framework started first.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// startProc runs args (binary first) with its output in the environment's
// log dir; the cleanup of owner (the test that owns the environment, not a
// fault's subtest) stops it.
func startProc(t *testing.T, owner testing.TB, env *framework.Env, name string, args []string) *proc {
	t.Helper()
	logFile, err := os.Create(filepath.Join(env.LogDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(p.done) }()
	owner.Cleanup(func() { p.stop(10 * time.Second) })
	return p
}

func (p *proc) stop(grace time.Duration) {
	_ = syscall.Kill(-p.pid(), syscall.SIGCONT)
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
}

// waitHTTP polls url until it answers 200 (hc may carry credentials).
func waitHTTP(ctx context.Context, hc *http.Client, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, code, err := get(ctx, hc, url)
		cancel()
		if err == nil && code == http.StatusOK {
			return nil
		}
		last = fmt.Sprint(code, err)
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not 200 within %v (last: %s)", url, timeout, last)
}

func findProcess(env *framework.Env, name string) *framework.Process {
	var found *framework.Process
	for _, p := range env.Processes() {
		if p.Name == name {
			found = p
		}
	}
	return found
}
