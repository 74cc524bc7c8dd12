package resourcemetrics_test

import (
	"errors"
	"math"
	"testing"

	"github.com/promscaler/promscaler/pkg/resourcemetrics"
)

func TestCPUQuantity(t *testing.T) {
	tests := []struct {
		name    string
		cores   float64
		want    string
		wantErr bool
	}{
		{name: "nanocores", cores: 0.487558164, want: "487558164n"},
		{name: "rounded to the nearest nanocore", cores: 0.0000000016, want: "2n"},
		{name: "whole cores", cores: 3, want: "3"},
		{name: "millicores", cores: 0.25, want: "250m"},
		{name: "zero", cores: 0, want: "0"},
		{name: "large", cores: 9e9, want: "9G"},
		{name: "too large", cores: 1e10, wantErr: true},
		{name: "NaN", cores: math.NaN(), wantErr: true},
		{name: "+Inf", cores: math.Inf(1), wantErr: true},
		{name: "-Inf", cores: math.Inf(-1), wantErr: true},
		{name: "negative", cores: -0.001, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := resourcemetrics.CPUQuantity(tc.cores)
			if tc.wantErr {
				if !errors.Is(err, resourcemetrics.ErrInvalidUsage) {
					t.Fatalf("CPUQuantity(%v) = %v, %v; want ErrInvalidUsage", tc.cores, q.String(), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("CPUQuantity(%v): %v", tc.cores, err)
			}
			if got := q.String(); got != tc.want {
				t.Errorf("CPUQuantity(%v) = %s, want %s", tc.cores, got, tc.want)
			}
		})
	}
}

func TestMemoryQuantity(t *testing.T) {
	tests := []struct {
		name    string
		bytes   float64
		want    string
		wantErr bool
	}{
		{name: "kibibytes", bytes: 749785088, want: "732212Ki"},
		{name: "not a multiple of 1024", bytes: 1000, want: "1k"},
		{name: "odd bytes", bytes: 1001, want: "1001"},
		{name: "rounded", bytes: 1023.6, want: "1Ki"},
		{name: "gibibytes", bytes: 1 << 30, want: "1Gi"},
		{name: "zero", bytes: 0, want: "0"},
		{name: "too large", bytes: math.Pow(2, 63), wantErr: true},
		{name: "NaN", bytes: math.NaN(), wantErr: true},
		{name: "+Inf", bytes: math.Inf(1), wantErr: true},
		{name: "negative", bytes: -1, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := resourcemetrics.MemoryQuantity(tc.bytes)
			if tc.wantErr {
				if !errors.Is(err, resourcemetrics.ErrInvalidUsage) {
					t.Fatalf("MemoryQuantity(%v) = %v, %v; want ErrInvalidUsage", tc.bytes, q.String(), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("MemoryQuantity(%v): %v", tc.bytes, err)
			}
			if got := q.String(); got != tc.want {
				t.Errorf("MemoryQuantity(%v) = %s, want %s", tc.bytes, got, tc.want)
			}
		})
	}
}
