//go:build e2e && chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// startProc runs argv (binary first) as a process of env (stopped when env
// closes); a failure fails the test.
func startProc(t *testing.T, env *framework.Env, name string, argv []string) *framework.Process {
	t.Helper()
	p, err := env.StartCommand(name, argv)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// exitCode is a process's exit status once it has ended (-1 otherwise).
func exitCode(p *framework.Process) int {
	ended, err := p.Exited()
	if !ended {
		return -1
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// waitHTTP polls url until it answers 200 (hc may carry credentials).
func waitHTTP(ctx context.Context, hc *http.Client, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, code, err := framework.Get(ctx, hc, url)
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
