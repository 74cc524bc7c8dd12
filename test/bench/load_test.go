//go:build e2e && bench

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promscaler/promscaler/internal/servertiming"
)

// result is what a load run measured.
type result struct {
	requests, errors int
	elapsed          time.Duration
	latencies        []time.Duration // of the successful requests
	// due is, in open-loop runs, when each successful request was due
	// (aligned with latencies).
	due []time.Time
	// waits is, when every answer of the run carried one, each successful
	// request's wait for Prometheus from the adapter's Server-Timing header
	// (aligned with latencies); nil otherwise.
	waits    []time.Duration
	firstErr string
}

// ownPercentile returns the q-quantile, in ms, of what each request spent
// outside its wait for Prometheus (latency less the Server-Timing wait):
// the adapter's own time, the network's and the client's, per request. NaN
// without waits.
func (r result) ownPercentile(q float64) float64 {
	if len(r.waits) == 0 || len(r.waits) != len(r.latencies) {
		return math.NaN()
	}
	own := make([]time.Duration, len(r.latencies))
	for i, l := range r.latencies {
		own[i] = l - r.waits[i]
	}
	return result{latencies: own}.percentile(q)
}

// stalls returns the open-loop run's stalls (stallsOf): 3 or more
// consecutive requests each answered in 10 ms or more, at least five times
// the median of either leg of BenchmarkOverhead on the project's machine.
func (r result) stalls() stallStats {
	return stallsOf(r.due, r.latencies, 10*time.Millisecond, 3)
}

// writeTimeline writes one line per successful request of an open-loop
// run, "<due, Unix ns> <latency, ns>", to dir/name, for looking at what
// made a run's tail (PROMSCALER_BENCH_TIMELINE).
func (r result) writeTimeline(dir, name string) error {
	var b strings.Builder
	for i, at := range r.due {
		fmt.Fprintf(&b, "%d %d\n", at.UnixNano(), r.latencies[i].Nanoseconds())
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644)
}

func (r result) perSecond() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// percentile returns the q-quantile (0 < q <= 1) of the latencies in ms.
func (r result) percentile(q float64) float64 {
	if len(r.latencies) == 0 {
		return math.NaN()
	}
	l := slices.Clone(r.latencies)
	slices.Sort(l)
	i := max(int(math.Ceil(q*float64(len(l))))-1, 0)
	return float64(l[i]) / float64(time.Millisecond)
}

// do sends one GET and reads the whole answer; non-200 is an error.
func do(ctx context.Context, hc *http.Client, url string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return answer{}, err
	}
	return doRequest(hc, req)
}

// answer describes one response.
type answer struct {
	// bytes is the body's length as read: after decompression when the
	// transport decoded it.
	bytes int
	// encoding is the Content-Encoding on the wire: "gzip" when the
	// transport asked for it and decoded it (resp.Uncompressed), the
	// header's value otherwise ("" for identity).
	encoding string
	// promWait is the adapter's Server-Timing wait for Prometheus, when
	// the answer had one (hasWait).
	promWait time.Duration
	hasWait  bool
}

func (a answer) encodingName() string {
	if a.encoding == "" {
		return "identity"
	}
	return a.encoding
}

// doRequest sends req and reads the whole answer; non-200 is an error.
func doRequest(hc *http.Client, req *http.Request) (answer, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	a := answer{encoding: resp.Header.Get("Content-Encoding")}
	a.promWait, a.hasWait = servertiming.Parse(resp.Header.Get(servertiming.HeaderName))
	if resp.Uncompressed {
		a.encoding = "gzip"
	}
	n, err := io.Copy(io.Discard, resp.Body)
	a.bytes = int(n)
	if err != nil {
		return a, err
	}
	if resp.StatusCode != http.StatusOK {
		return a, &httpError{code: resp.StatusCode}
	}
	return a, nil
}

// wireBytes sends req asking for gzip itself, so the transport does not
// decode the body, and returns the body's length on the wire and its
// Content-Encoding: what the same request costs on the wire when the
// transport asks for gzip.
func wireBytes(hc *http.Client, req *http.Request) (int, string, error) {
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = &httpError{code: resp.StatusCode}
	}
	return int(n), resp.Header.Get("Content-Encoding"), err
}

// promQueryRequest is an instant query at "now" of Prometheus at base, sent
// as the adapter sends it: GET, or a form POST when the URL would be longer
// than 4 KiB (prom.MaxGETURLLength).
func promQueryRequest(ctx context.Context, base, query string) (*http.Request, error) {
	form := url.Values{"query": {query}}.Encode()
	u := base + "/api/v1/query"
	if len(u)+1+len(form) <= 4096 {
		return http.NewRequestWithContext(ctx, http.MethodGet, u+"?"+form, nil)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req, nil
}

// sequential sends n requests one at a time and returns their latencies and
// the last answer.
func sequential(n int, newReq func() (*http.Request, error), hc *http.Client) (result, answer) {
	var (
		r           result
		last        answer
		withoutWait int
	)
	t0 := time.Now()
	for range n {
		t := time.Now()
		req, err := newReq()
		if err == nil {
			last, err = doRequest(hc, req)
		}
		if err != nil {
			r.errors++
			if r.firstErr == "" {
				r.firstErr = err.Error()
			}
			continue
		}
		r.latencies = append(r.latencies, time.Since(t))
		if last.hasWait {
			r.waits = append(r.waits, last.promWait)
		} else {
			withoutWait++
		}
	}
	if withoutWait > 0 {
		r.waits = nil
	}
	r.elapsed = time.Since(t0)
	r.requests = len(r.latencies) + r.errors
	return r, last
}

type httpError struct{ code int }

func (e *httpError) Error() string { return "HTTP " + http.StatusText(e.code) }

// closedLoop runs workers goroutines for d, each sending its next request
// as soon as the previous one is answered; url(i) is worker i's URL.
func closedLoop(ctx context.Context, hc *http.Client, workers int, d time.Duration, url func(worker int) string) result {
	var (
		mu  sync.Mutex
		res result
		wg  sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			errs := 0
			first := ""
			u := url(w)
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				if _, err := do(ctx, hc, u); err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			res.errors += errs
			if res.firstErr == "" {
				res.firstErr = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.requests = len(res.latencies) + res.errors
	return res
}

// openLoop sends rate requests per second for d whatever the answers'
// latency (each on its own goroutine, at most 4,096 in flight) and measures
// each latency from its scheduled start, so a stall counts against every
// request it delayed.
func openLoop(ctx context.Context, hc *http.Client, rate int, d time.Duration, url string) result {
	var (
		mu       sync.Mutex
		res      result
		wg       sync.WaitGroup
		inflight atomic.Int64
		dropped  int
		// withoutWait counts answers without a Server-Timing wait.
		withoutWait int
	)
	period := time.Second / time.Duration(rate)
	n := int(d / period)
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * period)
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		if ctx.Err() != nil {
			break
		}
		if inflight.Load() >= 4096 {
			dropped++
			continue
		}
		inflight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inflight.Add(-1)
			a, err := do(ctx, hc, url)
			lat := time.Since(at)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errors++
				if res.firstErr == "" {
					res.firstErr = err.Error()
				}
				return
			}
			res.latencies = append(res.latencies, lat)
			res.due = append(res.due, at)
			if a.hasWait {
				res.waits = append(res.waits, a.promWait)
			} else {
				withoutWait++
			}
		}()
	}
	wg.Wait()
	if withoutWait > 0 {
		res.waits = nil
	}
	res.elapsed = time.Since(start)
	res.errors += dropped
	res.requests = len(res.latencies) + res.errors
	return res
}

// queryLog follows Prometheus's query log from the offset it had when
// created.
type queryLog struct {
	path   string
	offset int64
}

func newQueryLog(path string) *queryLog {
	q := &queryLog{path: path}
	if fi, err := os.Stat(path); err == nil {
		q.offset = fi.Size()
	}
	return q
}

// loggedQuery is one entry of Prometheus's query log.
type loggedQuery struct {
	query string
	// start is the query's evaluation time: for an instant query at "now",
	// when Prometheus received it (millisecond precision).
	start time.Time
	// logged is when Prometheus logged it, after it ran.
	logged time.Time
	// exec is the query's execTotalTime.
	exec time.Duration
}

// entries returns the queries logged since the log was followed (or last
// read) whose PromQL contains substr, after a short wait for Prometheus to
// write the last ones.
func (q *queryLog) entries(substr string) ([]loggedQuery, error) {
	time.Sleep(300 * time.Millisecond)
	f, err := os.Open(q.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(q.offset, io.SeekStart); err != nil {
		return nil, err
	}
	var out []loggedQuery
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			q.offset += int64(len(line))
			var entry struct {
				Params struct {
					Query string    `json:"query"`
					Start time.Time `json:"start"`
				} `json:"params"`
				Stats struct {
					Timings struct {
						ExecTotalTime float64 `json:"execTotalTime"`
					} `json:"timings"`
				} `json:"stats"`
				Time time.Time `json:"time"` // promslog's record time
			}
			if json.Unmarshal(line, &entry) == nil && strings.Contains(entry.Params.Query, substr) {
				out = append(out, loggedQuery{
					query:  entry.Params.Query,
					start:  entry.Params.Start,
					logged: entry.Time,
					exec:   time.Duration(entry.Stats.Timings.ExecTotalTime * float64(time.Second)),
				})
			}
		}
		if err != nil {
			break
		}
	}
	return out, nil
}
