// Package exporter is a small Prometheus exporter whose series tests and the
// demo change at runtime: gauges set to a value, and counters that grow at a
// set rate per second (so rate() over them is what the test chose).
//
// Besides Go calls, it answers HTTP:
//
//	GET  /metrics          text exposition of every series
//	GET  /series           the series as JSON
//	POST /series           JSON array of Series: set (create or replace) each
//	DELETE /series         JSON array of Series: remove each (name + labels)
//
// Helpers cover the project's examples: pm_status (php-fpm processes per
// pod), http_requests_total (an external-metric style counter) and node
// metrics.
package exporter

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Type is a series' Prometheus type.
type Type string

// The series types the exporter serves.
const (
	Gauge   Type = "gauge"
	Counter Type = "counter"
)

// Series is one time series as set through the API.
type Series struct {
	// Name is the metric name.
	Name string `json:"name"`
	// Type is gauge (default) or counter.
	Type Type `json:"type,omitempty"`
	// Labels identify the series within the metric.
	Labels map[string]string `json:"labels,omitempty"`
	// Value is a gauge's value, or a counter's value at the time it is set.
	Value float64 `json:"value"`
	// Rate is how much a counter grows per second.
	Rate float64 `json:"rate,omitempty"`
}

type entry struct {
	s   Series
	at  time.Time // when Value was last materialized (counters)
	key string
}

// Exporter holds the series. Its zero value is not usable; call New.
type Exporter struct {
	now    func() time.Time
	mu     sync.Mutex
	series map[string]*entry
	types  map[string]Type
}

// New returns an empty exporter; now is the clock (nil: time.Now).
func New(now func() time.Time) *Exporter {
	if now == nil {
		now = time.Now
	}
	return &Exporter{now: now, series: map[string]*entry{}, types: map[string]Type{}}
}

// Serve serves x on a free port of 127.0.0.1 until stop is called, and
// returns that address (host:port).
func (x *Exporter) Serve() (addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("exporter listener: %w", err)
	}
	srv := &http.Server{Handler: x, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return l.Addr().String(), func() { _ = srv.Close() }, nil
}

func seriesKey(name string, labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	var b strings.Builder
	b.WriteString(name)
	for _, k := range keys {
		fmt.Fprintf(&b, "\xff%s\xfe%s", k, labels[k])
	}
	return b.String()
}

// validName reports whether s is a valid metric or label name.
func validName(s string, metric bool) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || (i > 0 && r >= '0' && r <= '9') || (metric && r == ':')
		if !ok {
			return false
		}
	}
	return true
}

// Set creates or replaces series. A counter keeps growing from Value at Rate.
func (x *Exporter) Set(series ...Series) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, s := range series {
		if s.Type == "" {
			s.Type = Gauge
		}
		if err := validate(s); err != nil {
			return fmt.Errorf("series[%d]: %w", i, err)
		}
		if t, ok := x.types[s.Name]; ok && t != s.Type && x.count(s.Name) > 0 {
			return fmt.Errorf("series[%d]: %s is a %s, not a %s", i, s.Name, t, s.Type)
		}
	}
	now := x.now()
	for _, s := range series {
		if s.Type == "" {
			s.Type = Gauge
		}
		labels := make(map[string]string, len(s.Labels))
		for k, v := range s.Labels {
			labels[k] = v
		}
		s.Labels = labels
		k := seriesKey(s.Name, s.Labels)
		x.series[k] = &entry{s: s, at: now, key: k}
		x.types[s.Name] = s.Type
	}
	return nil
}

func validate(s Series) error {
	if !validName(s.Name, true) {
		return fmt.Errorf("invalid metric name %q", s.Name)
	}
	if s.Type != Gauge && s.Type != Counter {
		return fmt.Errorf("metric %s: type %q is neither gauge nor counter", s.Name, s.Type)
	}
	for k := range s.Labels {
		if !validName(k, false) || strings.HasPrefix(k, "__") {
			return fmt.Errorf("metric %s: invalid label name %q", s.Name, k)
		}
	}
	if s.Type == Counter && (s.Rate < 0 || s.Value < 0) {
		return fmt.Errorf("metric %s: a counter cannot decrease (value %g, rate %g)", s.Name, s.Value, s.Rate)
	}
	if math.IsNaN(s.Rate) || math.IsInf(s.Rate, 0) {
		return fmt.Errorf("metric %s: rate %g is not finite", s.Name, s.Rate)
	}
	return nil
}

func (x *Exporter) count(name string) int {
	n := 0
	for _, e := range x.series {
		if e.s.Name == name {
			n++
		}
	}
	return n
}

// SetCounterRate changes how fast an existing counter grows (creating it at
// 0 when missing), keeping the value it reached.
func (x *Exporter) SetCounterRate(name string, labels map[string]string, rate float64) error {
	x.mu.Lock()
	k := seriesKey(name, labels)
	e, ok := x.series[k]
	if ok && e.s.Type == Counter {
		now := x.now()
		e.s.Value += e.s.Rate * now.Sub(e.at).Seconds()
		e.at = now
		if rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
			x.mu.Unlock()
			return fmt.Errorf("metric %s: invalid rate %g", name, rate)
		}
		e.s.Rate = rate
		x.mu.Unlock()
		return nil
	}
	x.mu.Unlock()
	return x.Set(Series{Name: name, Type: Counter, Labels: labels, Rate: rate})
}

// Delete removes every series of metric name whose labels include all of
// match (nil match: every series of the metric). It returns how many went.
func (x *Exporter) Delete(name string, match map[string]string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for k, e := range x.series {
		if e.s.Name != name || !hasLabels(e.s.Labels, match) {
			continue
		}
		delete(x.series, k)
		n++
	}
	return n
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Snapshot returns every series with counters materialized at now, sorted.
func (x *Exporter) Snapshot() []Series {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now()
	out := make([]Series, 0, len(x.series))
	keys := slices.Sorted(maps.Keys(x.series))
	for _, k := range keys {
		e := x.series[k]
		s := e.s
		if s.Type == Counter {
			s.Value += s.Rate * now.Sub(e.at).Seconds()
		}
		s.Labels = make(map[string]string, len(e.s.Labels))
		for lk, lv := range e.s.Labels {
			s.Labels[lk] = lv
		}
		out = append(out, s)
	}
	return out
}

// WriteText writes the Prometheus text exposition (format 0.0.4).
func (x *Exporter) WriteText(w io.Writer) error {
	var b strings.Builder
	last := ""
	for _, s := range x.Snapshot() {
		if s.Name != last {
			fmt.Fprintf(&b, "# TYPE %s %s\n", s.Name, s.Type)
			last = s.Name
		}
		b.WriteString(s.Name)
		if len(s.Labels) > 0 {
			keys := slices.Sorted(maps.Keys(s.Labels))
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%s=\"%s\"", k, escapeLabel(s.Labels[k]))
			}
			b.WriteByte('}')
		}
		b.WriteByte(' ')
		b.WriteString(formatFloat(s.Value))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func escapeLabel(v string) string {
	return labelEscaper.Replace(v)
}

func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// ServeHTTP serves /metrics and /series (see the package comment).
func (x *Exporter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/metrics" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = x.WriteText(w)
	case r.URL.Path == "/series" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(x.Snapshot())
	case r.URL.Path == "/series" && (r.Method == http.MethodPost || r.Method == http.MethodDelete):
		var in []Series
		dec := json.NewDecoder(io.LimitReader(r.Body, 8<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			http.Error(w, "decoding series: "+err.Error(), http.StatusBadRequest)
			return
		}
		if r.Method == http.MethodDelete {
			n := 0
			for _, s := range in {
				n += x.Delete(s.Name, s.Labels)
			}
			fmt.Fprintf(w, "deleted %d series\n", n)
			return
		}
		if err := x.Set(in...); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "set %d series\n", len(in))
	default:
		http.Error(w, "not found: GET /metrics, GET|POST|DELETE /series", http.StatusNotFound)
	}
}

// FPM sets the php-fpm process gauges of one pod: pm_status with
// state="active processes" and state="total processes".
func (x *Exporter) FPM(namespace, pod string, active, total float64) error {
	l := func(state string) map[string]string {
		return map[string]string{"namespace": namespace, "pod_name": pod, "state": state}
	}
	return x.Set(
		Series{Name: "pm_status", Labels: l("active processes"), Value: active},
		Series{Name: "pm_status", Labels: l("total processes"), Value: total},
	)
}

// DeleteFPM removes the pm_status series of one pod.
func (x *Exporter) DeleteFPM(namespace, pod string) {
	x.Delete("pm_status", map[string]string{"namespace": namespace, "pod_name": pod})
}

// labelEscaper escapes a label value for the text exposition format; built
// once, as a Replacer is costly to build and safe for concurrent use.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
