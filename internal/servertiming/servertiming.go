// Package servertiming measures how long an API request waited for
// Prometheus and says so in the answer's Server-Timing header (W3C Server
// Timing), e.g. "prometheus;dur=1.234" (milliseconds): the time the request
// spent waiting for Prometheus answers, whether it sent the query, joined an
// identical one in flight or took one that had just landed. The rest of the
// request's latency is the adapter's own (and the network's).
package servertiming

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/endpoints/responsewriter"
)

// HeaderName is the answer's header.
const HeaderName = "Server-Timing"

// Metric is the Server-Timing metric name of the Prometheus wait.
const Metric = "prometheus"

// maxSpans bounds the waits a request records; a request makes one or two
// Prometheus calls, a longer list keeps its first maxSpans.
const maxSpans = 16

// span is one wait, [start, end).
type span struct{ start, end time.Time }

// Recorder collects the waits of one request. Its zero value is ready.
type Recorder struct {
	mu    sync.Mutex
	spans []span
}

type recorderKey struct{}

// NewContext returns ctx carrying r.
func NewContext(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// Observe records a wait from start to end in ctx's recorder, if any.
func Observe(ctx context.Context, start, end time.Time) {
	r, _ := ctx.Value(recorderKey{}).(*Recorder)
	if r == nil || end.Before(start) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.spans) < maxSpans {
		r.spans = append(r.spans, span{start, end})
	}
}

// Wait is the time covered by the recorded waits (waits that overlap, as
// concurrent calls do, count once) and whether any was recorded.
func (r *Recorder) Wait() (time.Duration, bool) {
	r.mu.Lock()
	spans := slices.Clone(r.spans)
	r.mu.Unlock()
	if len(spans) == 0 {
		return 0, false
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	var total time.Duration
	cur := spans[0]
	for _, s := range spans[1:] {
		if !s.start.After(cur.end) {
			if s.end.After(cur.end) {
				cur.end = s.end
			}
			continue
		}
		total += cur.end.Sub(cur.start)
		cur = s
	}
	return total + cur.end.Sub(cur.start), true
}

// Value is the header value for a wait of d: "prometheus;dur=<ms>".
func Value(d time.Duration) string {
	return Metric + ";dur=" + strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// Parse returns the Prometheus wait in a Server-Timing header value, if it
// has one (other metrics are skipped).
func Parse(header string) (time.Duration, bool) {
	for entry := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(entry, ";")
		if strings.TrimSpace(name) != Metric {
			continue
		}
		for p := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(p, "=")
			if !ok || strings.TrimSpace(k) != "dur" {
				continue
			}
			ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(ms >= 0 && ms <= maxParsedMillis) {
				return 0, false
			}
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	return 0, false
}

// maxParsedMillis bounds what Parse accepts (a day): no overflow of a
// time.Duration, whatever the header says.
const maxParsedMillis = float64(24 * time.Hour / time.Millisecond)

// Handler gives every request a Recorder and, when the request waited for
// Prometheus, adds the Server-Timing header as the answer's header is
// written. It belongs inside the API server's timeout filter, next to the
// handler, so that the header is set before the answer is.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &Recorder{}
		tw := &timingWriter{ResponseWriter: w, rec: rec}
		next.ServeHTTP(responsewriter.WrapForHTTP1Or2(tw), r.WithContext(NewContext(r.Context(), rec)))
	})
}

// timingWriter adds the header before the first WriteHeader or Write.
type timingWriter struct {
	http.ResponseWriter
	rec     *Recorder
	written bool
}

var _ responsewriter.UserProvidedDecorator = &timingWriter{}

// Unwrap implements responsewriter.UserProvidedDecorator.
func (t *timingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func (t *timingWriter) addHeader() {
	if t.written {
		return
	}
	t.written = true
	if d, ok := t.rec.Wait(); ok {
		t.ResponseWriter.Header().Add(HeaderName, Value(d))
	}
}

// WriteHeader implements http.ResponseWriter.
func (t *timingWriter) WriteHeader(code int) {
	t.addHeader()
	t.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (t *timingWriter) Write(p []byte) (int, error) {
	t.addHeader()
	return t.ResponseWriter.Write(p)
}

// Flush implements http.Flusher (a flush sends the header too).
func (t *timingWriter) Flush() {
	t.addHeader()
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
