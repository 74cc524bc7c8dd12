package resourcemetrics

import (
	"errors"
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

// ErrInvalidUsage is returned for a sample that cannot be a usage: NaN,
// infinite, negative (e.g. a delta() over a counter that was reset) or too
// large for a quantity.
var ErrInvalidUsage = errors.New("invalid usage value")

// maxNanoCores is the largest CPU usage, in cores, that fits in an int64 of
// nanocores (about 9.2e9 cores).
const maxNanoCores = float64(math.MaxInt64) / 1e9

// CPUQuantity converts a CPU usage in cores into the quantity
// metrics-server reports: nanocores (scale -9, rounded to the nearest
// nanocore), in decimal SI form, e.g. 0.487558164 -> "487558164n".
func CPUQuantity(cores float64) (resource.Quantity, error) {
	if err := checkUsage(cores); err != nil {
		return resource.Quantity{}, err
	}
	// Compare before multiplying: cores*1e9 of a value just below the
	// limit may round up to 2^63, which does not fit.
	if cores >= maxNanoCores {
		return resource.Quantity{}, fmt.Errorf("%w: %g cores is out of range", ErrInvalidUsage, cores)
	}
	q := resource.NewScaledQuantity(int64(math.Round(cores*1e9)), resource.Nano)
	q.Format = resource.DecimalSI
	return *q, nil
}

// MemoryQuantity converts a memory usage in bytes into the quantity
// metrics-server reports: whole bytes (rounded) in binary SI form, e.g.
// 749785088 -> "732212Ki".
func MemoryQuantity(bytes float64) (resource.Quantity, error) {
	if err := checkUsage(bytes); err != nil {
		return resource.Quantity{}, err
	}
	// float64(MaxInt64) is 2^63, which does not fit; anything below it does.
	if bytes >= float64(math.MaxInt64) {
		return resource.Quantity{}, fmt.Errorf("%w: %g bytes is out of range", ErrInvalidUsage, bytes)
	}
	return *resource.NewQuantity(int64(math.Round(bytes)), resource.BinarySI), nil
}

func checkUsage(v float64) error {
	switch {
	case math.IsNaN(v):
		return fmt.Errorf("%w: NaN", ErrInvalidUsage)
	case math.IsInf(v, 0):
		return fmt.Errorf("%w: %v", ErrInvalidUsage, v)
	case v < 0:
		return fmt.Errorf("%w: negative value %g", ErrInvalidUsage, v)
	}
	return nil
}
