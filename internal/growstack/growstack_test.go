package growstack

import (
	"runtime/debug"
	"testing"
	"unsafe"
)

// deep uses about n*600 bytes of stack.
//
//go:noinline
func deep(n int) byte {
	var pad [512]byte
	pad[n%len(pad)] = byte(n)
	if n <= 0 {
		return pad[0]
	}
	return deep(n-1) + pad[(n*7)%len(pad)]
}

// moved reports whether the goroutine's stack was copied (a local variable
// of its first frame changed address) while grow and then a call using use
// bytes of stack ran, on a new goroutine.
func moved(grow func(), use int) (copiedByGrow, copiedAfter bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var x int
		before := uintptr(unsafe.Pointer(&x))
		grow()
		grown := uintptr(unsafe.Pointer(&x))
		deep(use / 600)
		after := uintptr(unsafe.Pointer(&x))
		copiedByGrow, copiedAfter = grown != before, after != grown
	}()
	<-done
	return copiedByGrow, copiedAfter
}

func TestGrowMakesRoomOnce(t *testing.T) {
	// A collection may shrink a stack; none runs during the test.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	tests := []struct {
		name string
		grow func()
		use  int
	}{
		{name: "12K", grow: Grow12K, use: 10 << 10},
		{name: "24K", grow: Grow24K, use: 22 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Without growing first, the same call must copy the stack
			// (it starts smaller), or the test could not tell.
			if _, copied := moved(func() {}, tt.use); !copied {
				t.Skipf("a new goroutine's stack already holds %d bytes: nothing to tell", tt.use)
			}
			byGrow, after := moved(tt.grow, tt.use)
			if !byGrow {
				t.Errorf("Grow%s did not grow a new goroutine's stack", tt.name)
			}
			if after {
				t.Errorf("the stack was copied again for a call using %d bytes after Grow%s", tt.use, tt.name)
			}
		})
	}
}

// BenchmarkDeepRequest is a request's shape: a new goroutine going ~20 KiB
// deep, with and without making the room first.
func BenchmarkDeepRequest(b *testing.B) {
	for _, bc := range []struct {
		name string
		grow func()
	}{{"no-grow", func() {}}, {"grow24K", Grow24K}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			done := make(chan struct{})
			for b.Loop() {
				go func() {
					bc.grow()
					deep(34)
					done <- struct{}{}
				}()
				<-done
			}
		})
	}
}
