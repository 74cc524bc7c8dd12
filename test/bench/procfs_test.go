//go:build e2e && bench

package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux architecture Go supports).
const clockTicks = 100

// cpuSeconds returns a process's user+system CPU time so far.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading cpu time of %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces: fields count from the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parsing /proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return float64(ut+st) / clockTicks, nil
}

// cpuMeter measures a process's CPU time over a window.
type cpuMeter struct {
	pid   int
	cpu0  float64
	start time.Time
}

func startCPU(pid int) (*cpuMeter, error) {
	c, err := cpuSeconds(pid)
	if err != nil {
		return nil, err
	}
	return &cpuMeter{pid: pid, cpu0: c, start: time.Now()}, nil
}

// startCPUs starts measuring the CPU of the adapter a and of Prometheus.
func (s *stack) startCPUs(b *testing.B, a *adapterProc) (adapter, prom *cpuMeter) {
	b.Helper()
	adapter, err := startCPU(a.pid())
	if err != nil {
		b.Fatal(err)
	}
	if prom, err = startCPU(s.prom.Process.Pid()); err != nil {
		b.Fatal(err)
	}
	return adapter, prom
}

// stop returns the CPU seconds used and the wall time since start.
func (m *cpuMeter) stop() (float64, time.Duration, error) {
	c, err := cpuSeconds(m.pid)
	if err != nil {
		return 0, 0, err
	}
	return c - m.cpu0, time.Since(m.start), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
