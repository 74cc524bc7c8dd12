package bench

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPairOrder(t *testing.T) {
	var got []string
	for i := range 4 {
		o := pairOrder(i)
		got = append(got, o[0].String()+","+o[1].String())
	}
	want := []string{"adapter,prometheus", "prometheus,adapter", "adapter,prometheus", "prometheus,adapter"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pair orders (-want +got):\n%s", diff)
	}
}

func TestQuantileMS(t *testing.T) {
	ms := time.Millisecond
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * ms
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   float64
	}{
		{"p99 of 1..100 ms is the 99th", hundred, 0.99, 99},
		{"p50 of 1..100 ms is the 50th", hundred, 0.5, 50},
		{"p100 is the largest", hundred, 1, 100},
		{"a tiny q is the smallest", hundred, 0.001, 1},
		{"one latency", []time.Duration{1500 * time.Microsecond}, 0.99, 1.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quantileMS(tt.sorted, tt.q); got != tt.want {
				t.Errorf("quantileMS = %v, want %v", got, tt.want)
			}
		})
	}
	if got := quantileMS(nil, 0.99); !math.IsNaN(got) {
		t.Errorf("quantileMS(nil) = %v, want NaN", got)
	}
}

// segmentsOf builds segments of latencies from ms values.
func segmentsOf(ms ...[]float64) [][]time.Duration {
	out := make([][]time.Duration, len(ms))
	for i, seg := range ms {
		for _, v := range seg {
			out[i] = append(out[i], time.Duration(v*float64(time.Millisecond)))
		}
	}
	return out
}

// shifted returns segs with every latency d longer.
func shifted(segs [][]time.Duration, d time.Duration) [][]time.Duration {
	out := make([][]time.Duration, len(segs))
	for i, s := range segs {
		for _, l := range s {
			out[i] = append(out[i], l+d)
		}
	}
	return out
}

func TestBootstrapDiff(t *testing.T) {
	// Twenty segments of 100 requests; segment 7 has a stall (its last 40
	// requests at 30-69 ms), the others 1-5 ms.
	base := make([][]float64, 20)
	for i := range base {
		for j := range 100 {
			v := 1 + float64(j%5)
			if i == 7 && j >= 60 {
				v = float64(30 + j - 60)
			}
			base[i] = append(base[i], v)
		}
	}
	prom := segmentsOf(base...)

	t.Run("a constant extra per request is the difference, with no spread", func(t *testing.T) {
		got := bootstrapDiff(shifted(prom, 1500*time.Microsecond), prom, 0.99, 0.05, 200, 1)
		if diff := cmp.Diff(diffInterval{1.5, 1.5, 1.5}, got); diff != "" {
			t.Errorf("bootstrapDiff (-want +got):\n%s", diff)
		}
	})
	t.Run("identical legs: zero inside the interval", func(t *testing.T) {
		got := bootstrapDiff(prom, prom, 0.99, 0.05, 200, 1)
		if got.Diff != 0 || got.Lo != 0 || got.Hi != 0 {
			t.Errorf("bootstrapDiff = %+v, want all 0", got)
		}
	})
	t.Run("a stall in one leg's segment widens the interval around the difference", func(t *testing.T) {
		// The same requests, but the stall in the adapter leg only: the
		// Prometheus leg's segment 7 is like the others.
		calm := make([][]float64, 20)
		for i := range calm {
			for j := range 100 {
				calm[i] = append(calm[i], 1+float64(j%5))
			}
		}
		got := bootstrapDiff(prom, segmentsOf(calm...), 0.99, 0.05, 500, 1)
		// Pooled: 2,000 requests, the 40 slowest are the stall's, so the
		// adapter leg's p99 (the 1,980th) is the stall's 20th (49 ms),
		// against 5 ms in the other leg.
		if got.Diff != 44 {
			t.Errorf("Diff = %v, want 44", got.Diff)
		}
		if !(got.Lo < got.Diff && got.Diff <= got.Hi) {
			t.Errorf("interval [%v, %v] does not spread below the difference %v: resamples without segment 7 have no stall", got.Lo, got.Hi, got.Diff)
		}
		if got.Lo != 0 {
			t.Errorf("Lo = %v, want 0 (resamples without the stalled segment)", got.Lo)
		}
		if again := bootstrapDiff(prom, segmentsOf(calm...), 0.99, 0.05, 500, 1); again != got {
			t.Errorf("same seed, other interval: %+v then %+v", got, again)
		}
	})
	t.Run("no resamples: the difference only", func(t *testing.T) {
		got := bootstrapDiff(shifted(prom, time.Millisecond), prom, 0.5, 0.05, 0, 1)
		if got.Diff != 1 || !math.IsNaN(got.Lo) || !math.IsNaN(got.Hi) {
			t.Errorf("bootstrapDiff = %+v, want Diff 1 and a NaN interval", got)
		}
	})
	t.Run("legs of different lengths", func(t *testing.T) {
		got := bootstrapDiff(prom, prom[:3], 0.99, 0.05, 10, 1)
		if !math.IsNaN(got.Diff) {
			t.Errorf("bootstrapDiff = %+v, want NaN", got)
		}
	})
}
