// Package promtest is the project's one fake Prometheus for tests: an
// httptest server speaking the Prometheus HTTP API. It holds a list of
// series and answers /api/v1/series, /api/v1/labels and
// /api/v1/label/<name>/values (with match[]: every selector form
// Prometheus's parser accepts, several matchers on one label included;
// start and end are ignored, every series is current) and the grouped
// discovery query (count by / sum by over label_replace over
// last_over_time(SELECTOR[d])) the way Prometheus does. Instant queries
// can also be answered with a fixed vector per query (Answer) or by a
// function of the query (HandleQuery), or evaluated over samples with
// values (SetSamples); requests can be held (Hold) to
// test coalescing and timeouts, made to fail or hang (Fail), and are
// recorded (Queries, Calls, Requests). A test of the HTTP client itself
// (methods, headers, bodies, broken answers) answers every request with
// its own handler (Handle) and still gets the recording, holding and
// failures.
package promtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// promql is Prometheus's own parser: promtest imports no package of the
// project, so that every package's tests can use it.
var promql = parser.NewParser(parser.Options{})

// selector is a parsed series selector.
type selector []*labels.Matcher

func parseSelector(s string) (selector, error) {
	ms, err := promql.ParseMetricSelector(s)
	if err != nil {
		return nil, fmt.Errorf("promtest: series selector %q: %w", s, err)
	}
	return ms, nil
}

// matches reports whether a series with these labels is selected, an
// absent label counting as the empty value.
func (sel selector) matches(ls model.LabelSet) bool {
	for _, m := range sel {
		if !m.Matches(string(ls[model.LabelName(m.Name)])) {
			return false
		}
	}
	return true
}

// Server is a fake Prometheus. Create it with New; it is safe for
// concurrent use.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	series   []model.LabelSet
	calls    map[string]int
	queries  []string
	matches  []string
	failures map[string]Failure
	dropName bool
	answers  map[string]model.Vector
	samples  model.Vector // SetSamples
	ignored  []string
	handle   func(query string) (int, string)
	handler  http.HandlerFunc // when set, answers every request
	requests []Request
	gate     chan struct{} // when set, every request waits for it to close
	arrived  chan struct{} // when set, receives once per request
}

// Request is what the server saw of one request.
type Request struct {
	Method string
	Path   string
	// Form holds the URL query and, for a form POST, the body's fields.
	Form   url.Values
	Header http.Header
	Body   []byte
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
	// Hang, instead of an answer, holds the request until its client
	// gives up.
	Hang bool
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
	s := NewUnstarted(series)
	s.Start()
	return s
}

// NewUnstarted returns a fake Prometheus not started yet: set its TLS or
// Config, then call Start or StartTLS.
func NewUnstarted(series []model.LabelSet) *Server {
	s := &Server{series: series, calls: map[string]int{}, failures: map[string]Failure{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
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

// HandleQuery makes /api/v1/query answer every query with the status and
// JSON body f returns (the other endpoints are unchanged); nil restores
// the series-based answers.
func (s *Server) HandleQuery(f func(query string) (status int, body string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handle = f
}

// Handle makes h answer every request, on any path, after it is recorded,
// held (Hold) and failed (Fail) as the others; nil restores the
// series-based answers. h may read the request's body again.
func (s *Server) Handle(h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

// Requests returns the requests received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Hold makes every later request wait until release is called (or its
// client gives up), reporting each arrival on the returned channel
// (buffered for n arrivals; more block the request until read).
func (s *Server) Hold(n int) (arrived <-chan struct{}, release func()) {
	gate := make(chan struct{})
	ch := make(chan struct{}, n)
	s.mu.Lock()
	s.gate, s.arrived = gate, ch
	s.mu.Unlock()
	var once sync.Once
	return ch, func() { once.Do(func() { close(gate) }) }
}

// DropMetricName makes the fake behave like VictoriaMetrics: last_over_time
// drops __name__ unless followed by keep_metric_names (which is otherwise
// rejected as a bad query, as Prometheus does).
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

// Matches returns the match[] selectors received by any endpoint, in order.
func (s *Server) Matches() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.matches)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		err = r.ParseForm()
		r.Body = io.NopCloser(bytes.NewReader(body)) // for a handler
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	endpoint := endpointOf(r.URL.Path)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Form: maps.Clone(r.Form), Header: r.Header.Clone(), Body: body})
	s.calls[endpoint]++
	if endpoint == Query {
		s.queries = append(s.queries, r.Form.Get("query"))
	}
	s.matches = append(s.matches, r.Form["match[]"]...)
	f, failing := s.failures[endpoint]
	series, dropName := s.series, s.dropName
	answer, answered := s.answers[r.Form.Get("query")]
	samples, ignored := s.samples, s.ignored
	handler, handle, gate, arrived := s.handler, s.handle, s.gate, s.arrived
	s.mu.Unlock()
	if arrived != nil {
		arrived <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	failing = failing && (f.Match == "" || strings.Contains(r.Form.Get("query")+strings.Join(r.Form["match[]"], ","), f.Match))
	switch {
	case failing:
		fail(w, r, f)
	case handler != nil:
		handler(w, r)
	case endpoint == "":
		http.NotFound(w, r)
	case handle != nil && endpoint == Query:
		code, body := handle(r.Form.Get("query"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	case endpoint == Query && answered:
		writeData(w, map[string]any{"resultType": "vector", "result": answer})
	case endpoint == Query && samples != nil:
		res, err := evalSamples(samples, ignored, r.Form.Get("query"))
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeData(w, map[string]any{"resultType": "vector", "result": res})
	default:
		answerSeries(w, r, endpoint, series, dropName)
	}
}

// fail answers a request as f says.
func fail(w http.ResponseWriter, r *http.Request, f Failure) {
	switch {
	case f.Hang:
		<-r.Context().Done()
	case f.Body != "":
		w.WriteHeader(f.Status)
		_, _ = w.Write([]byte(f.Body))
	default:
		writeError(w, f.Status, "injected failure")
	}
}

// answerSeries answers a request to endpoint from the series.
func answerSeries(w http.ResponseWriter, r *http.Request, endpoint string, series []model.LabelSet, dropName bool) {
	switch endpoint {
	case Series:
		out, err := selectAll(series, r.Form["match[]"])
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeData(w, out)
	case Labels, LabelValues:
		answerLabels(w, r, endpoint, series)
	case Query:
		res, err := groupedQuery(series, r.Form.Get("query"), dropName)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeData(w, map[string]any{"resultType": "vector", "result": res})
	}
}

// endpointOf names the API endpoint of a request path, "" for none.
func endpointOf(path string) string {
	switch {
	case path == "/api/v1/query":
		return Query
	case path == "/api/v1/series":
		return Series
	case path == "/api/v1/labels":
		return Labels
	case strings.HasPrefix(path, "/api/v1/label/") && strings.HasSuffix(path, "/values"):
		return LabelValues
	}
	return ""
}

// answerLabels answers /api/v1/labels (endpoint Labels) or
// /api/v1/label/<name>/values over the series the match[] selectors select
// (every series without one).
func answerLabels(w http.ResponseWriter, r *http.Request, endpoint string, series []model.LabelSet) {
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
	writeData(w, slices.Sorted(maps.Keys(set)))
}

func selectAll(series []model.LabelSet, matchers []string) ([]model.LabelSet, error) {
	if len(matchers) == 0 {
		return nil, fmt.Errorf("no match[] parameter provided")
	}
	var sels []selector
	for _, m := range matchers {
		sel, err := parseSelector(m)
		if err != nil {
			return nil, err
		}
		sels = append(sels, sel)
	}
	out := []model.LabelSet{}
	for _, ls := range series {
		for _, sel := range sels {
			if sel.matches(ls) {
				out = append(out, ls)
				break
			}
		}
	}
	return out, nil
}

var (
	aggregateRe    = regexp.MustCompile(`^(count|sum) by \(([^)]*)\) \((.*)\)$`)
	labelReplaceRe = regexp.MustCompile(`^label_replace\((.*), ("(?:[^"\\]|\\.)*"), ("(?:[^"\\]|\\.)*"), ("(?:[^"\\]|\\.)*"), ("(?:[^"\\]|\\.)*")\)$`)
	lastOverTimeRe = regexp.MustCompile(`^last_over_time\((.*)\[([0-9a-z]+)\]\)( keep_metric_names)?$`)
)

type sample struct {
	Metric model.LabelSet `json:"metric"`
	Value  [2]any         `json:"value"`
}

// point is one element of an evaluated instant vector.
type point struct {
	labels model.LabelSet
	value  float64
}

// groupedQuery evaluates the grouped discovery queries: count by and sum
// by over label_replace over count by over last_over_time(SEL[d]), over
// every series (the fake has no time; every sample is 1). With dropName,
// last_over_time drops __name__ as some backends do.
func groupedQuery(series []model.LabelSet, q string, dropName bool) ([]sample, error) {
	if !aggregateRe.MatchString(q) {
		return nil, fmt.Errorf("promtest: unsupported query %q", q)
	}
	pts, err := eval(series, q, dropName)
	if err != nil {
		return nil, err
	}
	out := make([]sample, len(pts))
	for i, p := range pts {
		out[i] = sample{Metric: p.labels, Value: [2]any{1700000000.0, fmt.Sprint(p.value)}}
	}
	return out, nil
}

// evalAggregate evaluates count by or sum by (m: aggregateRe's match).
func evalAggregate(series []model.LabelSet, m []string, dropName bool) ([]point, error) {
	var by []model.LabelName
	for _, l := range strings.Split(m[2], ",") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, `"`) {
			if err := json.Unmarshal([]byte(l), &l); err != nil {
				return nil, fmt.Errorf("promtest: label %s: %w", l, err)
			}
		}
		if l != "" {
			by = append(by, model.LabelName(l))
		}
	}
	in, err := eval(series, m[3], dropName)
	if err != nil {
		return nil, err
	}
	groups := map[model.Fingerprint]*point{}
	var order []model.Fingerprint
	for _, p := range in {
		g := model.LabelSet{}
		for _, l := range by {
			if v, ok := p.labels[l]; ok {
				g[l] = v
			}
		}
		add := 1.0
		if m[1] == "sum" {
			add = p.value
		}
		fp := g.Fingerprint()
		if acc, ok := groups[fp]; ok {
			acc.value += add
			continue
		}
		groups[fp] = &point{labels: g, value: add}
		order = append(order, fp)
	}
	out := make([]point, len(order))
	for i, fp := range order {
		out[i] = *groups[fp]
	}
	return out, nil
}

func eval(series []model.LabelSet, expr string, dropName bool) ([]point, error) {
	if m := aggregateRe.FindStringSubmatch(expr); m != nil {
		return evalAggregate(series, m, dropName)
	}
	if m := labelReplaceRe.FindStringSubmatch(expr); m != nil {
		in, err := eval(series, m[1], dropName)
		if err != nil {
			return nil, err
		}
		var args [4]string
		for i := range args {
			if err := json.Unmarshal([]byte(m[2+i]), &args[i]); err != nil {
				return nil, fmt.Errorf("promtest: label_replace argument %s: %w", m[2+i], err)
			}
		}
		re, err := regexp.Compile("^(?s:" + args[3] + ")$")
		if err != nil {
			return nil, fmt.Errorf("promtest: label_replace regex: %w", err)
		}
		for i, p := range in {
			src := string(p.labels[model.LabelName(args[2])])
			if idx := re.FindStringSubmatchIndex(src); idx != nil {
				ls := p.labels.Clone()
				if v := re.ExpandString(nil, args[1], src, idx); len(v) == 0 {
					delete(ls, model.LabelName(args[0]))
				} else {
					ls[model.LabelName(args[0])] = model.LabelValue(v)
				}
				in[i].labels = ls
			}
		}
		return in, nil
	}
	m := lastOverTimeRe.FindStringSubmatch(expr)
	if m == nil {
		return nil, fmt.Errorf("promtest: unsupported expression %q", expr)
	}
	keep := m[3] != ""
	if keep && !dropName {
		return nil, fmt.Errorf("promtest: keep_metric_names is MetricsQL, not PromQL")
	}
	sel, err := parseSelector(m[1])
	if err != nil {
		return nil, err
	}
	var out []point
	for _, ls := range series {
		if !sel.matches(ls) {
			continue
		}
		if dropName && !keep {
			ls = ls.Clone()
			delete(ls, model.MetricNameLabel)
		}
		out = append(out, point{labels: ls, value: 1})
	}
	return out, nil
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
