package resourcemetrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/resourcemetrics/resourcetest"
	"github.com/promscaler/promscaler/test/ruletest"
)

// testConfig is prometheus-adapter's documented resourceRules for cAdvisor
// series, with a 5m window.
var testConfig = resourcetest.CAdvisorRules("5m")

var compileRules = ruletest.Compile

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
// braces. It is a promclient.SampleQuerier and, through answer and the promtest kit,
// a Prometheus HTTP API.
type fakeProm struct {
	ts     time.Time
	series []series
	// unselected are labels whose matchers the fake does not apply, as a
	// query that does not select on them.
	unselected []string

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

// QuerySamples answers what Query does, as Samples (see toSamples), as
// the real client does.
func (f *fakeProm) QuerySamples(ctx context.Context, q string, ts time.Time) (promclient.Samples, error) {
	vec, err := f.Query(ctx, q, ts)
	if err != nil {
		return nil, err
	}
	return toSamples(vec), nil
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
		if slices.Contains(f.unselected, m[1]) {
			continue
		}
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

// answer answers an instant query like Prometheus, for promtest's
// HandleQuery.
func (f *fakeProm) answer(q string) (int, string) {
	vec, err := f.Query(context.Background(), q, time.Time{})
	var body map[string]any
	code := http.StatusOK
	if err != nil {
		code = http.StatusServiceUnavailable
		body = map[string]any{"status": "error", "errorType": "unavailable", "error": err.Error()}
	} else {
		body = map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": vec}}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	return code, string(b)
}

// toSamples returns vec as Samples, with the labels of each sample sorted
// by name as Prometheus sends them.
func toSamples(vec model.Vector) promclient.Samples {
	out := make(promclient.Samples, len(vec))
	for i, smp := range vec {
		lbls := promclient.Labels{}
		for name, value := range smp.Metric {
			lbls = append(lbls, promclient.Label{Name: string(name), Value: string(value)})
		}
		slices.SortFunc(lbls, func(a, b promclient.Label) int { return strings.Compare(a.Name, b.Name) })
		out[i] = promclient.Sample{Labels: lbls, Value: smp.Value, Timestamp: smp.Timestamp}
	}
	return out
}
