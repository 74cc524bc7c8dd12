//go:build unix

package cputime

import (
	"testing"
	"time"
)

func TestProcessGrowsWithWork(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %v before any work, want > 0 (the test binary has already run)", before)
	}
	// Spin until the clock-independent CPU counter moves.
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for Process() <= before && time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x += i
		}
	}
	if after := Process(); after <= before {
		t.Fatalf("Process() did not grow after 5 s of work: %v -> %v (x=%d)", before, after, x)
	}
}
