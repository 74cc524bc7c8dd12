//go:build e2e && bench

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// result is what a load run measured.
type result struct {
	requests, errors int
	elapsed          time.Duration
	latencies        []time.Duration // of the successful requests
	firstErr         string
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
func do(ctx context.Context, hc *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return int(n), err
	}
	if resp.StatusCode != http.StatusOK {
		return int(n), &httpError{code: resp.StatusCode}
	}
	return int(n), nil
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
			_, err := do(ctx, hc, url)
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
		}()
	}
	wg.Wait()
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

// queries returns the PromQL of the queries logged since the log was
// followed (or last read) that contain substr, after a short wait for
// Prometheus to write the last ones.
func (q *queryLog) queries(substr string) ([]string, error) {
	time.Sleep(300 * time.Millisecond)
	f, err := os.Open(q.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(q.offset, io.SeekStart); err != nil {
		return nil, err
	}
	var out []string
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			q.offset += int64(len(line))
			var entry struct {
				Params struct {
					Query string `json:"query"`
				} `json:"params"`
			}
			if json.Unmarshal(line, &entry) == nil && strings.Contains(entry.Params.Query, substr) {
				out = append(out, entry.Params.Query)
			}
		}
		if err != nil {
			break
		}
	}
	return out, nil
}
