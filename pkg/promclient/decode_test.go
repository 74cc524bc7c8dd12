package promclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/internal/cputime"
)

// answerClient is an api.Client that answers every request with one status
// code and body: it runs client_golang's own decoding over a body.
type answerClient struct {
	code int
	body []byte
}

var _ api.Client = answerClient{}

func (c answerClient) URL(ep string, _ map[string]string) *url.URL {
	return &url.URL{Scheme: "http", Host: "prometheus", Path: ep}
}

func (c answerClient) Do(_ context.Context, _ *http.Request) (*http.Response, []byte, error) {
	return &http.Response{StatusCode: c.code, Body: io.NopCloser(bytes.NewReader(c.body))}, c.body, nil
}

// referenceDecode is what the client did before the streaming decoder:
// client_golang's v1 Query over the answer, then toVector.
func referenceDecode(code int, body []byte) (model.Vector, v1.Warnings, error) {
	val, warnings, _, err := v1.NewAPI(answerClient{code: code, body: body}).Query(context.Background(), "q", time.Time{})
	if err != nil {
		return nil, warnings, err
	}
	vec, err := toVector(val)
	return vec, warnings, err
}

// toVector converts client_golang's instant query result to a vector (the
// conversion the client did before the streaming decoder).
func toVector(val model.Value) (model.Vector, error) {
	switch v := val.(type) {
	case model.Vector:
		return v, nil
	case *model.Scalar:
		return model.Vector{&model.Sample{Metric: model.Metric{}, Value: v.Value, Timestamp: v.Timestamp}}, nil
	case nil:
		return nil, &v1.Error{Type: v1.ErrBadResponse, Msg: "no result in the answer"}
	default:
		return nil, &v1.Error{Type: v1.ErrBadResponse, Msg: fmt.Sprintf("unexpected result type %s for an instant query (want vector or scalar)", val.Type())}
	}
}

// exactValues compares sample values bit for bit (NaN equals NaN, -0 is not 0).
var exactValues = cmp.Comparer(func(a, b model.SampleValue) bool {
	return math.Float64bits(float64(a)) == math.Float64bits(float64(b))
})

// sample is a Sample with the labels given as name, value pairs, in the
// answer's order (empty, not nil, when there are none).
func sample(ts model.Time, v float64, labels ...string) Sample {
	ls := Labels{}
	for i := 0; i+1 < len(labels); i += 2 {
		ls = append(ls, Label{Name: labels[i], Value: labels[i+1]})
	}
	return Sample{Labels: ls, Value: model.SampleValue(v), Timestamp: ts}
}

// decodeVector is decodeQuery's answer as a model.Vector (Samples.Vector):
// what is compared with client_golang's decoding.
func decodeVector(code int, body []byte) (model.Vector, v1.Warnings, error) {
	smps, warnings, err := decodeQuery(code, body)
	return smps.Vector(), warnings, err
}

func vectorAnswer(result string) string {
	return `{"status":"success","data":{"resultType":"vector","result":` + result + `}}`
}

func TestDecodeQuery(t *testing.T) {
	const ts = model.Time(1700000000000)
	tests := []struct {
		name         string
		code         int // 200 when zero
		body         string
		want         Samples
		wantWarnings v1.Warnings
		wantErr      *v1.Error // Msg "" means any message
		wantInMsg    string
		// differs marks a deliberate difference from client_golang.
		differs bool
	}{
		{
			name: "two samples",
			body: vectorAnswer(`[{"metric":{"namespace":"default","pod":"a"},"value":[1700000000,"0.5"]},` +
				`{"metric":{"namespace":"default","pod":"b"},"value":[1700000000,"1.5"]}]`),
			want: Samples{sample(ts, 0.5, "namespace", "default", "pod", "a"), sample(ts, 1.5, "namespace", "default", "pod", "b")},
		},
		{
			name: "escapes",
			body: vectorAnswer(`[{"metric":{"po\u0064":"caf\u00e9","s":"\ud83d\ude00","lone":"\ud800x","esc":"\"\\\/\b\f\n\r\t","raw":"é"},"value":[1700000000,"1"]}]`),
			want: Samples{sample(ts, 1, "pod", "café", "s", "😀", "lone", "\uFFFDx", "esc", "\"\\/\b\f\n\r\t", "raw", "é")},
		},
		{
			name: "invalid UTF-8 becomes U+FFFD",
			body: vectorAnswer("[{\"metric\":{\"a\":\"x\xffy\"},\"value\":[1700000000,\"1\"]}]"),
			want: Samples{sample(ts, 1, "a", "x\uFFFDy")},
		},
		{
			name: "NaN and infinities",
			body: vectorAnswer(`[{"metric":{"v":"nan"},"value":[1700000000,"NaN"]},{"metric":{"v":"+inf"},"value":[1700000000,"+Inf"]},` +
				`{"metric":{"v":"-inf"},"value":[1700000000,"-Inf"]},{"metric":{"v":"-0"},"value":[1700000000,"-0"]},{"metric":{"v":"exp"},"value":[1700000000,"1e-3"]}]`),
			want: Samples{sample(ts, math.NaN(), "v", "nan"), sample(ts, math.Inf(1), "v", "+inf"),
				sample(ts, math.Inf(-1), "v", "-inf"), sample(ts, math.Copysign(0, -1), "v", "-0"), sample(ts, 0.001, "v", "exp")},
		},
		{
			name: "fractional and odd timestamps",
			body: vectorAnswer(`[{"metric":{},"value":[1700000000.123456,"1"]},{"metric":{},"value":[1700000000.5,"1"]},` +
				`{"metric":{},"value":[-1.5,"1"]},{"metric":{},"value":[0.001,"1"]},{"metric":{},"value":[-0,"1"]}]`),
			want: Samples{sample(ts+123, 1), sample(ts+500, 1), sample(-1500, 1), sample(1, 1), sample(0, 1)},
		},
		{
			name: "empty result",
			body: vectorAnswer(`[]`),
			want: Samples{},
		},
		{
			name: "null result",
			body: vectorAnswer(`null`),
			want: nil,
		},
		{
			name: "scalar",
			body: `{"status":"success","data":{"resultType":"scalar","result":[1700000000.25,"4\u0032"]}}`,
			want: Samples{sample(ts+250, 42)},
		},
		{
			name: "whitespace, unknown members, result before resultType",
			body: " \n{ \"status\" : \"success\" , \"stats\":{\"timings\":[1,2,{\"x\":null}]}, \"data\" :\t{\"result\" : [ { \"metric\" : { \"a\" : \"b\" } ,\r\n" +
				" \"extra\":[true,false,null,-1.5e+3], \"value\" : [ 1700000000 , \"2\" ] } ] , \"resultType\" : \"vector\" } } \n",
			want: Samples{sample(ts, 2, "a", "b")},
		},
		{
			name: "member names match case-insensitively",
			body: `{"STATUS":"success","Data":{"ResultType":"vector","RESULT":[{"Metric":{"a":"b"},"VALUE":[1700000000,"3"]}]}}`,
			want: Samples{sample(ts, 3, "a", "b")},
		},
		{
			name: "duplicate metric objects merge, null label value is empty",
			body: vectorAnswer(`[{"metric":{"a":"1"},"metric":{"b":"2","a":null},"value":[1700000000,"1"]}]`),
			want: Samples{sample(ts, 1, "a", "1", "b", "2", "a", "")},
		},
		{
			name: "no metric, null metric, empty metric",
			body: vectorAnswer(`[{"value":[1700000000,"1"]},{"metric":null,"value":[1700000000,"2"]},{"metric":{},"value":[1700000000,"3"]}]`),
			want: Samples{{Value: 1, Timestamp: ts}, {Value: 2, Timestamp: ts}, sample(ts, 3)},
		},
		{
			name: "a null metric drops the labels of an earlier one",
			body: vectorAnswer(`[{"metric":{"a":"1"},"metric":null,"value":[1700000000,"1"]}]`),
			want: Samples{{Value: 1, Timestamp: ts}},
		},
		{
			name: "repeated names are kept in order",
			body: vectorAnswer(`[{"metric":{"a":"1","a":"2"},"metric":{"b":null,"a":"3"},"value":[1700000000,"1"]}]`),
			want: Samples{sample(ts, 1, "a", "1", "a", "2", "b", "", "a", "3")},
		},
		{
			name: "no metric and a null timestamp give zero fields",
			body: vectorAnswer(`[{"value":[0,"1"]},{"metric":{},"value":[null,"7",{"ignored":1}]}]`),
			want: Samples{{Value: 1}, sample(0, 7)},
		},
		{
			name: "a later value member replaces an earlier one",
			body: vectorAnswer(`[{"value":[1700000000,"1"],"value":[1700000000,"2"]},{"value":[1700000000,"3"],"value":null}]`),
			want: Samples{{Value: 2, Timestamp: 1700000000000}, {Value: 3, Timestamp: 1700000000000}},
		},
		// client_golang reads each of these as the value 0, which the
		// adapter would serve as a real value (found by the fault suite).
		{
			name:    "a null value is refused",
			body:    vectorAnswer(`[{"metric":{"pod":"a"},"value":[1700000000,"5"]},{"metric":{"pod":"b"},"value":[1700000000,null]}]`),
			wantErr: &v1.Error{Type: v1.ErrBadResponse, Msg: errSampleWithoutValue.Error()},
		},
		{
			name:    "a value without its sample value is refused",
			body:    vectorAnswer(`[{"metric":{"pod":"a"},"value":[1700000000]}]`),
			wantErr: &v1.Error{Type: v1.ErrBadResponse, Msg: errSampleWithoutValue.Error()},
		},
		{
			name:    "a sample without value is refused",
			body:    vectorAnswer(`[{"metric":{"pod":"a"}}]`),
			wantErr: &v1.Error{Type: v1.ErrBadResponse, Msg: errSampleWithoutValue.Error()},
		},
		{
			name:    "a null value member alone is refused",
			body:    vectorAnswer(`[{"metric":{"pod":"a"},"value":null}]`),
			wantErr: &v1.Error{Type: v1.ErrBadResponse, Msg: errSampleWithoutValue.Error()},
		},
		{
			name:         "warnings",
			body:         `{"status":"success","warnings":["w1","w\u0032"],"infos":["i"],"data":{"resultType":"vector","result":[]}}`,
			want:         Samples{},
			wantWarnings: v1.Warnings{"w1", "w2"},
		},
		{
			name: "histogram sample",
			body: vectorAnswer(`[{"metric":{"a":"b"},"histogram":[1700000000,{"count":"2","sum":"3","buckets":[[0,"0","1","2"]]}]}]`),
			want: Samples{{Labels: Labels{{"a", "b"}}, Timestamp: ts, Histogram: &model.SampleHistogram{
				Count: 2, Sum: 3, Buckets: model.HistogramBuckets{{Boundaries: 0, Lower: 0, Upper: 1, Count: 2}}}}},
		},
		{
			name:      "bad PromQL",
			code:      http.StatusBadRequest,
			body:      `{"status":"error","errorType":"bad_data","error":"parse error: unexpected end of input"}`,
			wantErr:   &v1.Error{Type: v1.ErrBadData, Msg: "parse error: unexpected end of input"},
			wantInMsg: "parse error",
		},
		{
			name:    "execution error as 422 with warnings",
			code:    http.StatusUnprocessableEntity,
			body:    `{"status":"error","errorType":"execution","error":"many-to-many","warnings":["w"]}`,
			wantErr: &v1.Error{Type: v1.ErrExec, Msg: "many-to-many"}, wantWarnings: v1.Warnings{"w"},
		},
		{
			name:    "400 without error details",
			code:    http.StatusBadRequest,
			body:    `{"status":"error"}`,
			wantErr: &v1.Error{Type: v1.ErrClient, Msg: "client error: 400"},
		},
		{
			name:    "400 that is not JSON",
			code:    http.StatusBadRequest,
			body:    `bad request`,
			wantErr: &v1.Error{Type: v1.ErrClient, Msg: "client error: 400", Detail: "bad request"},
		},
		{
			name:    "400 saying success",
			code:    http.StatusBadRequest,
			body:    vectorAnswer(`[]`),
			wantErr: &v1.Error{Type: v1.ErrBadResponse, Msg: "inconsistent body for response code"},
		},
		{
			name:    "503 keeps the body as detail",
			code:    http.StatusServiceUnavailable,
			body:    `{"status":"error","errorType":"timeout","error":"query timed out"}`,
			wantErr: &v1.Error{Type: v1.ErrServer, Msg: "server error: 503", Detail: `{"status":"error","errorType":"timeout","error":"query timed out"}`},
		},
		{
			name:    "error status with 200",
			body:    `{"status":"error","errorType":"bad_data","error":"invalid parameter"}`,
			wantErr: &v1.Error{Type: v1.ErrBadData, Msg: "invalid parameter"},
		},
		{
			name:      "truncated",
			body:      vectorAnswer(`[{"metric":{"a":"b"},"value":[1700000000,"1"]}]`)[:40],
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "truncated",
		},
		{
			name:      "truncated inside a string",
			body:      `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b`,
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "truncated",
		},
		{
			name:      "trailing garbage",
			body:      vectorAnswer(`[]`) + ` x`,
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "after the top-level value",
		},
		{
			name:      "empty body",
			body:      ``,
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "truncated",
		},
		{
			name:      "raw control character in a string",
			body:      vectorAnswer("[{\"metric\":{\"a\":\"b\nc\"},\"value\":[1,\"1\"]}]"),
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "in string literal",
		},
		{
			name:      "escape in a sample value",
			body:      vectorAnswer(`[{"metric":{},"value":[1,"1\u002e5"]}]`),
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "sample value",
		},
		{
			name:      "exponent in a timestamp",
			body:      vectorAnswer(`[{"metric":{},"value":[1.7e9,"1"]}]`),
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "timestamp",
		},
		{
			name:      "number as label value",
			body:      vectorAnswer(`[{"metric":{"a":1},"value":[1,"1"]}]`),
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "not a string",
		},
		{
			name:    "matrix",
			body:    `{"status":"success","data":{"resultType":"matrix","result":[]}}`,
			wantErr: &v1.Error{Type: v1.ErrBadResponse, Msg: "unexpected result type matrix for an instant query (want vector or scalar)"},
		},
		{
			name:    "string",
			body:    `{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`,
			wantErr: &v1.Error{Type: v1.ErrBadResponse, Msg: `unexpected value type "string"`},
		},
		{
			name:    "no data",
			body:    `{"status":"success"}`,
			wantErr: &v1.Error{Type: v1.ErrBadResponse, Msg: "no result in the answer"},
		},
		{
			name:      "no result",
			body:      `{"status":"success","data":{"resultType":"vector"}}`,
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "result",
		},
		{
			name: "null sample replaced by a later data member",
			body: `{"status":"success","data":{"resultType":"vector","result":[null]},"d\u0061ta":{"resultType":"vector","result":[]}}`,
			want: Samples{},
		},
		{
			name:      "broken null in a result replaced later",
			body:      `{"status":"success","data":{"resultType":"vector","result":[nu],"result":[]}}`,
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "in literal null",
		},
		{
			name:      "null sample",
			body:      vectorAnswer(`[null]`),
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "sample of the result is null",
			differs:   true,
		},
		{
			name:      "null sample among others",
			body:      vectorAnswer(`[{"metric":{"a":"b"},"value":[1,"1"]},null]`),
			wantErr:   &v1.Error{Type: v1.ErrBadResponse},
			wantInMsg: "sample of the result is null",
			differs:   true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code := tc.code
			if code == 0 {
				code = http.StatusOK
			}
			got, warnings, err := decodeQuery(code, []byte(tc.body))
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("decodeQuery: %v", err)
				}
				if diff := cmp.Diff(tc.want, got, exactValues); diff != "" {
					t.Errorf("samples (-want +got):\n%s", diff)
				}
			} else {
				var apiErr *v1.Error
				if !errors.As(err, &apiErr) {
					t.Fatalf("error %v (%T) is not a *v1.Error", err, err)
				}
				if apiErr.Type != tc.wantErr.Type || tc.wantErr.Msg != "" && apiErr.Msg != tc.wantErr.Msg || apiErr.Detail != tc.wantErr.Detail {
					t.Errorf("error %#v, want %#v", apiErr, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantInMsg) {
					t.Errorf("error %q lacks %q", err, tc.wantInMsg)
				}
			}
			if !tc.differs {
				checkAgainstReference(t, code, []byte(tc.body))
			}
		})
	}
}

// checkAgainstReference checks that the streaming decoder and client_golang
// agree on an answer: the same vector when client_golang accepts it, an
// error of the same type (and, for errors from Prometheus rather than from
// decoding, the same message and detail) when it does not.
func checkAgainstReference(t *testing.T, code int, body []byte) {
	t.Helper()
	got, _, gotErr := decodeVector(code, body)
	want, _, wantErr := referenceDecode(code, body)
	if wantErr == nil {
		if gotErr != nil {
			for _, s := range want {
				if s == nil {
					return // deliberate: a null sample is an error here
				}
			}
			if isMatrixAnswer(body) {
				return // deliberate: a matrix, even replaced, is an error here
			}
			if strings.Contains(gotErr.Error(), errSampleWithoutValue.Error()) && hasUnvaluedSample(want) {
				return // deliberate: client_golang reads a missing value as 0
			}
			t.Fatalf("client_golang accepts %q, the decoder says %v", body, gotErr)
		}
		if diff := cmp.Diff(want, got, exactValues); diff != "" {
			t.Fatalf("decoding %q (-client_golang +decoder):\n%s", body, diff)
		}
		return
	}
	if gotErr == nil {
		t.Fatalf("client_golang rejects %q (%v), the decoder accepts it: %v", body, wantErr, got)
	}
	var wantAPI, gotAPI *v1.Error
	if !errors.As(wantErr, &wantAPI) || !errors.As(gotErr, &gotAPI) {
		t.Fatalf("errors %v / %v: not both *v1.Error", wantErr, gotErr)
	}
	if wantAPI.Type == v1.ErrBadResponse && gotAPI.Type == v1.ErrBadResponse && wantAPI.Detail == "" && gotAPI.Detail == "" {
		return // both could not decode it; the messages differ
	}
	if isMatrixAnswer(body) {
		return // deliberate: a matrix is not decoded, only refused
	}
	if wantAPI.Type != gotAPI.Type || wantAPI.Msg != gotAPI.Msg || wantAPI.Detail != gotAPI.Detail {
		t.Fatalf("answer %d %q: client_golang says %#v, the decoder %#v", code, body, wantAPI, gotAPI)
	}
}

// hasUnvaluedSample reports whether client_golang decoded a sample with the
// value 0 and no histogram: what a sample without a value becomes there.
func hasUnvaluedSample(v model.Vector) bool {
	for _, s := range v {
		if s != nil && s.Value == 0 && s.Histogram == nil {
			return true
		}
	}
	return false
}

func isMatrixAnswer(body []byte) bool {
	a, err := decodeAnswer(body, true)
	return err == nil && a.sawMatrix
}

// TestQueryFallsBackToGET checks the client_golang behaviour kept by the
// new request path: an answer 403, 405 or 501 to a query is retried as GET.
func TestQueryFallsBackToGET(t *testing.T) {
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		io.WriteString(w, vectorBody)
	})
	c := newTestClient(t, Config{Address: f.URL + "/p?tenant=a", Verb: http.MethodPost, Timeout: 5 * time.Second})
	got, err := c.QuerySamples(context.Background(), "up", time.Unix(1700000000, 0))
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	if diff := cmp.Diff(vectorSamples, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	reqs := f.requests()
	var methods []string
	for _, r := range reqs {
		methods = append(methods, r.Method)
		if r.Path != "/p/api/v1/query" || r.Form.Get("query") != "up" || r.Form.Get("time") != "1700000000" ||
			r.Form.Get("timeout") != "5s" || r.Form.Get("tenant") != "a" {
			t.Errorf("request %s %s %v", r.Method, r.Path, r.Form)
		}
	}
	if diff := cmp.Diff([]string{http.MethodPost, http.MethodGet}, methods); diff != "" {
		t.Errorf("methods (-want +got):\n%s", diff)
	}
}

// benchAnswer is a Prometheus answer of n samples shaped like the adapter's
// pods/* query: sum by (namespace, pod).
func benchAnswer(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metric":{"namespace":"big","pod":"worker-%05d"},"value":[1764493200.123,"%g"]}`, i, float64(i)/4)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// BenchmarkDecodeQuery decodes answers of n samples with client_golang
// (model.Vector, the decoding before the streaming decoder) and with the
// streaming decoder (Samples), also on an answer whose members are sorted
// by name, as encoding/json writes a map ("result" before "resultType").
func BenchmarkDecodeQuery(b *testing.B) {
	for _, n := range []int{100, 5000} {
		body := benchAnswer(n)
		sorted := bytes.Replace(body, []byte(`"resultType":"vector",`), nil, 1)
		sorted = append(bytes.TrimSuffix(sorted, []byte(`}}`)), `,"resultType":"vector"}}`...)
		for _, impl := range []struct {
			name   string
			decode func() (int, error)
		}{
			{name: "client_golang", decode: func() (int, error) {
				vec, _, err := referenceDecode(http.StatusOK, body)
				return len(vec), err
			}},
			{name: "streaming", decode: func() (int, error) {
				smps, _, err := decodeQuery(http.StatusOK, body)
				return len(smps), err
			}},
			{name: "streaming-result-first", decode: func() (int, error) {
				smps, _, err := decodeQuery(http.StatusOK, sorted)
				return len(smps), err
			}},
		} {
			b.Run(fmt.Sprintf("%s/%d", impl.name, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				cpu0 := cputime.Process()
				for b.Loop() {
					if got, err := impl.decode(); err != nil || got != n {
						b.Fatalf("%d samples, %v", got, err)
					}
				}
				reportCPU(b, cpu0)
				if cpu := cputime.Process() - cpu0; cpu > 0 {
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/sample")
				}
			})
		}
	}
}

// fuzzSeeds are answers the fuzzer starts from.
var fuzzSeeds = []string{
	vectorBody,
	vectorAnswer(`[]`),
	vectorAnswer(`null`),
	vectorAnswer(`[null]`),
	vectorAnswer(`[{"metric":{"po\u0064":"caf\u00e9","s":"\ud83d\ude00","lone":"\ud800x"},"value":[1700000000.123456,"NaN"]}]`),
	vectorAnswer(`[{"metric":{"a":"1"},"metric":{"b":null},"value":[-1.5,"+Inf",3]},{"value":null}]`),
	vectorAnswer(`[{"metric":{"a":"b"},"histogram":[1700000000,{"count":"2","sum":"3","buckets":[[0,"0","1","2"]]}]}]`),
	`{"status":"success","data":{"resultType":"scalar","result":[1700000000.25,"4\u0032"]}}`,
	`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}`,
	`{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`,
	`{"STATUS":"success","Data":{"result":[{"Metric":{"a":"b"},"VALUE":[1700000000,"3"]}],"ResultType":"vector"},"data":null}`,
	`{"status":"error","errorType":"bad_data","error":"parse error","warnings":["w"],"infos":["i"]}`,
	`{"status":"success","warnings":["w1"],"data":{"resultType":"vector","result":[]}} `,
	`null`,
}

// FuzzDecodeVector checks that the streaming decoder never panics and
// agrees with client_golang (checkAgainstReference) on arbitrary bytes, as a
// 200 and as a 400 answer, on random vectors written as a JSON encoder
// could (random spacing, member order, escapes, unknown members) and on
// quirky answers and their corruptions.
func FuzzDecodeVector(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint64(i), []byte(s))
	}
	f.Fuzz(checkReferenceProperty)
}

// FuzzDecodeSamples checks what the Samples form adds to the vector: the
// random vectors come back exactly as encoded (labels in the answer's
// order, repeated names kept), and nothing decoded (samples, warnings,
// errors) shares memory with the body, whose buffer the client reuses.
func FuzzDecodeSamples(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint64(i), []byte(s))
	}
	f.Fuzz(checkSamplesProperty)
}

// checkReferenceProperty is FuzzDecodeVector's property on one input.
func checkReferenceProperty(t *testing.T, seed uint64, raw []byte) {
	checkAgainstReference(t, http.StatusOK, raw)
	checkAgainstReference(t, http.StatusBadRequest, raw)
	_, body := randomAnswer(seed, raw)
	checkAgainstReference(t, http.StatusOK, body)
	for _, a := range quirkyAnswers(seed) {
		checkAgainstReference(t, a.code, a.body)
	}
}

// checkSamplesProperty is FuzzDecodeSamples' property on one input.
func checkSamplesProperty(t *testing.T, seed uint64, raw []byte) {
	checkOwnsItsMemory(t, http.StatusOK, raw)
	checkOwnsItsMemory(t, http.StatusBadRequest, raw)
	want, body := randomAnswer(seed, raw)
	got, _, err := decodeQuery(http.StatusOK, body)
	if err != nil {
		t.Fatalf("decoding the encoded vector %q: %v", body, err)
	}
	if diff := cmp.Diff(want, got, exactValues); diff != "" {
		t.Fatalf("decoding %q (-encoded +decoded):\n%s", body, diff)
	}
	checkOwnsItsMemory(t, http.StatusOK, body)
	for _, a := range quirkyAnswers(seed) {
		checkOwnsItsMemory(t, a.code, a.body)
	}
}

// checkOwnsItsMemory checks that what decodeQuery returns for an answer
// (samples, warnings, error) is unchanged once the body's bytes are
// overwritten, as the client's reused body buffer is by the next answer.
func checkOwnsItsMemory(t *testing.T, code int, body []byte) {
	t.Helper()
	buf := bytes.Clone(body)
	smps, warnings, err := decodeQuery(code, buf)
	render := func() string { return fmt.Sprintf("%v %q %v", smps, warnings, err) }
	before := render()
	for i := range buf {
		buf[i] = '#'
	}
	if after := render(); after != before {
		t.Fatalf("answer %d %q: the result changed with the body buffer:\n%s\nthen\n%s", code, body, before, after)
	}
}

// fuzzAnswer is one answer a fuzzer decodes: an HTTP status and a body.
type fuzzAnswer struct {
	code int
	body []byte
}

// quirkyAnswers is the quirky answer of seed under the statuses a decoder
// must tell apart, then its corruptions as 200 answers: what both decoders'
// fuzzers check beyond the raw bytes and the random vector.
func quirkyAnswers(seed uint64) []fuzzAnswer {
	quirky := quirkyAnswer(seed)
	var out []fuzzAnswer
	for _, code := range []int{http.StatusOK, http.StatusNoContent, http.StatusBadRequest, http.StatusServiceUnavailable} {
		out = append(out, fuzzAnswer{code, quirky})
	}
	for _, broken := range corruptions(seed, quirky) {
		out = append(out, fuzzAnswer{http.StatusOK, broken})
	}
	return out
}

// corruptions returns copies of body with one byte deleted, one replaced
// and the end cut off, at random places.
func corruptions(seed uint64, body []byte) [][]byte {
	if len(body) == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, 42))
	i := r.IntN(len(body))
	deleted := append(bytes.Clone(body[:i]), body[i+1:]...)
	replaced := bytes.Clone(body)
	const bytesToTry = `{}[]:,"\ntfu0-.eE+x`
	replaced[r.IntN(len(body))] = bytesToTry[r.IntN(len(bytesToTry))]
	return [][]byte{deleted, replaced, body[:r.IntN(len(body))]}
}

// TestGeneratedAnswers runs both fuzzers' properties over many seeds, and
// over answers past the first slabs and arena chunks, so that plain go test
// covers them.
func TestGeneratedAnswers(t *testing.T) {
	for seed := range uint64(2000) {
		raw := []byte(fmt.Sprint(seed))
		checkReferenceProperty(t, seed, raw)
		checkSamplesProperty(t, seed, raw)
	}
	long := strings.Repeat("x", 3*arenaChunk)
	for _, body := range [][]byte{
		benchAnswer(5000),
		[]byte(vectorAnswer(`[{"metric":{"a":"` + long + `"},"value":[1,"1"]},{"metric":{"a":"y` + long + `","b":"z"},"value":[1,"2"]}]`)),
	} {
		checkAgainstReference(t, http.StatusOK, body)
		checkOwnsItsMemory(t, http.StatusOK, body)
	}
}

// answerWriter writes JSON with random spacing and escapes.
type answerWriter struct {
	r *rand.Rand
	b bytes.Buffer
}

func (w *answerWriter) space() {
	if w.r.IntN(4) != 0 {
		return
	}
	for range w.r.IntN(3) + 1 {
		w.b.WriteByte(" \t\n\r"[w.r.IntN(4)])
	}
}

func (w *answerWriter) tok(s string) {
	w.space()
	w.b.WriteString(s)
	w.space()
}

// str writes s as a JSON string: as encoding/json would, or with some
// characters \u-escaped (astral ones as surrogate pairs).
func (w *answerWriter) str(s string) {
	w.space()
	if w.r.IntN(2) == 0 {
		enc, _ := json.Marshal(s)
		w.b.Write(enc)
		w.space()
		return
	}
	w.b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			w.b.WriteByte('\\')
			w.b.WriteRune(c)
		case c < 0x20 || w.r.IntN(5) == 0:
			if r1, r2 := utf16.EncodeRune(c); r1 != unicode.ReplacementChar {
				fmt.Fprintf(&w.b, `\u%04x\u%04X`, r1, r2)
			} else {
				fmt.Fprintf(&w.b, `\u%04x`, c)
			}
		default:
			w.b.WriteRune(c)
		}
	}
	w.b.WriteByte('"')
	w.space()
}

// list writes elems between start and end, separated by commas.
func (w *answerWriter) list(start, end string, elems []func()) {
	w.tok(start)
	for i, e := range elems {
		if i > 0 {
			w.tok(",")
		}
		e()
	}
	w.tok(end)
}

// key writes a member name, sometimes in another case.
func (w *answerWriter) key(name string) {
	if name != "" && w.r.IntN(8) == 0 {
		name = strings.ToUpper(name[:1]) + name[1:]
	}
	w.str(name)
	w.tok(":")
}

// junk writes a random JSON value.
func (w *answerWriter) junk(depth int) {
	switch n := w.r.IntN(7); {
	case n == 0 && depth < 3:
		w.tok("{")
		for i := range w.r.IntN(3) {
			if i > 0 {
				w.tok(",")
			}
			w.str(fmt.Sprint("k", i))
			w.tok(":")
			w.junk(depth + 1)
		}
		w.tok("}")
	case n == 1 && depth < 3:
		w.tok("[")
		for i := range w.r.IntN(3) {
			if i > 0 {
				w.tok(",")
			}
			w.junk(depth + 1)
		}
		w.tok("]")
	case n == 2:
		w.str("junk\u00e9")
	case n == 3:
		w.tok([]string{"true", "false", "null"}[w.r.IntN(3)])
	default:
		w.tok([]string{"0", "-1", "1.5", "-2.5e-3", "1E+10"}[w.r.IntN(5)])
	}
}

// maybeJunk writes an unknown member (and its comma) now and then.
func (w *answerWriter) maybeJunk() {
	if w.r.IntN(6) == 0 {
		w.str(fmt.Sprint("unknown", w.r.IntN(3)))
		w.tok(":")
		w.junk(0)
		w.tok(",")
	}
}

var fuzzLabelText = []string{"", "a", "pod", "namespace", "__name__", "café", "😀", "\"q\"", `back\slash`, "tab\tnew\nline",
	"\x00\x1f", "<html>&", "\u2028\u2029", "日本語", "\ufffd", "K\u212a", "worker-00042"}

// randomText makes a label name or value from the fuzzer's bytes or a palette.
func randomText(r *rand.Rand, raw []byte) string {
	if len(raw) > 0 && r.IntN(3) == 0 {
		i := r.IntN(len(raw))
		j := i + r.IntN(min(len(raw)-i, 12)+1)
		return strings.ToValidUTF8(string(raw[i:j]), "\ufffd")
	}
	return fuzzLabelText[r.IntN(len(fuzzLabelText))]
}

func randomValue(r *rand.Rand) (model.SampleValue, string) {
	var f float64
	switch r.IntN(8) {
	case 0:
		return model.SampleValue(math.NaN()), "NaN"
	case 1:
		return model.SampleValue(math.Inf(1)), "+Inf"
	case 2:
		return model.SampleValue(math.Inf(-1)), "-Inf"
	case 3:
		f = float64(r.IntN(1000))
	case 4:
		f = math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = 0
		}
	case 5:
		f = math.Copysign(0, -1)
	default:
		f = r.NormFloat64() * math.Pow(10, float64(r.IntN(20)-10))
	}
	formats := []byte{'g', 'e', 'f'}
	return model.SampleValue(f), strconv.FormatFloat(f, formats[r.IntN(len(formats))], -1, 64)
}

// randomTime returns a timestamp and how Prometheus could write it.
func randomTime(r *rand.Rand) (model.Time, string) {
	ms := int64(1764493200000) + r.Int64N(1e9) - 5e8
	if r.IntN(10) == 0 {
		ms = r.Int64N(2e6) - 1e6
	}
	sign, abs := "", ms
	if ms < 0 {
		sign, abs = "-", -ms
	}
	text := fmt.Sprintf("%s%d", sign, abs/1000)
	frac := abs % 1000
	switch {
	case frac == 0 && r.IntN(2) == 0:
	case frac%100 == 0 && r.IntN(2) == 0:
		text += fmt.Sprintf(".%d", frac/100)
	default:
		text += fmt.Sprintf(".%03d", frac)
		if r.IntN(3) == 0 {
			text += "999" // finer than a millisecond: truncated
		}
	}
	return model.Time(ms), text
}

// randomAnswer encodes random samples (or a scalar) as a success answer.
func randomAnswer(seed uint64, raw []byte) (Samples, []byte) {
	r := rand.New(rand.NewPCG(seed, uint64(len(raw))))
	w := &answerWriter{r: r}
	var want Samples
	var result func()
	resultType := "vector"
	if r.IntN(10) == 0 {
		resultType = "scalar"
		ts, tsText := randomTime(r)
		v, vText := randomValue(r)
		want = Samples{{Labels: Labels{}, Value: v, Timestamp: ts}}
		result = func() {
			w.tok("[")
			w.tok(tsText)
			w.tok(",")
			w.str(vText)
			w.tok("]")
		}
	} else {
		n := r.IntN(6)
		want = Samples{}
		var samples []func()
		for range n {
			smp := Sample{Labels: Labels{}}
			for range r.IntN(5) {
				smp.Labels = append(smp.Labels, Label{Name: randomText(r, raw), Value: randomText(r, raw)})
			}
			var tsText, vText string
			smp.Timestamp, tsText = randomTime(r)
			smp.Value, vText = randomValue(r)
			want = append(want, smp)
			samples = append(samples, func() {
				w.tok("{")
				w.maybeJunk()
				w.key("metric")
				w.tok("{")
				for i, l := range smp.Labels {
					if i > 0 {
						w.tok(",")
					}
					w.str(l.Name)
					w.tok(":")
					w.str(l.Value)
				}
				w.tok("}")
				w.tok(",")
				w.maybeJunk()
				w.key("value")
				w.tok("[")
				w.tok(tsText)
				w.tok(",")
				w.b.WriteString(`"` + vText + `"`) // written raw, as Prometheus does
				w.tok("]")
				w.tok("}")
			})
		}
		result = func() { w.list("[", "]", samples) }
	}

	w.tok("{")
	w.maybeJunk()
	w.key("status")
	w.str("success")
	w.tok(",")
	w.maybeJunk()
	if r.IntN(3) == 0 {
		w.key("warnings")
		w.tok(`["a warning"]`)
		w.tok(",")
	}
	w.key("data")
	w.tok("{")
	w.maybeJunk()
	if r.IntN(4) == 0 {
		w.key("result")
		result()
		w.tok(",")
		w.key("resultType")
		w.str(resultType)
	} else {
		w.key("resultType")
		w.str(resultType)
		w.tok(",")
		w.maybeJunk()
		w.key("result")
		result()
	}
	w.tok("}")
	w.tok("}")
	return want, w.b.Bytes()
}

// quirkyAnswer writes a random answer that is mostly the right shape but
// now and then not: wrong JSON kinds, nulls, duplicate and differently
// cased members, odd numbers and strings. Arbitrary bytes rarely get that
// far into the grammar; this is where client_golang's quirks are.
func quirkyAnswer(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	w := &answerWriter{r: r}
	oddness := 2 + r.IntN(20) // one choice in oddness is odd
	// pick calls good, or now and then one of the odd choices.
	pick := func(good func(), odd ...func()) {
		if len(odd) > 0 && r.IntN(oddness) == 0 {
			odd[r.IntN(len(odd))]()
			return
		}
		good()
	}
	lit := func(s string) func() { return func() { w.tok(s) } }
	str := func(s string) func() { return func() { w.str(s) } }
	rawStr := func(s string) func() { return func() { w.tok(`"` + s + `"`) } }
	junk := func() { w.junk(0) }
	member := func(name string, value func()) func() {
		return func() {
			w.key(name)
			value()
		}
	}
	// object writes the usual members, and now and then drops, repeats
	// or adds one.
	object := func(usual []func(), extra ...func()) {
		var members []func()
		for _, m := range usual {
			pick(func() { members = append(members, m) }, func() {}, func() { members = append(members, m, m) })
		}
		for _, m := range extra {
			pick(func() {}, func() { members = append(members, m) })
		}
		r.Shuffle(len(members), func(i, j int) {
			if r.IntN(oddness) == 0 {
				members[i], members[j] = members[j], members[i]
			}
		})
		w.list("{", "}", members)
	}
	array := func(elems ...func()) { w.list("[", "]", elems) }
	strList := func() {
		pick(func() { array(str("w"), str("x")) }, lit("null"), junk, func() { array(lit("null")) }, func() { array(lit("1")) })
	}
	timestamp := func() {
		pick(func() {
			pick(lit("1700000000"), lit("1700000000.5"), lit("1700000000.123456"), lit("-1.5"), lit("-0.25"), lit("0"), lit("-0"))
		}, lit("1.7e9"), lit("17E2"), lit("null"), str("1700000000"), lit("99999999999999999"), lit("9223372036854775807"),
			lit("9223372036854775808"), lit("-9223372036854775808.9"), lit("10000000000000000.1"), junk)
	}
	value := func() {
		pick(func() {
			pick(rawStr("1"), rawStr("NaN"), rawStr("+Inf"), rawStr("-Inf"), rawStr("-0"), rawStr("2.5e-3"))
		},
			rawStr("nan"), rawStr("-inf"), rawStr("Infinity"), rawStr(`1\u002e5`), rawStr(" 1"), rawStr("0x1p-2"), rawStr("1_0"),
			rawStr(""), rawStr("1e400"), lit("null"), lit("1"), junk)
	}
	labelValue := func() { pick(func() { w.str(randomText(r, nil)) }, lit("null"), lit("1"), rawStr(`\ud800`), junk) }
	labels := func() {
		pick(func() {
			object([]func(){member("namespace", labelValue), member("pod", labelValue)},
				member("", labelValue), member("caf\u00e9", labelValue), member("pod", labelValue))
		}, lit("null"), junk)
	}
	pair := func() {
		pick(func() { array(timestamp, value) }, lit("null"), junk, func() { array() }, func() { array(timestamp) },
			func() { array(timestamp, value, junk) })
	}
	histogram := func() {
		pick(func() { array(timestamp, lit(`{"count":"1","sum":"2","buckets":[[0,"0","1","1"]]}`)) },
			lit("null"), junk, func() { array(timestamp, lit("null")) }, func() { array(timestamp) })
	}
	sample := func() {
		pick(func() {
			object([]func(){member("metric", labels), member("value", pair)}, member("histogram", histogram), member("extra", junk))
		}, lit("null"), junk)
	}
	vector := func() {
		pick(func() {
			var elems []func()
			for range r.IntN(4) {
				elems = append(elems, sample)
			}
			array(elems...)
		}, lit("null"), junk)
	}
	scalar := func() {
		pick(func() { array(timestamp, str("42")) }, lit("null"), junk, func() { array(timestamp, str(`4\u0032`)) },
			func() { array(timestamp) }, func() { array(timestamp, lit("null")) }, func() { array(timestamp, str("x"), junk) })
	}
	typ := "vector"
	pick(func() {}, func() { typ = "scalar" }, func() { typ = "matrix" }, func() { typ = "string" }, func() { typ = "<ValNone>" },
		func() { typ = "bogus" })
	resultType := func() { pick(str(typ), lit("null"), lit("1"), rawStr(`vect\u006fr`), str("scalar")) }
	result := func() { pick(vector, scalar) }
	if typ == "scalar" {
		result = func() { pick(scalar, vector) }
	}
	data := func() {
		pick(func() {
			object([]func(){member("resultType", resultType), member("result", result)}, member("x", junk))
		},
			lit("null"), junk)
	}
	status := func() { pick(str("success"), str("error"), str("other"), lit("null"), lit("1")) }
	pick(func() {
		object([]func(){member("status", status), member("data", data)}, member("errorType", pick2(r, w)),
			member("error", pick2(r, w)), member("warnings", strList), member("infos", strList), member("stats", junk))
	}, lit("null"), junk)
	return w.b.Bytes()
}

// pick2 writes a string member value of another kind now and then.
func pick2(r *rand.Rand, w *answerWriter) func() {
	return func() {
		switch r.IntN(4) {
		case 0:
			w.tok("null")
		case 1:
			w.junk(0)
		default:
			w.str([]string{"bad_data", "execution", "timeout", "oops"}[r.IntN(4)])
		}
	}
}
