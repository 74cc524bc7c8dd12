//go:build unix

package autoscaler

import (
	"syscall"
	"time"
)

// processCPUTime is the user+system CPU time the process has used, so a
// benchmark can report CPU cost apart from wall time on a busy machine.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
