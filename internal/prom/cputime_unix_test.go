//go:build unix

package prom

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) the process used so far:
// benchmarks report it per operation because wall time on a shared,
// loaded machine mostly measures waiting for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
