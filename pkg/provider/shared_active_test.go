package provider

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

// activeByWalk is active as it was before it kept seenSince: every call
// walks seen. The reference of TestSharedActive.
func activeByWalk(seen map[string]time.Time, namespace string, now time.Time, cfg SharedConfig) bool {
	seen[namespace] = now
	if len(seen) < cfg.MinNamespaces {
		return false
	}
	recent := 0
	for ns, at := range seen {
		if now.Sub(at) > 2*cfg.MaxAge {
			delete(seen, ns)
			continue
		}
		recent++
	}
	return recent >= cfg.MinNamespaces
}

// TestSharedActive checks that active answers as a walk of every
// namespace on every request does, over sequences of requests from a few
// namespaces at random gaps around the two-period window (including the
// exact edge), HPAs that stop and start again.
func TestSharedActive(t *testing.T) {
	cfg := SharedConfig{}.withDefaults()
	gaps := []time.Duration{0, time.Millisecond, cfg.MaxAge / 3, cfg.MaxAge, 2 * cfg.MaxAge, 2*cfg.MaxAge + 1, 3 * cfg.MaxAge}
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 33))
			s := newSharedEvaluator(cfg, clocktesting.NewFakeClock(time.Unix(0, 0)))
			e := &sharedEntry{seen: map[string]time.Time{}}
			ref := map[string]time.Time{}
			now := time.Unix(1000, 0)
			var got, want []bool
			for range 300 {
				now = now.Add(gaps[rng.IntN(len(gaps))])
				ns := fmt.Sprintf("ns-%d", rng.IntN(1+int(seed%8)))
				got = append(got, s.active(e, ns, now))
				want = append(want, activeByWalk(ref, ns, now, cfg))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("active over seed %d (-walk every request +active):\n%s", seed, diff)
			}
		})
	}
}

// BenchmarkSharedActive is one request of N HPAs asking once per period
// each, spread evenly: the per-request cost of deciding that the key is
// shared.
func BenchmarkSharedActive(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			cfg := SharedConfig{}.withDefaults()
			s := newSharedEvaluator(cfg, clocktesting.NewFakeClock(time.Unix(0, 0)))
			e := &sharedEntry{seen: map[string]time.Time{}}
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("ns-%04d", i)
			}
			now := time.Unix(1000, 0)
			step := cfg.MaxAge / time.Duration(n)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				now = now.Add(step)
				if !s.active(e, names[i%n], now) && i > cfg.MinNamespaces {
					b.Fatal("not active")
				}
			}
		})
	}
}
