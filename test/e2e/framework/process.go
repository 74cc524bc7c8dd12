package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one child process of the environment: its command line, its
// log file (stdout and stderr together) and its exit status.
type Process struct {
	// Name identifies the process in logs and messages (etcd, kube-apiserver, ...).
	Name string
	// LogFile holds everything the process wrote.
	LogFile string
	// Args is the full command line, binary first.
	Args []string

	cmd     *exec.Cmd
	logf    *os.File
	done    chan struct{}
	waitErr error
	stopped sync.Once
}

// startProcess starts bin with args, writing its output to logFile. The child
// gets its own process group (so stopping it also stops anything it forked)
// and dies with the harness process (Pdeathsig) if the harness is killed.
func startProcess(name, logFile, bin string, args []string, env []string) (*Process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("starting %s: binary %s: %w (run `make tools build`)", name, bin, err)
	}
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: log file: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, LogFile: logFile, Args: append([]string{bin}, args...), cmd: cmd, logf: f, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs
// it. It is safe to call more than once.
func (p *Process) Stop(grace time.Duration) {
	p.stopped.Do(func() {
		pgid := -p.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.done
		}
		// Anything the process forked and left behind in its group.
		_ = syscall.Kill(pgid, syscall.SIGKILL)
	})
}

// Tail returns the last n lines of the process log.
func (p *Process) Tail(n int) string {
	return tailFile(p.LogFile, n)
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// exitError describes a process that ended while the harness waited for it.
func (p *Process) exitError() error {
	if ok, err := p.Exited(); ok {
		return fmt.Errorf("%s exited (%v); last log lines:\n%s", p.Name, err, p.Tail(30))
	}
	return nil
}

// ErrNotImplemented marks a binary that says it does not implement what was asked.
var ErrNotImplemented = errors.New("not implemented")

// portAllocator hands out free loopback ports, never the same one twice in
// this process (the kernel may otherwise return a port just released).
type portAllocator struct {
	mu   sync.Mutex
	used map[int]bool
}

var ports = &portAllocator{used: map[int]bool{}}

// FreePort returns a currently free TCP port on 127.0.0.1.
func FreePort() (int, error) { return ports.get() }

func (a *portAllocator) get() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !a.used[port] {
			a.used[port] = true
			return port, nil
		}
	}
	return 0, errors.New("finding a free port: no unused port after 50 tries")
}

// logMentions reports whether the log of p contains s.
func (p *Process) logMentions(s string) bool {
	data, err := os.ReadFile(p.LogFile)
	return err == nil && strings.Contains(string(data), s)
}

// runCapture runs a short command and returns its combined output.
func runCapture(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

// retryPortClash runs start up to three times while it fails because a port
// it was given was taken in the meantime (by another process on the machine
// between FreePort and the child's bind).
func retryPortClash[T any](start func() (T, error)) (T, error) {
	var v T
	var err error
	for range 3 {
		if v, err = start(); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return v, err
		}
	}
	return v, err
}
