package promclient

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// answerIn writes vectorBody in the given Content-Encoding ("" for none):
// gzip-compressed for gzip, the plain body (mislabelled) otherwise.
func answerIn(encoding string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if encoding == "" {
			io.WriteString(w, vectorBody)
			return
		}
		w.Header().Set("Content-Encoding", encoding)
		if encoding != "gzip" {
			io.WriteString(w, vectorBody)
			return
		}
		zw := gzip.NewWriter(w)
		io.WriteString(zw, vectorBody)
		zw.Close()
	}
}

// gzipWhenAsked compresses the answer only when the request accepts gzip,
// as Prometheus, Thanos, Mimir and VictoriaMetrics do.
func gzipWhenAsked(w http.ResponseWriter, r *http.Request) {
	enc := ""
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		enc = "gzip"
	}
	answerIn(enc)(w, r)
}

func TestCompression(t *testing.T) {
	tests := []struct {
		name           string
		compression    string
		modify         func(o *Options)
		handle         func(w http.ResponseWriter, r *http.Request)
		wantAccept     string // Accept-Encoding Prometheus sees
		wantErrContain string
	}{
		{name: "none: no Accept-Encoding, plain answer", compression: CompressionNone, handle: gzipWhenAsked},
		{name: "default (empty): as none", compression: "", handle: gzipWhenAsked},
		{name: "gzip: asked for and inflated", compression: CompressionGzip, handle: gzipWhenAsked, wantAccept: "gzip"},
		{name: "none with Kubernetes credentials", compression: CompressionNone, modify: inCluster, handle: gzipWhenAsked},
		{name: "gzip with Kubernetes credentials", compression: CompressionGzip, modify: inCluster, handle: gzipWhenAsked, wantAccept: "gzip"},
		{name: "none: unasked gzip is inflated", compression: CompressionNone, handle: answerIn("gzip")},
		{
			name: "gzip asked by --prometheus-header is inflated", compression: CompressionNone,
			modify: func(o *Options) { o.Headers = []string{"Accept-Encoding=gzip"} },
			handle: gzipWhenAsked, wantAccept: "gzip",
		},
		{
			name: "unknown coding is named in the error", compression: CompressionNone,
			handle: answerIn("br"), wantErrContain: `Content-Encoding "br"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProm(t, tc.handle)
			c := optionsClient(t, f.URL, nil, func(o *Options) {
				o.Default.Compression = tc.compression
				if tc.modify != nil {
					tc.modify(o)
				}
			})
			got, err := c.QuerySamples(context.Background(), "up", time.Time{})
			if got := f.requests()[0].Header.Get("Accept-Encoding"); got != tc.wantAccept {
				t.Errorf("Accept-Encoding = %q, want %q", got, tc.wantAccept)
			}
			if tc.wantErrContain != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrContain) {
					t.Fatalf("Query error = %v, want it to contain %q", err, tc.wantErrContain)
				}
				return
			}
			if err != nil {
				t.Fatalf("Query: %v", err)
			}
			if diff := cmp.Diff(vectorSamples, got); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompressionFlag(t *testing.T) {
	if got := NewOptions().Default.Compression; got != "" {
		t.Errorf("default compression = %q, want the zero value (%s)", got, CompressionNone)
	}
	for _, v := range []string{"gzip", "none", ""} {
		o := NewOptions()
		o.Default.URL = "http://prom:9090"
		o.Default.Compression = v
		if errs := o.Validate(); len(errs) != 0 {
			t.Errorf("--prometheus-compression=%s: %v", v, errs)
		}
	}
}
