package resourcemetrics_test

import (
	"errors"
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/promscaler/promscaler/pkg/resourcemetrics"
)

// quantityCase is a usage and the quantity it becomes, or ErrInvalidUsage.
type quantityCase struct {
	name    string
	usage   float64
	want    string
	wantErr bool
}

// testQuantity runs the cases through convert, named fn in messages.
func testQuantity(t *testing.T, fn string, convert func(float64) (resource.Quantity, error), tests []quantityCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := convert(tc.usage)
			if tc.wantErr {
				if !errors.Is(err, resourcemetrics.ErrInvalidUsage) {
					t.Fatalf("%s(%v) = %v, %v; want ErrInvalidUsage", fn, tc.usage, q.String(), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s(%v): %v", fn, tc.usage, err)
			}
			if got := q.String(); got != tc.want {
				t.Errorf("%s(%v) = %s, want %s", fn, tc.usage, got, tc.want)
			}
		})
	}
}

func TestCPUQuantity(t *testing.T) {
	testQuantity(t, "CPUQuantity", resourcemetrics.CPUQuantity, []quantityCase{
		{name: "nanocores", usage: 0.487558164, want: "487558164n"},
		{name: "rounded to the nearest nanocore", usage: 0.0000000016, want: "2n"},
		{name: "whole cores", usage: 3, want: "3"},
		{name: "millicores", usage: 0.25, want: "250m"},
		{name: "zero", usage: 0, want: "0"},
		{name: "large", usage: 9e9, want: "9G"},
		{name: "too large", usage: 1e10, wantErr: true},
		{name: "NaN", usage: math.NaN(), wantErr: true},
		{name: "+Inf", usage: math.Inf(1), wantErr: true},
		{name: "-Inf", usage: math.Inf(-1), wantErr: true},
		{name: "negative", usage: -0.001, wantErr: true},
	})
}

func TestMemoryQuantity(t *testing.T) {
	testQuantity(t, "MemoryQuantity", resourcemetrics.MemoryQuantity, []quantityCase{
		{name: "kibibytes", usage: 749785088, want: "732212Ki"},
		{name: "not a multiple of 1024", usage: 1000, want: "1k"},
		{name: "odd bytes", usage: 1001, want: "1001"},
		{name: "rounded", usage: 1023.6, want: "1Ki"},
		{name: "gibibytes", usage: 1 << 30, want: "1Gi"},
		{name: "zero", usage: 0, want: "0"},
		{name: "too large", usage: math.Pow(2, 63), wantErr: true},
		{name: "NaN", usage: math.NaN(), wantErr: true},
		{name: "+Inf", usage: math.Inf(1), wantErr: true},
		{name: "negative", usage: -1, wantErr: true},
	})
}
