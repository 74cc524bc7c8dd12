package provider

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// ErrNotANumber is returned (wrapped) by Quantity for NaN and ±Inf: such a
// sample carries no usable value and is treated as absent.
var ErrNotANumber = errors.New("sample value is not a finite number")

// maxMilli is the largest magnitude that is converted exactly to a milli
// quantity: beyond it value*1000 no longer fits an int64 (and float64
// integers are no longer exact anyway), so a scaled quantity is used.
const maxMilli = float64(1 << 53)

// Quantity converts a sample value into the quantity served by the API.
//
// Finite values with |v| < 2^53/1000 (about 9e12) become milli-quantities
// (resource.NewMilliQuantity, as prometheus-adapter does, which is also the
// precision the HPA computes with), rounded to the nearest milli-unit rather
// than truncated. Larger finite values become a decimal quantity with 15
// significant digits and a power-of-ten exponent (e.g. "150e27"), so they
// never overflow an int64. Note that consumers reading a quantity as int64
// milli-units (the HPA's MilliValue) cannot represent values beyond about
// 9.2e15; such metrics should be scaled to a saner unit in the query.
//
// NaN, +Inf and -Inf return ErrNotANumber. They arise from PromQL divisions
// by zero (an fpm ratio over a pod with no process, a rate over a counter
// that did not move), and any finite stand-in would be a number the HPA
// acts upon: a clamped maximum makes it scale to maxReplicas and, summed
// over pods as int64 milli-values, overflows. The provider therefore skips
// such samples: the object has no value (not found, or the rule's
// defaultValue).
func Quantity(v float64) (resource.Quantity, error) {
	switch {
	case math.IsNaN(v):
		return resource.Quantity{}, fmt.Errorf("%w: NaN", ErrNotANumber)
	case math.IsInf(v, 0):
		return resource.Quantity{}, fmt.Errorf("%w: %v", ErrNotANumber, v)
	}
	m := v * 1000
	if math.Abs(m) < maxMilli {
		return *resource.NewMilliQuantity(int64(math.Round(m)), resource.DecimalSI), nil
	}
	// 15 significant digits: every float64 prints back to itself within
	// that precision and the mantissa fits an int64.
	exp := int(math.Floor(math.Log10(math.Abs(v)))) - 14
	mant := math.Round(v / math.Pow10(exp))
	if math.IsInf(mant, 0) || math.Abs(mant) >= 1e16 {
		// Pow10 underflow/rounding at the edges of float64: go through
		// the decimal text, which resource parses without loss.
		q, err := resource.ParseQuantity(strconv.FormatFloat(v, 'e', 14, 64))
		if err != nil {
			return resource.Quantity{}, fmt.Errorf("converting %v to a quantity: %w", v, err)
		}
		return q, nil
	}
	q := resource.NewScaledQuantity(int64(mant), resource.Scale(exp))
	// DecimalSI has no prefix beyond E (10^18) and would print such a
	// quantity without its exponent; the exponent form is exact.
	q.Format = resource.DecimalExponent
	return *q, nil
}

// defaultValue parses the defaultValue def returns, if any (already
// validated by config loading), naming the rule or entry at path.
func defaultValue(path string, def func() (string, bool)) (resource.Quantity, bool, error) {
	v, ok := def()
	if !ok {
		return resource.Quantity{}, false, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return resource.Quantity{}, false, internal("%s.defaultValue %q: %v", path, v, err)
	}
	return q, true, nil
}
