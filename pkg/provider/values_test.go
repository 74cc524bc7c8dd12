package provider

import (
	"errors"
	"math"
	"testing"
)

func TestQuantity(t *testing.T) {
	tests := []struct {
		name    string
		in      float64
		want    string // Quantity.String()
		wantErr bool
	}{
		{name: "zero", in: 0, want: "0"},
		{name: "integer", in: 42, want: "42"},
		{name: "fraction", in: 0.25, want: "250m"},
		{name: "negative", in: -2.5, want: "-2500m"},
		{name: "rounds to nearest milli, not down", in: 0.9999, want: "1"},
		{name: "half milli rounds away from zero", in: 0.0005, want: "1m"},
		{name: "below half a milli is zero", in: 0.0004, want: "0"},
		{name: "fpm ratio", in: 2.0 / 3.0, want: "667m"},
		{name: "largest exact milli range", in: 9e12, want: "9T"},
		{name: "beyond int64 milli-units", in: 1e16, want: "10e15"},
		{name: "int64 max as float", in: float64(math.MaxInt64), want: "9223372036854780e3"},
		{name: "huge", in: 1.5e300, want: "1500e297"},
		{name: "max float64", in: math.MaxFloat64, want: "179769313486232e294"},
		{name: "huge negative", in: -1e20, want: "-100e18"},
		{name: "smallest subnormal is zero", in: math.SmallestNonzeroFloat64, want: "0"},
		{name: "NaN", in: math.NaN(), wantErr: true},
		{name: "+Inf", in: math.Inf(1), wantErr: true},
		{name: "-Inf", in: math.Inf(-1), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Quantity(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrNotANumber) {
					t.Fatalf("Quantity(%v) error = %v, want ErrNotANumber", tc.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Quantity(%v): %v", tc.in, err)
			}
			if got := q.String(); got != tc.want {
				t.Errorf("Quantity(%v) = %s, want %s", tc.in, got, tc.want)
			}
			checkClose(t, tc.in, q.AsApproximateFloat64())
		})
	}
}

// checkClose fails unless got is within the conversion's precision of
// want: a milli-unit absolute, or 1e-14 relative for huge values.
func checkClose(t *testing.T, want, got float64) {
	t.Helper()
	if math.IsInf(got, 0) && math.Abs(want) > 1e307 && math.Signbit(got) == math.Signbit(want) {
		// 15 significant digits round the largest float64s beyond it.
		return
	}
	diff := math.Abs(want - got)
	// Rounding to the nearest milli-unit is off by at most 0.0005, plus the
	// float64 representation error of want itself at its magnitude.
	if diff <= 0.0005+1e-12+math.Abs(want)*1e-15 || diff <= math.Abs(want)*1e-14 {
		return
	}
	t.Errorf("quantity reads back as %v, want %v (diff %v)", got, want, diff)
}

func FuzzQuantity(f *testing.F) {
	for _, v := range []float64{0, 1, -1, 0.0005, 9e12, 9.1e12, 1e16, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1)} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		q, err := Quantity(v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			if !errors.Is(err, ErrNotANumber) {
				t.Fatalf("Quantity(%v) error = %v, want ErrNotANumber", v, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Quantity(%v): %v", v, err)
		}
		if (v > 0.0005 && q.Sign() <= 0) || (v < -0.0005 && q.Sign() >= 0) {
			t.Fatalf("Quantity(%v) = %s has the wrong sign", v, q.String())
		}
		checkClose(t, v, q.AsApproximateFloat64())
	})
}
