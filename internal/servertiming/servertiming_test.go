package servertiming

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWait(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name   string
		spans  [][2]int // ms
		want   time.Duration
		wantOK bool
	}{
		{name: "none"},
		{name: "one", spans: [][2]int{{0, 5}}, want: 5 * time.Millisecond, wantOK: true},
		{name: "zero length", spans: [][2]int{{3, 3}}, want: 0, wantOK: true},
		{name: "sequential calls add up", spans: [][2]int{{0, 2}, {10, 13}}, want: 5 * time.Millisecond, wantOK: true},
		{name: "concurrent calls count once", spans: [][2]int{{0, 10}, {2, 12}}, want: 12 * time.Millisecond, wantOK: true},
		{name: "nested", spans: [][2]int{{0, 10}, {2, 4}}, want: 10 * time.Millisecond, wantOK: true},
		{name: "touching", spans: [][2]int{{0, 4}, {4, 6}}, want: 6 * time.Millisecond, wantOK: true},
		{name: "recorded out of order", spans: [][2]int{{20, 25}, {0, 10}, {5, 12}}, want: 17 * time.Millisecond, wantOK: true},
		{name: "an end before its start is ignored", spans: [][2]int{{10, 5}, {0, 1}}, want: time.Millisecond, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Recorder{}
			ctx := NewContext(context.Background(), r)
			for _, s := range tc.spans {
				Observe(ctx, at(s[0]), at(s[1]))
			}
			got, ok := r.Wait()
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("Wait() = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestObserveWithoutRecorder(t *testing.T) {
	// Discovery and tools call Prometheus without a recorder: nothing to do.
	Observe(context.Background(), time.Unix(0, 0), time.Unix(1, 0))
}

func TestRecorderKeepsAtMostMaxSpans(t *testing.T) {
	r := &Recorder{}
	ctx := NewContext(context.Background(), r)
	t0 := time.Unix(1000, 0)
	for i := range maxSpans + 5 {
		s := t0.Add(time.Duration(i) * time.Second)
		Observe(ctx, s, s.Add(time.Millisecond))
	}
	if got, _ := r.Wait(); got != maxSpans*time.Millisecond {
		t.Errorf("Wait() = %v, want the first %d waits of 1ms", got, maxSpans)
	}
}

func TestValueAndParse(t *testing.T) {
	for _, d := range []time.Duration{0, time.Microsecond, 1234567 * time.Nanosecond, 3 * time.Second} {
		v := Value(d)
		got, ok := Parse(v)
		if !ok || (got-d).Abs() > time.Microsecond {
			t.Errorf("Parse(Value(%v) = %q) = %v, %v", d, v, got, ok)
		}
	}
	if got := Value(1234567 * time.Nanosecond); got != "prometheus;dur=1.235" {
		t.Errorf("Value = %q", got)
	}
	for _, tc := range []struct {
		header string
		want   time.Duration
		wantOK bool
	}{
		{"prometheus;dur=2.5", 2500 * time.Microsecond, true},
		{`db;dur=53, prometheus;desc="query";dur=0.75`, 750 * time.Microsecond, true},
		{" prometheus ; dur = 1 ", time.Millisecond, true},
		{"cache;dur=1", 0, false},
		{"prometheus", 0, false},
		{"prometheus;desc=x", 0, false},
		{"prometheus;dur=", 0, false},
		{"prometheus;dur=abc", 0, false},
		{"prometheus;dur=-1", 0, false},
		{"prometheus;dur=NaN", 0, false},
		{"prometheus;dur=1e300", 0, false},
		{"", 0, false},
	} {
		got, ok := Parse(tc.header)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tc.header, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestHandler(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    []string
	}{
		{
			name: "waited, explicit status",
			handler: func(w http.ResponseWriter, r *http.Request) {
				Observe(r.Context(), t0, t0.Add(1500*time.Microsecond))
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "prometheus is down")
			},
			want: []string{"prometheus;dur=1.500"},
		},
		{
			name: "waited, implicit 200",
			handler: func(w http.ResponseWriter, r *http.Request) {
				Observe(r.Context(), t0, t0.Add(2*time.Millisecond))
				Observe(r.Context(), t0.Add(time.Millisecond), t0.Add(3*time.Millisecond))
				io.WriteString(w, "{}")
			},
			want: []string{"prometheus;dur=3.000"},
		},
		{
			name:    "no Prometheus call",
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") },
		},
		{
			name: "a wait after the answer started is not announced",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "{")
				Observe(r.Context(), t0, t0.Add(time.Millisecond))
				io.WriteString(w, "}")
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(Handler(tc.handler))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if diff := cmp.Diff(tc.want, resp.Header.Values(HeaderName)); diff != "" {
				t.Errorf("Server-Timing (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandlerKeepsFlusherAndCloseNotifier(t *testing.T) {
	t0 := time.Unix(1000, 0)
	srv := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		//lint:ignore SA1019 the API server's filters still look for it
		if _, ok := w.(http.CloseNotifier); !ok {
			t.Error("the wrapped writer lost http.CloseNotifier")
		}
		f, ok := w.(http.Flusher)
		if !ok {
			t.Error("the wrapped writer lost http.Flusher")
			return
		}
		Observe(r.Context(), t0, t0.Add(time.Millisecond))
		f.Flush() // sends the header: it must carry the wait
	})))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(HeaderName); got != "prometheus;dur=1.000" {
		t.Errorf("Server-Timing after a flush = %q", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"prometheus;dur=1.5", `a;dur=1,prometheus;dur=0`, "prometheus;dur=1e9", ";;,,=", "prometheus;dur=-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		d, ok := Parse(header)
		if !ok {
			if d != 0 {
				t.Fatalf("Parse(%q) = %v, false", header, d)
			}
			return
		}
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("Parse(%q) = %v out of bounds", header, d)
		}
		if back, ok := Parse(Value(d)); !ok || (back-d).Abs() > time.Microsecond {
			t.Fatalf("Parse(Value(%v)) = %v, %v", d, back, ok)
		}
	})
}
