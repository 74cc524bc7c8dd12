// Package gcfloor keeps the Go heap goal above a floor.
//
// With the runtime's default GOGC=100 the collector starts a cycle when the
// heap has grown by as much as was live after the previous one. A server
// whose live heap is small but which allocates quickly per request (the
// adapter: ~15 MiB live while serving hundreds of requests a second)
// therefore collects several times a second, and every request that
// overlaps a mark phase pays write barriers, mark assists and a processor
// taken by the mark worker: the requests in the latency tail. Go has no
// "minimum heap" setting, so after each collection the Tuner raises GOGC
// just enough that the next goal is at least the floor, and never sets it
// below the GOGC the process started with. A memory limit (GOMEMLIMIT or
// debug.SetMemoryLimit) still applies: the runtime collects earlier near it,
// whatever GOGC says, and the floor is kept at no more than half the limit.
//
// When the live heap grows past half the floor the Tuner is back at the base
// GOGC: the floor costs at most floor bytes of memory, and only while the
// heap is small.
package gcfloor

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// DefaultFloor is the adapter's default heap goal floor.
const DefaultFloor = 128 << 20

// maxPercent bounds the GOGC the Tuner sets for a tiny live heap.
const maxPercent = 100_000

// Runtime is what the Tuner reads from and sets in the Go runtime; tests
// replace it.
type Runtime interface {
	// Heap returns the live heap after the last collection and the stack and
	// global bytes that count toward the heap goal.
	Heap() (live, roots uint64)
	// SetGCPercent sets GOGC and returns the previous value.
	SetGCPercent(percent int) int
	// MemoryLimit returns the current memory limit (math.MaxInt64 when none).
	MemoryLimit() int64
}

// Percent returns the GOGC that puts the heap goal at floor or above for a
// live heap of live bytes plus roots bytes of stacks and globals, never below
// base. The runtime's goal is live + (live + roots) * GOGC / 100.
func Percent(floor, live, roots uint64, base int) int {
	scan := live + roots
	if scan == 0 || live >= floor {
		return base
	}
	if floor-live > (math.MaxUint64-scan)/100 {
		// A floor in the exabytes: as high as GOGC goes.
		return max(maxPercent, base)
	}
	// Round up so that the goal is not a byte short of the floor.
	p := ((floor-live)*100 + scan - 1) / scan
	if p > maxPercent {
		p = maxPercent
	}
	if int(p) < base {
		return base
	}
	return int(p)
}

// BaseFromEnv returns the GOGC the process was started with and whether the
// operator set it: the GOGC environment variable, 100 when unset, and -1 for
// "off" (the Tuner then stays off).
func BaseFromEnv(getenv func(string) string) (base int, set bool) {
	v := strings.TrimSpace(getenv("GOGC"))
	if v == "" {
		return 100, false
	}
	if strings.EqualFold(v, "off") {
		return -1, true
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		// The runtime treats an unparsable GOGC as 100.
		return 100, true
	}
	return n, true
}

// Tuner adjusts GOGC after every collection.
type Tuner struct {
	floor   uint64
	base    int
	rt      Runtime
	stopped atomic.Bool

	mu      sync.Mutex
	percent int // last set
	tunes   int // collections seen
}

// New returns a Tuner keeping the heap goal at or above floor bytes, never
// below base GOGC. It does nothing until Start.
func New(floor uint64, base int, rt Runtime) *Tuner {
	if rt == nil {
		rt = goRuntime{}
	}
	return &Tuner{floor: floor, base: base, rt: rt, percent: base}
}

// Start tunes now and then after every collection until Stop. It returns
// false, doing nothing, when the floor is 0 or GOGC is off.
func (t *Tuner) Start() bool {
	if t.floor == 0 || t.base < 0 {
		return false
	}
	t.Tune()
	arm(t)
	return true
}

// Stop stops tuning and restores the base GOGC.
func (t *Tuner) Stop() {
	if t.stopped.Swap(true) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rt.SetGCPercent(t.base)
	t.percent = t.base
}

// Tune sets GOGC for the live heap of the last collection and returns it.
func (t *Tuner) Tune() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return t.percent
	}
	floor := t.floor
	if limit := t.rt.MemoryLimit(); limit > 0 && limit < math.MaxInt64 && uint64(limit)/2 < floor {
		floor = uint64(limit) / 2
	}
	live, roots := t.rt.Heap()
	p := Percent(floor, live, roots, t.base)
	t.tunes++
	if p != t.percent {
		t.rt.SetGCPercent(p)
		klog.V(5).InfoS("Heap goal floor: GOGC set", "gogc", p, "liveBytes", live, "floorBytes", floor)
		t.percent = p
	}
	return p
}

// Percent returns the GOGC last set.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// Collections returns how many times the Tuner ran (once at Start, then
// once per collection).
func (t *Tuner) Collections() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tunes
}

// sentinel is garbage on purpose: its finalizer runs after the collection
// that found it unreachable, tunes, and arms a new one for the next cycle.
type sentinel struct{ _ [16]byte }

func arm(t *Tuner) {
	s := &sentinel{}
	runtime.SetFinalizer(s, func(*sentinel) {
		if t.stopped.Load() {
			return
		}
		t.Tune()
		arm(t)
	})
}

// goRuntime is the real runtime.
type goRuntime struct{}

// heapSamples are the live heap and the roots (stacks and globals), which
// count toward the heap goal since Go 1.18.
var heapSamples = []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

func (goRuntime) Heap() (live, roots uint64) {
	s := make([]metrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	vals := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			vals[i] = s[i].Value.Uint64()
		}
	}
	return vals[0], vals[1] + vals[2]
}

func (goRuntime) SetGCPercent(p int) int { return debug.SetGCPercent(p) }

func (goRuntime) MemoryLimit() int64 { return debug.SetMemoryLimit(-1) }

// FromEnv returns a started Tuner for floor bytes unless the operator set
// GOGC (their choice wins) or floor is 0; nil when not started.
func FromEnv(floor uint64) *Tuner {
	base, set := BaseFromEnv(os.Getenv)
	if floor == 0 {
		return nil
	}
	if set {
		klog.InfoS("GOGC is set; the heap goal floor is off", "gogc", os.Getenv("GOGC"))
		return nil
	}
	t := New(floor, base, nil)
	if !t.Start() {
		return nil
	}
	return t
}
