package resourcemetrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/naming"
	"github.com/promscaler/promscaler/pkg/resourcemetrics/resourcetest"
)

// testConfig is prometheus-adapter's documented resourceRules for cAdvisor
// series, with a 5m window.
var testConfig = resourcetest.CAdvisorRules("5m")

func compileRules(t testing.TB, yml string) *naming.RuleSet {
	t.Helper()
	cfg, err := config.Parse([]byte(yml), "test.yaml")
	if err != nil {
		t.Fatalf("parsing config: %v", err)
	}
	rs, err := naming.Compile(cfg, kubemapper.New())
	if err != nil {
		t.Fatalf("compiling config: %v", err)
	}
	return rs
}

// series is one sample the fake Prometheus holds.
type series struct {
	metric string // "cpu" or "memory"
	labels map[string]string
	value  float64
}

func podSeries(metric, ns, pod, container string, v float64) series {
	return series{metric: metric, labels: map[string]string{"namespace": ns, "pod": pod, "container": container}, value: v}
}

func nodeSeries(metric, node string, v float64) series {
	return series{metric: metric, labels: map[string]string{"node": node, "id": "/"}, value: v}
}

// fakeProm evaluates the queries of testConfig over a fixed set of samples:
// it picks the series by metric name and applies the matchers inside the
// braces. It is a prom.Querier and, through ServeHTTP, a Prometheus HTTP
// API (/api/v1/query only).
type fakeProm struct {
	ts     time.Time
	series []series

	mu      sync.Mutex
	queries []string
	err     error
}

var matcherRE = regexp.MustCompile(`(\w+)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")`)

func (f *fakeProm) Query(_ context.Context, q string, _ time.Time) (model.Vector, error) {
	f.mu.Lock()
	f.queries = append(f.queries, q)
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.eval(q)
}

func (f *fakeProm) Queries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

func (f *fakeProm) eval(q string) (model.Vector, error) {
	metric := ""
	switch {
	case strings.Contains(q, "container_cpu_usage_seconds_total"):
		metric = "cpu"
	case strings.Contains(q, "container_memory_working_set_bytes"):
		metric = "memory"
	default:
		return nil, fmt.Errorf("fake Prometheus: unknown metric in %q", q)
	}
	open, end := strings.Index(q, "{"), strings.Index(q, "}")
	if open < 0 || end < open {
		return nil, fmt.Errorf("fake Prometheus: no selector in %q", q)
	}
	type matcher struct {
		name, op string
		value    string
		re       *regexp.Regexp
	}
	var ms []matcher
	for _, m := range matcherRE.FindAllStringSubmatch(q[open+1:end], -1) {
		v, err := strconv.Unquote(m[3])
		if err != nil {
			return nil, fmt.Errorf("fake Prometheus: bad string %s: %w", m[3], err)
		}
		mm := matcher{name: m[1], op: m[2], value: v}
		if mm.op == "=~" || mm.op == "!~" {
			mm.re, err = regexp.Compile("^(?:" + v + ")$")
			if err != nil {
				return nil, fmt.Errorf("fake Prometheus: bad regexp %q: %w", v, err)
			}
		}
		ms = append(ms, mm)
	}
	// The group-by labels: what follows "by (".
	by := q[strings.LastIndex(q, "by (")+4:]
	by = by[:strings.Index(by, ")")]
	var groupBy []string
	for _, l := range strings.Split(by, ",") {
		groupBy = append(groupBy, strings.TrimSpace(l))
	}
	out := model.Vector{}
	for _, s := range f.series {
		if s.metric != metric {
			continue
		}
		ok := true
		for _, m := range ms {
			v := s.labels[m.name]
			switch m.op {
			case "=":
				ok = v == m.value
			case "!=":
				ok = v != m.value
			case "=~":
				ok = m.re.MatchString(v)
			case "!~":
				ok = !m.re.MatchString(v)
			}
			if !ok {
				break
			}
		}
		if !ok {
			continue
		}
		lbls := model.Metric{}
		for _, l := range groupBy {
			if v, ok := s.labels[l]; ok {
				lbls[model.LabelName(l)] = model.LabelValue(v)
			}
		}
		out = append(out, &model.Sample{Metric: lbls, Value: model.SampleValue(s.value), Timestamp: model.TimeFromUnixNano(f.ts.UnixNano())})
	}
	return out, nil
}

// ServeHTTP answers /api/v1/query like Prometheus.
func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	vec, err := f.Query(r.Context(), r.Form.Get("query"), time.Time{})
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": "unavailable", "error": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status": "success",
		"data":   map[string]any{"resultType": "vector", "result": vec},
	})
}
