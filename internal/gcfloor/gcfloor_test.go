package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	tests := []struct {
		name               string
		floor, live, roots uint64
		base               int
		want               int
	}{
		{name: "small heap raised to the floor", floor: 128 * mib, live: 16 * mib, base: 100, want: 700},
		{name: "roots count toward the goal", floor: 128 * mib, live: 15 * mib, roots: 1 * mib, base: 100, want: 707},
		{name: "rounded up, never a byte short", floor: 100, live: 30, base: 10, want: 234},
		{name: "heap past half the floor: base", floor: 128 * mib, live: 70 * mib, base: 100, want: 100},
		{name: "heap past the floor: base", floor: 128 * mib, live: 300 * mib, base: 100, want: 100},
		{name: "higher base kept", floor: 128 * mib, live: 40 * mib, base: 300, want: 300},
		{name: "lower base raised", floor: 128 * mib, live: 40 * mib, base: 50, want: 220},
		{name: "nothing live yet: base", floor: 128 * mib, base: 100, want: 100},
		{name: "tiny heap: bounded", floor: 128 * mib, live: 1, base: 100, want: maxPercent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Percent(tc.floor, tc.live, tc.roots, tc.base)
			if got != tc.want {
				t.Fatalf("Percent(%d, %d, %d, %d) = %d, want %d", tc.floor, tc.live, tc.roots, tc.base, got, tc.want)
			}
			if got > tc.base && got < maxPercent {
				goal := tc.live + (tc.live+tc.roots)*uint64(got)/100
				if goal < tc.floor {
					t.Errorf("goal %d below the floor %d", goal, tc.floor)
				}
			}
		})
	}
}

func TestBaseFromEnv(t *testing.T) {
	tests := []struct {
		env      string
		wantBase int
		wantSet  bool
	}{
		{env: "", wantBase: 100},
		{env: " ", wantBase: 100},
		{env: "200", wantBase: 200, wantSet: true},
		{env: "off", wantBase: -1, wantSet: true},
		{env: "OFF", wantBase: -1, wantSet: true},
		{env: "bogus", wantBase: 100, wantSet: true},
	}
	for _, tc := range tests {
		base, set := BaseFromEnv(func(k string) string {
			if k != "GOGC" {
				t.Fatalf("read %q", k)
			}
			return tc.env
		})
		if base != tc.wantBase || set != tc.wantSet {
			t.Errorf("GOGC=%q: got (%d, %v), want (%d, %v)", tc.env, base, set, tc.wantBase, tc.wantSet)
		}
	}
}

type fakeRuntime struct {
	live, roots uint64
	limit       int64
	percent     int
	sets        []int
}

func (f *fakeRuntime) Heap() (uint64, uint64) { return f.live, f.roots }
func (f *fakeRuntime) SetGCPercent(p int) int {
	old := f.percent
	f.percent = p
	f.sets = append(f.sets, p)
	return old
}
func (f *fakeRuntime) MemoryLimit() int64 { return f.limit }

func TestTuner(t *testing.T) {
	rt := &fakeRuntime{live: 16 * mib, limit: math.MaxInt64, percent: 100}
	tu := New(128*mib, 100, rt)
	if got := tu.Tune(); got != 700 {
		t.Fatalf("Tune = %d, want 700", got)
	}
	// Same heap: GOGC is not set again.
	tu.Tune()
	// The heap grows past half the floor: back to the base.
	rt.live = 100 * mib
	tu.Tune()
	// A memory limit of 64 MiB caps the floor at 32 MiB.
	rt.live, rt.limit = 8*mib, 64*mib
	if got := tu.Tune(); got != 300 {
		t.Fatalf("Tune under a 64 MiB limit = %d, want 300", got)
	}
	tu.Stop()
	// Stopped: nothing more is set.
	rt.live = 1 * mib
	tu.Tune()
	tu.Stop()
	if diff := cmp.Diff([]int{700, 100, 300, 100}, rt.sets); diff != "" {
		t.Errorf("GOGC settings (-want +got):\n%s", diff)
	}
	if tu.Percent() != 100 {
		t.Errorf("Percent after Stop = %d, want 100", tu.Percent())
	}
}

func TestStartOff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		floor uint64
		base  int
	}{{"no floor", 0, 100}, {"GOGC off", 128 * mib, -1}} {
		rt := &fakeRuntime{live: mib, limit: math.MaxInt64}
		if New(tc.floor, tc.base, rt).Start() {
			t.Errorf("%s: started", tc.name)
		}
		if len(rt.sets) != 0 {
			t.Errorf("%s: GOGC set to %v", tc.name, rt.sets)
		}
	}
}

func gogc(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestTunerFollowsCollections runs the real runtime: after each collection
// the finalizer tunes again, GOGC follows, and Stop ends it.
func TestTunerFollowsCollections(t *testing.T) {
	orig := gogc(t)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	debug.SetGCPercent(100)

	tu := New(1<<30, 100, nil)
	if !tu.Start() {
		t.Fatal("not started")
	}
	waitCollections := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for tu.Collections() < n {
			if time.Now().After(deadline) {
				t.Fatalf("tuned %d times after collections, want %d", tu.Collections(), n)
			}
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}
	waitCollections(4)
	if got := gogc(t); got <= 100 || got != tu.Percent() {
		t.Fatalf("GOGC %d with a 1 GiB floor, Tuner says %d; want it raised above 100", got, tu.Percent())
	}

	tu.Stop()
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC after Stop = %d, want 100", got)
	}
	// The finalizer chain ends: more collections do not tune.
	runtime.GC()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	n := tu.Collections()
	for range 3 {
		runtime.GC()
	}
	time.Sleep(10 * time.Millisecond)
	if got := tu.Collections(); got != n {
		t.Errorf("tuned %d times after Stop", got-n)
	}
	if got := gogc(t); got != 100 {
		t.Errorf("GOGC after Stop and collections = %d, want 100", got)
	}
}

// FuzzPercent: whatever the heap, Percent never goes below the base nor
// above maxPercent, and when it raises GOGC the goal reaches the floor.
func FuzzPercent(f *testing.F) {
	f.Add(uint64(128*mib), uint64(16*mib), uint64(0), 100)
	f.Add(uint64(100), uint64(30), uint64(5), 10)
	f.Add(uint64(1<<40), uint64(1), uint64(1), 0)
	f.Add(uint64(math.MaxUint64), uint64(3), uint64(0), 100)
	f.Fuzz(func(t *testing.T, floor, live, roots uint64, base int) {
		roots %= 1 << 50 // stacks and globals: never near 2^64
		if base < 0 || base > maxPercent {
			base = 100
		}
		p := Percent(floor, live, roots, base)
		if p < base || p > max(base, maxPercent) {
			t.Fatalf("Percent(%d, %d, %d, %d) = %d: outside [base, maxPercent]", floor, live, roots, base, p)
		}
		if p > base && p < maxPercent && live+roots < 1<<56 {
			if goal := live + (live+roots)*uint64(p)/100; goal < floor {
				t.Fatalf("Percent(%d, %d, %d, %d) = %d: goal %d below the floor", floor, live, roots, base, p, goal)
			}
		}
	})
}

// FuzzBaseFromEnv: any GOGC value parses to "off" (-1) or a number, and an
// empty one is the runtime's default, unset.
func FuzzBaseFromEnv(f *testing.F) {
	for _, s := range []string{"", "100", "off", "-5", "bogus", " 50 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		base, set := BaseFromEnv(func(string) string { return v })
		if strings.TrimSpace(v) == "" && (base != 100 || set) {
			t.Fatalf("GOGC=%q: (%d, %v), want the default, unset", v, base, set)
		}
		if strings.TrimSpace(v) != "" && !set {
			t.Fatalf("GOGC=%q: reported unset", v)
		}
	})
}
