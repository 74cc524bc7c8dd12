package resourcemetrics_test

import (
	"errors"
	"math"
	"testing"

	"github.com/promscaler/promscaler/pkg/resourcemetrics"
)

// FuzzQuantities: any sample value either is refused as an invalid usage or
// becomes a quantity within rounding of the value; nothing panics or
// overflows.
func FuzzQuantities(f *testing.F) {
	for _, v := range []float64{0, 0.487558164, 749785088, 1e-10, 9.2e9, 9.3e9, 1e300, math.Copysign(0, -1), -1, math.NaN(), math.Inf(1), math.MaxFloat64, math.SmallestNonzeroFloat64, float64(math.MaxInt64)} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		cpu, err := resourcemetrics.CPUQuantity(v)
		if err != nil {
			if !errors.Is(err, resourcemetrics.ErrInvalidUsage) {
				t.Fatalf("CPUQuantity(%v): unexpected error %v", v, err)
			}
		} else if got := float64(cpu.ScaledValue(-9)); math.Abs(got-v*1e9) > math.Max(1, v*1e9*1e-15) {
			t.Fatalf("CPUQuantity(%v) = %s (%v nanocores), want %v", v, cpu.String(), got, v*1e9)
		}
		mem, err := resourcemetrics.MemoryQuantity(v)
		if err != nil {
			if !errors.Is(err, resourcemetrics.ErrInvalidUsage) {
				t.Fatalf("MemoryQuantity(%v): unexpected error %v", v, err)
			}
		} else if got := float64(mem.Value()); math.Abs(got-v) > math.Max(1, v*1e-15) {
			t.Fatalf("MemoryQuantity(%v) = %s, want %v", v, mem.String(), v)
		}
		if (v < 0 || math.IsNaN(v) || math.IsInf(v, 0)) && (err == nil) {
			t.Fatalf("MemoryQuantity(%v) accepted an invalid usage", v)
		}
	})
}
