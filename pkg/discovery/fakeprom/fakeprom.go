// Package fakeprom is an in-memory Prometheus HTTP API for tests: it holds a
// list of series and answers /api/v1/series, /api/v1/labels,
// /api/v1/label/<name>/values and the grouped discovery query
// (count by (...) (last_over_time(SELECTOR[d]))) the way Prometheus does,
// counts calls per endpoint and can be told to fail.
package fakeprom

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/pkg/discovery"
)

// Server is a fake Prometheus. Create it with New; it is safe for
// concurrent use.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	series   []model.LabelSet
	calls    map[string]int
	queries  []string
	failures map[string]Failure
	dropName bool
	answers  map[string]model.Vector
}

// Failure makes an endpoint answer an error.
type Failure struct {
	// Status is the HTTP status to answer (e.g. 400, 503).
	Status int
	// Body replaces the JSON error body when set (e.g. truncated JSON with
	// status 200).
	Body string
	// Match, when set, restricts the failure to requests whose query or
	// match[] contains it.
	Match string
}

// Endpoint names used by Calls and Fail.
const (
	Query       = "query"
	Series      = "series"
	Labels      = "labels"
	LabelValues = "label_values"
)

// New starts a fake Prometheus serving series. Close it when done.
func New(series []model.LabelSet) *Server {
	s := &Server{series: series, calls: map[string]int{}, failures: map[string]Failure{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// SetSeries replaces the series.
func (s *Server) SetSeries(series []model.LabelSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.series = series
}

// Fail makes endpoint answer f until Fail is called again with a zero
// Failure.
func (s *Server) Fail(endpoint string, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f == (Failure{}) {
		delete(s.failures, endpoint)
		return
	}
	s.failures[endpoint] = f
}

// Answer makes the query endpoint answer expr (exactly as sent) with v,
// for queries other than the grouped discovery query.
func (s *Server) Answer(expr string, v model.Vector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answers == nil {
		s.answers = map[string]model.Vector{}
	}
	s.answers[expr] = v
}

// DropMetricName makes grouped queries lose __name__, as a backend whose
// last_over_time drops the metric name would.
func (s *Server) DropMetricName(drop bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropName = drop
}

// Calls returns how many requests endpoint received.
func (s *Server) Calls(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[endpoint]
}

// Queries returns the PromQL queries received, in order.
func (s *Server) Queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var endpoint string
	switch {
	case r.URL.Path == "/api/v1/query":
		endpoint = Query
	case r.URL.Path == "/api/v1/series":
		endpoint = Series
	case r.URL.Path == "/api/v1/labels":
		endpoint = Labels
	case strings.HasPrefix(r.URL.Path, "/api/v1/label/") && strings.HasSuffix(r.URL.Path, "/values"):
		endpoint = LabelValues
	default:
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.calls[endpoint]++
	if endpoint == Query {
		s.queries = append(s.queries, r.Form.Get("query"))
	}
	f, failing := s.failures[endpoint]
	series := s.series
	dropName := s.dropName
	answer, answered := s.answers[r.Form.Get("query")]
	s.mu.Unlock()
	if failing && (f.Match == "" || strings.Contains(r.Form.Get("query")+strings.Join(r.Form["match[]"], ","), f.Match)) {
		if f.Body != "" {
			w.WriteHeader(f.Status)
			_, _ = w.Write([]byte(f.Body))
			return
		}
		writeError(w, f.Status, "injected failure")
		return
	}
	switch endpoint {
	case Series:
		out, err := selectAll(series, r.Form["match[]"])
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeData(w, out)
	case Labels, LabelValues:
		sel := series
		if ms := r.Form["match[]"]; len(ms) > 0 {
			var err error
			if sel, err = selectAll(series, ms); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
		}
		set := map[string]bool{}
		label := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/label/"), "/values")
		for _, ls := range sel {
			if endpoint == Labels {
				for n := range ls {
					set[string(n)] = true
				}
			} else if v, ok := ls[model.LabelName(label)]; ok {
				set[string(v)] = true
			}
		}
		out := make([]string, 0, len(set))
		for k := range set {
			out = append(out, k)
		}
		sort.Strings(out)
		writeData(w, out)
	case Query:
		if answered {
			writeData(w, map[string]any{"resultType": "vector", "result": answer})
			return
		}
		res, err := groupedQuery(series, r.Form.Get("query"), dropName)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeData(w, map[string]any{"resultType": "vector", "result": res})
	}
}

func selectAll(series []model.LabelSet, matchers []string) ([]model.LabelSet, error) {
	if len(matchers) == 0 {
		return nil, fmt.Errorf("no match[] parameter provided")
	}
	var sels []*discovery.Selector
	for _, m := range matchers {
		sel, err := discovery.ParseSelector(m)
		if err != nil {
			return nil, err
		}
		sels = append(sels, sel)
	}
	out := []model.LabelSet{}
	for _, ls := range series {
		for _, sel := range sels {
			if sel.Matches(ls) {
				out = append(out, ls)
				break
			}
		}
	}
	return out, nil
}

var (
	countByRe      = regexp.MustCompile(`^count by \(([^)]*)\) \((.*)\)$`)
	labelReplaceRe = regexp.MustCompile(`^label_replace\((.*), ("(?:[^"\\]|\\.)*"), ("(?:[^"\\]|\\.)*"), ("(?:[^"\\]|\\.)*"), ("(?:[^"\\]|\\.)*")\)$`)
	lastOverTimeRe = regexp.MustCompile(`^last_over_time\((.*)\[([0-9a-z]+)\]\)$`)
)

type sample struct {
	Metric model.LabelSet `json:"metric"`
	Value  [2]any         `json:"value"`
}

// groupedQuery evaluates the grouped discovery query,
//
//	count by (L...) (label_replace(...(last_over_time(SEL[d]))...))
//
// over every series (the fake has no time).
func groupedQuery(series []model.LabelSet, q string, dropName bool) ([]sample, error) {
	m := countByRe.FindStringSubmatch(q)
	if m == nil {
		return nil, fmt.Errorf("fakeprom: unsupported query %q", q)
	}
	var by []model.LabelName
	for _, l := range strings.Split(m[1], ",") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, `"`) {
			if err := json.Unmarshal([]byte(l), &l); err != nil {
				return nil, fmt.Errorf("fakeprom: label %s: %w", l, err)
			}
		}
		if l != "" {
			by = append(by, model.LabelName(l))
		}
	}
	selected, err := evalInner(series, m[2])
	if err != nil {
		return nil, err
	}
	counts := map[model.Fingerprint]*sample{}
	var order []model.Fingerprint
	for _, ls := range selected {
		g := model.LabelSet{}
		for _, l := range by {
			if l == model.MetricNameLabel && dropName {
				continue
			}
			if v, ok := ls[l]; ok {
				g[l] = v
			}
		}
		fp := g.Fingerprint()
		if c, ok := counts[fp]; ok {
			c.Value[1] = fmt.Sprint(atoi(c.Value[1].(string)) + 1)
			continue
		}
		counts[fp] = &sample{Metric: g, Value: [2]any{1700000000.0, "1"}}
		order = append(order, fp)
	}
	out := make([]sample, 0, len(order))
	for _, fp := range order {
		out = append(out, *counts[fp])
	}
	return out, nil
}

// evalInner evaluates label_replace(...) over last_over_time(SEL[d]).
func evalInner(series []model.LabelSet, expr string) ([]model.LabelSet, error) {
	if m := labelReplaceRe.FindStringSubmatch(expr); m != nil {
		in, err := evalInner(series, m[1])
		if err != nil {
			return nil, err
		}
		var args [4]string
		for i := range args {
			if err := json.Unmarshal([]byte(m[2+i]), &args[i]); err != nil {
				return nil, fmt.Errorf("fakeprom: label_replace argument %s: %w", m[2+i], err)
			}
		}
		re, err := regexp.Compile("^(?s:" + args[3] + ")$")
		if err != nil {
			return nil, fmt.Errorf("fakeprom: label_replace regex: %w", err)
		}
		out := make([]model.LabelSet, len(in))
		for i, ls := range in {
			src := string(ls[model.LabelName(args[2])])
			if idx := re.FindStringSubmatchIndex(src); idx != nil {
				ls = ls.Clone()
				v := re.ExpandString(nil, args[1], src, idx)
				if len(v) == 0 {
					delete(ls, model.LabelName(args[0]))
				} else {
					ls[model.LabelName(args[0])] = model.LabelValue(v)
				}
			}
			out[i] = ls
		}
		return out, nil
	}
	m := lastOverTimeRe.FindStringSubmatch(expr)
	if m == nil {
		return nil, fmt.Errorf("fakeprom: unsupported expression %q", expr)
	}
	sel, err := discovery.ParseSelector(m[1])
	if err != nil {
		return nil, err
	}
	var out []model.LabelSet
	for _, ls := range series {
		if sel.Matches(ls) {
			out = append(out, ls)
		}
	}
	return out, nil
}

func atoi(s string) int {
	n := 0
	fmt.Sscan(s, &n)
	return n
}

func writeData(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	errType := "bad_data"
	if status >= 500 {
		errType = "internal"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": errType, "error": msg})
}
