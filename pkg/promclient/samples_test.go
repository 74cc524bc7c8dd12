package promclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/cputime"
	"github.com/promscaler/promscaler/internal/metrics"
)

// checkSamplesAgainstVector checks that decodeQuerySamples agrees with
// decodeQueryAnswer on an answer: the same error and warnings, and samples
// whose Vector is the decoded vector (nil labels for a nil metric).
func checkSamplesAgainstVector(t *testing.T, code int, body []byte) {
	t.Helper()
	want, wantWarnings, wantErr := decodeQueryAnswer(code, body)
	got, gotWarnings, gotErr := decodeQuerySamples(code, body)
	if diff := cmp.Diff(wantWarnings, gotWarnings); diff != "" {
		t.Fatalf("answer %d %q: warnings (-vector +samples):\n%s", code, body, diff)
	}
	if diff := cmp.Diff(fmt.Sprint(wantErr), fmt.Sprint(gotErr)); diff != "" {
		t.Fatalf("answer %d %q: error (-vector +samples):\n%s", code, body, diff)
	}
	if wantErr != nil {
		if got != nil {
			t.Fatalf("answer %d %q: samples %v with the error %v", code, body, got, gotErr)
		}
		return
	}
	if (want == nil) != (got == nil) {
		t.Fatalf("answer %d %q: vector nil %v, samples nil %v", code, body, want == nil, got == nil)
	}
	if diff := cmp.Diff(want, got.Vector(), exactValues); diff != "" {
		t.Fatalf("answer %d %q (-vector +samples):\n%s", code, body, diff)
	}
}

func TestDecodeQuerySamples(t *testing.T) {
	const ts = model.Time(1700000000000)
	tests := []struct {
		name string
		code int // 200 when zero
		body string
		want Samples
	}{
		{
			name: "two samples share the repeated value",
			body: vectorAnswer(`[{"metric":{"namespace":"default","pod":"a"},"value":[1700000000,"0.5"]},` +
				`{"metric":{"namespace":"default","pod":"b"},"value":[1700000000,"1.5"]}]`),
			want: Samples{
				{Labels: Labels{{"namespace", "default"}, {"pod", "a"}}, Value: 0.5, Timestamp: ts},
				{Labels: Labels{{"namespace", "default"}, {"pod", "b"}}, Value: 1.5, Timestamp: ts},
			},
		},
		{
			name: "no metric, null metric, empty metric",
			body: vectorAnswer(`[{"value":[1700000000,"1"]},{"metric":null,"value":[1700000000,"2"]},{"metric":{},"value":[1700000000,"3"]}]`),
			want: Samples{{Value: 1, Timestamp: ts}, {Value: 2, Timestamp: ts}, {Labels: Labels{}, Value: 3, Timestamp: ts}},
		},
		{
			name: "a null metric drops the labels of an earlier one",
			body: vectorAnswer(`[{"metric":{"a":"1"},"metric":null,"value":[1700000000,"1"]}]`),
			want: Samples{{Value: 1, Timestamp: ts}},
		},
		{
			name: "repeated names are kept in order",
			body: vectorAnswer(`[{"metric":{"a":"1","a":"2"},"metric":{"b":null,"a":"3"},"value":[1700000000,"1"]}]`),
			want: Samples{{Labels: Labels{{"a", "1"}, {"a", "2"}, {"b", ""}, {"a", "3"}}, Value: 1, Timestamp: ts}},
		},
		{
			name: "escapes",
			body: vectorAnswer(`[{"metric":{"po\u0064":"caf\u00e9","x":"\"q\""},"value":[1700000000,"1"]}]`),
			want: Samples{{Labels: Labels{{"pod", "café"}, {"x", `"q"`}}, Value: 1, Timestamp: ts}},
		},
		{
			name: "empty value",
			body: vectorAnswer(`[{"metric":{"a":""},"value":[1700000000,"1"]}]`),
			want: Samples{{Labels: Labels{{"a", ""}}, Value: 1, Timestamp: ts}},
		},
		{
			name: "scalar",
			body: `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"4"]}}`,
			want: Samples{{Labels: Labels{}, Value: 4, Timestamp: ts}},
		},
		{
			name: "histogram",
			body: vectorAnswer(`[{"metric":{"a":"b"},"histogram":[1700000000,{"count":"2","sum":"3","buckets":[[0,"0","1","2"]]}]}]`),
			want: Samples{{Labels: Labels{{"a", "b"}}, Timestamp: ts, Histogram: &model.SampleHistogram{
				Count: 2, Sum: 3, Buckets: model.HistogramBuckets{{Boundaries: 0, Lower: 0, Upper: 1, Count: 2}}}}},
		},
		{name: "null vector", body: vectorAnswer(`null`)},
		{name: "empty vector", body: vectorAnswer(`[]`), want: Samples{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code := tc.code
			if code == 0 {
				code = http.StatusOK
			}
			got, _, err := decodeQuerySamples(code, []byte(tc.body))
			if err != nil {
				t.Fatalf("decodeQuerySamples: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, exactValues); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
			if (tc.want == nil) != (got == nil) {
				t.Errorf("samples nil = %v, want %v", got == nil, tc.want == nil)
			}
			for i := range min(len(got), len(tc.want)) {
				if (got[i].Labels == nil) != (tc.want[i].Labels == nil) {
					t.Errorf("sample %d: labels nil = %v, want %v", i, got[i].Labels == nil, tc.want[i].Labels == nil)
				}
			}
			checkSamplesAgainstVector(t, code, []byte(tc.body))
		})
	}
}

func TestDecodeQuerySamplesErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int
		body string
	}{
		{name: "null sample", code: http.StatusOK, body: vectorAnswer(`[null]`)},
		{name: "null sample among others", code: http.StatusOK, body: vectorAnswer(`[{"metric":{"a":"b"},"value":[1,"1"]},null]`)},
		{name: "matrix", code: http.StatusOK, body: `{"status":"success","data":{"resultType":"matrix","result":[]}}`},
		{name: "bad label value", code: http.StatusOK, body: vectorAnswer(`[{"metric":{"a":1},"value":[1,"1"]}]`)},
		{name: "truncated", code: http.StatusOK, body: vectorAnswer(`[{"metric":{"a":"b"},"value":[1,"1"]}`)},
		{name: "prometheus error", code: http.StatusBadRequest, body: `{"status":"error","errorType":"bad_data","error":"parse error","warnings":["w"]}`},
		{name: "server error", code: http.StatusBadGateway, body: `down`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := decodeQuerySamples(tc.code, []byte(tc.body)); err == nil {
				t.Fatal("no error")
			}
			checkSamplesAgainstVector(t, tc.code, []byte(tc.body))
		})
	}
}

// TestDecodeQuerySamplesManyAnswers checks the compact decoding against the
// vector decoding over the fuzzer's generated answers, so that plain go
// test covers them.
func TestDecodeQuerySamplesManyAnswers(t *testing.T) {
	for seed := range uint64(1000) {
		_, body := randomAnswer(seed, []byte(fmt.Sprint(seed)))
		checkSamplesAgainstVector(t, http.StatusOK, body)
		quirky := quirkyAnswer(seed)
		for _, code := range []int{http.StatusOK, http.StatusBadRequest} {
			checkSamplesAgainstVector(t, code, quirky)
		}
		for _, broken := range corruptions(seed, quirky) {
			checkSamplesAgainstVector(t, http.StatusOK, broken)
		}
	}
	// Many samples, past the first slabs and arena chunks.
	checkSamplesAgainstVector(t, http.StatusOK, benchAnswer(5000))
	long := strings.Repeat("x", 3*arenaChunk)
	checkSamplesAgainstVector(t, http.StatusOK, []byte(vectorAnswer(`[{"metric":{"a":"`+long+`"},"value":[1,"1"]},{"metric":{"a":"y`+long+`","b":"z"},"value":[1,"2"]}]`)))
}

// FuzzDecodeSamples checks that the compact decoding agrees with the vector
// decoding (which FuzzDecodeVector checks against client_golang) on
// arbitrary bytes and on the answers FuzzDecodeVector generates.
func FuzzDecodeSamples(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint64(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, seed uint64, raw []byte) {
		checkSamplesAgainstVector(t, http.StatusOK, raw)
		checkSamplesAgainstVector(t, http.StatusBadRequest, raw)
		_, body := randomAnswer(seed, raw)
		checkSamplesAgainstVector(t, http.StatusOK, body)
		for _, a := range quirkyAnswers(seed) {
			checkSamplesAgainstVector(t, a.code, a.body)
		}
	})
}

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

// TestQuerySamplesOutliveTheBodyBuffer checks that no label of the samples
// shares memory with the pooled buffer the body was read into, which the
// next answers overwrite.
func TestQuerySamplesOutliveTheBodyBuffer(t *testing.T) {
	answer := func(pod, value string) string {
		return `{"status":"success","data":{"resultType":"vector","result":[` +
			`{"metric":{"namespace":"ns","pod":"` + pod + `-1","l\u00e9":"esc\u00e9"},"value":[1700000000,"` + value + `"]},` +
			`{"metric":{"namespace":"ns","pod":"` + pod + `-2","l\u00e9":"esc\u00e9"},"value":[1700000000,"` + value + `"]}]}}`
	}
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("query") == "first" {
			io.WriteString(w, answer("p-one", "1"))
			return
		}
		io.WriteString(w, answer("x-two", "2")+strings.Repeat(" ", 64))
	})
	c := newTestClient(t, Config{Address: f.srv.URL})
	ctx := context.Background()
	got, err := c.QuerySamples(ctx, "first", time.Time{})
	if err != nil {
		t.Fatalf("QuerySamples: %v", err)
	}
	for range 5 {
		if _, err := c.QuerySamples(ctx, "other", time.Time{}); err != nil {
			t.Fatalf("QuerySamples: %v", err)
		}
	}
	want := Samples{
		{Labels: Labels{{"namespace", "ns"}, {"pod", "p-one-1"}, {"lé", "escé"}}, Value: 1, Timestamp: 1700000000000},
		{Labels: Labels{{"namespace", "ns"}, {"pod", "p-one-2"}, {"lé", "escé"}}, Value: 1, Timestamp: 1700000000000},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first samples after later answers (-want +got):\n%s", diff)
	}
}

// TestQuerySamplesSharing checks that concurrent identical QuerySamples
// calls share one request and that its results are cached apart from
// Query's (they are of another type).
func TestQuerySamplesSharing(t *testing.T) {
	const n = 20
	release := make(chan struct{})
	var served atomic.Int32
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1) == 1 {
			<-release
		}
		io.WriteString(w, vectorBody)
	})
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	m := metrics.New()
	c := newTestClient(t, Config{Address: f.srv.URL, Metrics: m, CacheTTL: time.Minute, Clock: clk})
	ctx := context.Background()
	want := Samples{{Labels: Labels{{"pod", "a"}}, Value: 0.5, Timestamp: 1700000000000}}

	var wg sync.WaitGroup
	results := make(chan Samples, n)
	for range n {
		wg.Go(func() {
			s, err := c.QuerySamples(ctx, "sum(up)", time.Time{})
			if err != nil {
				t.Errorf("QuerySamples: %v", err)
			}
			results <- s
		})
	}
	waitFor(t, func() bool {
		return testutil.ToFloat64(m.CoalescedQueries.WithLabelValues(metrics.DefaultBackend, metrics.EndpointQuery)) == n-1
	})
	close(release)
	wg.Wait()
	close(results)
	for s := range results {
		if diff := cmp.Diff(want, s); diff != "" {
			t.Errorf("samples (-want +got):\n%s", diff)
		}
	}
	if got := served.Load(); got != 1 {
		t.Errorf("served %d requests for %d identical concurrent calls, want 1", got, n)
	}

	// Cached: no new request for QuerySamples; Query has its own entry.
	if _, err := c.QuerySamples(ctx, "sum(up)", time.Time{}); err != nil {
		t.Fatal(err)
	}
	vec, err := c.Query(ctx, "sum(up)", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Vector(), vec); diff != "" {
		t.Errorf("Query after QuerySamples (-want +got):\n%s", diff)
	}
	if _, err := c.Query(ctx, "sum(up)", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := served.Load(); got != 2 {
		t.Errorf("served %d requests, want 2 (one per result type)", got)
	}
}

// TestQuerySamplesErrors checks that QuerySamples reports failures as Query
// does.
func TestQuerySamplesErrors(t *testing.T) {
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"status":"error","errorType":"bad_data","error":"parse error at char 3"}`)
	})
	c := newTestClient(t, Config{Address: f.srv.URL})
	_, wantErr := c.Query(context.Background(), "su(", time.Time{})
	_, gotErr := c.QuerySamples(context.Background(), "su(", time.Time{})
	if wantErr == nil || gotErr == nil {
		t.Fatalf("errors %v, %v; want both", wantErr, gotErr)
	}
	if diff := cmp.Diff(wantErr.Error(), gotErr.Error()); diff != "" {
		t.Errorf("error (-Query +QuerySamples):\n%s", diff)
	}
	var pe *Error
	if !errors.As(gotErr, &pe) || pe.Outcome != metrics.PromOutcomeBadQuery {
		t.Errorf("error %#v, want a bad-query *Error", gotErr)
	}
}

// BenchmarkDecodeSamples decodes answers of n samples as Samples (the
// provider's path), to compare with BenchmarkDecodeVector.
func BenchmarkDecodeSamples(b *testing.B) {
	for _, n := range []int{100, 5000} {
		body := benchAnswer(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			cpu0 := cputime.Process()
			for b.Loop() {
				s, _, err := decodeQuerySamples(http.StatusOK, body)
				if err != nil || len(s) != n {
					b.Fatalf("%d samples, %v", len(s), err)
				}
			}
			reportCPU(b, cpu0)
			if cpu := cputime.Process() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/sample")
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
