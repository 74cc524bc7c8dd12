package promclient

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
)

func TestLabels(t *testing.T) {
	tests := []struct {
		name       string
		labels     Labels
		get        string
		wantValue  string
		wantOK     bool
		wantMetric model.Metric
	}{
		{name: "nil", labels: nil, get: "a", wantMetric: nil},
		{name: "empty", labels: Labels{}, get: "a", wantMetric: model.Metric{}},
		{name: "found", labels: Labels{{"namespace", "n"}, {"pod", "p"}}, get: "pod", wantValue: "p", wantOK: true,
			wantMetric: model.Metric{"namespace": "n", "pod": "p"}},
		{name: "absent", labels: Labels{{"namespace", "n"}}, get: "pod", wantMetric: model.Metric{"namespace": "n"}},
		{name: "empty value", labels: Labels{{"pod", ""}}, get: "pod", wantValue: "", wantOK: true, wantMetric: model.Metric{"pod": ""}},
		{name: "the last of a repeated name counts", labels: Labels{{"a", "1"}, {"b", "2"}, {"a", "3"}}, get: "a", wantValue: "3", wantOK: true,
			wantMetric: model.Metric{"a": "3", "b": "2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := tc.labels.Get(tc.get)
			if v != tc.wantValue || ok != tc.wantOK {
				t.Errorf("Get(%q) = %q, %v; want %q, %v", tc.get, v, ok, tc.wantValue, tc.wantOK)
			}
			m := tc.labels.Metric()
			if diff := cmp.Diff(tc.wantMetric, m); diff != "" {
				t.Errorf("Metric (-want +got):\n%s", diff)
			}
			if (m == nil) != (tc.wantMetric == nil) {
				t.Errorf("Metric nil = %v, want %v", m == nil, tc.wantMetric == nil)
			}
		})
	}
}

func TestSamplesVector(t *testing.T) {
	h := &model.SampleHistogram{Count: 1}
	tests := []struct {
		name    string
		samples Samples
		want    model.Vector
	}{
		{name: "nil", samples: nil, want: nil},
		{name: "empty", samples: Samples{}, want: model.Vector{}},
		{name: "samples", samples: Samples{
			{Labels: Labels{{"pod", "a"}}, Value: 1, Timestamp: 2},
			{Value: 3, Timestamp: 4},
			{Labels: Labels{}, Timestamp: 5, Histogram: h},
		}, want: model.Vector{
			{Metric: model.Metric{"pod": "a"}, Value: 1, Timestamp: 2},
			{Value: 3, Timestamp: 4},
			{Metric: model.Metric{}, Timestamp: 5, Histogram: h},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.samples.Vector()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Vector (-want +got):\n%s", diff)
			}
			if (got == nil) != (tc.want == nil) {
				t.Errorf("Vector nil = %v, want %v", got == nil, tc.want == nil)
			}
		})
	}
}

// checkParseSampleValue checks parseSampleValue against strconv.ParseFloat.
func checkParseSampleValue(t *testing.T, text string) {
	t.Helper()
	got, gotErr := parseSampleValue([]byte(text))
	want, wantErr := strconv.ParseFloat(text, 64)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("parseSampleValue(%q): error %v, ParseFloat's %v", text, gotErr, wantErr)
	}
	if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
		t.Fatalf("parseSampleValue(%q) = %v (%#x), ParseFloat gives %v (%#x)", text, got, math.Float64bits(got), want, math.Float64bits(want))
	}
}

func TestParseSampleValue(t *testing.T) {
	for _, text := range []string{
		"0", "-0", "0.0", "-0.0", "1", "-1", "42", "0.5", "1234.5678", "007", "00.10",
		"999999999999999", "9999999999999999", "123456789012345.6", "0.000000000000001", "0.0000000000000001",
		"0.1", "0.2", "0.3", "2.675", "1.7976931348623157", "9007199254740993", "4.35", "1e3", "1E-3", "-1.5e+300",
		"NaN", "+Inf", "-Inf", "Inf", "inf", "nan", "+1", "+0.5", ".5", "-.5", "5.", "-5.", "-", ".", "", "1.2.3",
		"1_000", "0x10", "0x1p-2", "1,5", " 1", "1 ", `\u0031`, "--1", "1-", "1e", "1e+",
	} {
		checkParseSampleValue(t, text)
	}
	r := rand.New(rand.NewPCG(7, 11))
	for range 20000 {
		var b strings.Builder
		if r.IntN(4) == 0 {
			b.WriteByte('-')
		}
		for range 1 + r.IntN(18) {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		if r.IntN(2) == 0 {
			b.WriteByte('.')
			for range r.IntN(18) {
				b.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		checkParseSampleValue(t, b.String())
	}
}

func FuzzParseSampleValue(f *testing.F) {
	for _, s := range []string{"0", "-0.5", "1234.5678", "1e3", "NaN", "+Inf", "999999999999999.9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		checkParseSampleValue(t, text)
	})
}
