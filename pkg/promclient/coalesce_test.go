package promclient

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/servertiming"
)

// TestGroupLandedResults covers the freshness rule on the group alone: a
// first call lands its result at t0+landAfter (the fake clock steps while
// it runs), the clock then moves by wait, and a second call with the same
// key arrives at t0+arrived. With overlapped, a call whose request arrived
// at t0 takes the result before the second call: the result has answered
// more than the call that sent its query (a burst).
func TestGroupLandedResults(t *testing.T) {
	t0 := time.Unix(1000, 0)
	errBoom := errors.New("boom")
	tests := []struct {
		name      string
		keep      bool
		window    time.Duration
		firstErr  error
		landAfter time.Duration
		wait      time.Duration
		// arrived is the second call's arrival, relative to t0; nil means
		// unknown.
		arrived    *time.Duration
		overlapped bool
		// wantCalls is how many times fn ran for the two calls; wantShared
		// how many calls were answered without running it.
		wantCalls  int
		wantShared int
		wantVal    any
	}{{
		name: "arrival before landing reuses", keep: true,
		landAfter: 3 * time.Millisecond, arrived: dur(time.Millisecond),
		wantCalls: 1, wantShared: 1, wantVal: 1,
	}, {
		name: "arrival before the first call started reuses", keep: true,
		landAfter: 3 * time.Millisecond, arrived: dur(-time.Second),
		wantCalls: 1, wantShared: 1, wantVal: 1,
	}, {
		name: "arrival at landing reuses", keep: true,
		landAfter: 3 * time.Millisecond, arrived: dur(3 * time.Millisecond), wait: time.Second,
		wantCalls: 1, wantShared: 1, wantVal: 1,
	}, {
		name: "arrival after landing queries again", keep: true,
		landAfter: 3 * time.Millisecond, arrived: dur(3*time.Millisecond + time.Nanosecond),
		wantCalls: 2, wantShared: 0, wantVal: 2,
	}, {
		name: "in a burst, arrival after landing but within the window reuses", keep: true, window: 100 * time.Millisecond,
		landAfter: 3 * time.Millisecond, arrived: dur(100 * time.Millisecond), wait: time.Second, overlapped: true,
		wantCalls: 1, wantShared: 2, wantVal: 1,
	}, {
		name: "alone, arrival after landing within the window queries again", keep: true, window: 100 * time.Millisecond,
		landAfter: 3 * time.Millisecond, arrived: dur(50 * time.Millisecond), wait: time.Second,
		wantCalls: 2, wantShared: 0, wantVal: 2,
	}, {
		name: "in a burst, arrival after the others took it still reuses within the window", keep: true, window: 100 * time.Millisecond,
		landAfter: 3 * time.Millisecond, arrived: dur(50 * time.Millisecond), wait: 20 * time.Millisecond, overlapped: true,
		wantCalls: 1, wantShared: 2, wantVal: 1,
	}, {
		name: "in a burst, arrival just past the window queries again", keep: true, window: 100 * time.Millisecond,
		landAfter: 3 * time.Millisecond, arrived: dur(100*time.Millisecond + time.Nanosecond), wait: time.Second, overlapped: true,
		wantCalls: 2, wantShared: 1, wantVal: 2,
	}, {
		name: "a window shorter than the flight changes nothing", keep: true, window: time.Millisecond,
		landAfter: 3 * time.Millisecond, arrived: dur(3*time.Millisecond + time.Nanosecond),
		wantCalls: 2, wantShared: 0, wantVal: 2,
	}, {
		name: "the window does not reuse errors", keep: true, window: 100 * time.Millisecond, firstErr: errBoom,
		landAfter: 3 * time.Millisecond, arrived: dur(50 * time.Millisecond),
		wantCalls: 2, wantShared: 0, wantVal: 2,
	}, {
		name: "the window needs a known arrival", keep: true, window: 100 * time.Millisecond,
		landAfter: 3 * time.Millisecond,
		wantCalls: 2, wantShared: 0, wantVal: 2,
	}, {
		name: "the window applies only to kept (now) queries", window: 100 * time.Millisecond,
		landAfter: 3 * time.Millisecond, arrived: dur(50 * time.Millisecond),
		wantCalls: 2, wantShared: 0, wantVal: 2,
	}, {
		name: "unknown arrival queries again", keep: true,
		landAfter: 3 * time.Millisecond,
		wantCalls: 2, wantShared: 0, wantVal: 2,
	}, {
		name: "an error is not reused", keep: true, firstErr: errBoom,
		landAfter: 3 * time.Millisecond, arrived: dur(0),
		wantCalls: 2, wantShared: 0, wantVal: 2,
	}, {
		name:      "not kept without keep",
		landAfter: 3 * time.Millisecond, arrived: dur(0),
		wantCalls: 2, wantShared: 0, wantVal: 2,
	}, {
		name: "still reused just within the retention", keep: true,
		landAfter: 3 * time.Millisecond, arrived: dur(0), wait: landedRetention - time.Nanosecond,
		wantCalls: 1, wantShared: 1, wantVal: 1,
	}, {
		name: "dropped after the retention", keep: true,
		landAfter: 3 * time.Millisecond, arrived: dur(0), wait: landedRetention,
		wantCalls: 2, wantShared: 0, wantVal: 2,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(t0)
			g := &group{clock: clk, window: tc.window}
			var calls, shared int
			fn := func(context.Context) (any, error) {
				calls++
				clk.SetTime(clk.Now().Add(tc.landAfter))
				if calls == 1 && tc.firstErr != nil {
					return nil, tc.firstErr
				}
				return calls, nil
			}
			onShare := func() { shared++ }
			ctx := context.Background()

			_, err := g.do(ctx, "k", share{keep: tc.keep, arrived: t0}, fn, onShare)
			if !errors.Is(err, tc.firstErr) {
				t.Fatalf("first call: got error %v, want %v", err, tc.firstErr)
			}
			clk.SetTime(clk.Now().Add(tc.wait))
			if tc.overlapped {
				if _, err := g.do(ctx, "k", share{keep: tc.keep, arrived: t0}, fn, onShare); err != nil {
					t.Fatalf("overlapping call: %v", err)
				}
			}
			sh := share{keep: tc.keep}
			if tc.arrived != nil {
				sh.arrived = t0.Add(*tc.arrived)
			}
			got, err := g.do(ctx, "k", sh, fn, onShare)
			if err != nil {
				t.Fatalf("second call: %v", err)
			}
			if diff := cmp.Diff(tc.wantVal, got); diff != "" {
				t.Errorf("second call's result (-want +got):\n%s", diff)
			}
			if calls != tc.wantCalls || shared != tc.wantShared {
				t.Errorf("fn ran %d times and %d calls shared, want %d and %d", calls, shared, tc.wantCalls, tc.wantShared)
			}
		})
	}
}

func dur(d time.Duration) *time.Duration { return &d }

// TestGroupLandedRetention checks that results are dropped once older than
// landedRetention, even for keys nobody asks for again, and that the number
// kept is bounded.
func TestGroupLandedRetention(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	g := &group{clock: clk}
	ctx := context.Background()
	fn := func(context.Context) (any, error) { return 1, nil }
	for i := range 10 {
		if _, err := g.do(ctx, strconv.Itoa(i), share{keep: true}, fn, nil); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(clk.Now().Add(landedRetention / 2))
	if _, err := g.do(ctx, "fresh", share{keep: true}, fn, nil); err != nil {
		t.Fatal(err)
	}
	if got := landedCount(g); got != 11 {
		t.Errorf("kept %d results, want 11", got)
	}
	clk.SetTime(clk.Now().Add(landedRetention / 2))
	// Any call sweeps, including one that keeps nothing.
	if _, err := g.do(ctx, "other", share{}, fn, nil); err != nil {
		t.Fatal(err)
	}
	if got := landedCount(g); got != 1 {
		t.Errorf("kept %d results after the retention, want 1 (the fresh one)", got)
	}
	clk.SetTime(clk.Now().Add(landedRetention))
	if _, err := g.do(ctx, "other", share{}, fn, nil); err != nil {
		t.Fatal(err)
	}
	if got := landedCount(g); got != 0 {
		t.Errorf("kept %d results, want none", got)
	}

	// The number of results kept is bounded; a sweep makes room again.
	for i := range maxCacheEntries + 10 {
		if _, err := g.do(ctx, strconv.Itoa(i), share{keep: true}, fn, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := landedCount(g); got != maxCacheEntries {
		t.Errorf("kept %d results, want the bound %d", got, maxCacheEntries)
	}
	clk.SetTime(clk.Now().Add(landedRetention))
	if _, err := g.do(ctx, "new", share{keep: true}, fn, nil); err != nil {
		t.Fatal(err)
	}
	if got := landedCount(g); got != 1 {
		t.Errorf("kept %d results after the retention, want 1 (the new one)", got)
	}
}

func landedCount(g *group) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.landed)
}

// TestGroupLandedConcurrent runs callers over a few keys, with arrivals
// before and after landings, while the clock moves; run with -race. Every
// caller must get its own key's answer.
func TestGroupLandedConcurrent(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	g := &group{clock: clk}
	var wg sync.WaitGroup
	for i := range 400 {
		key := strconv.Itoa(i % 4)
		wg.Go(func() {
			ctx := context.Background()
			if i%7 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			sh := share{keep: i%5 != 0, arrived: clk.Now().Add(time.Duration(i%3-1) * time.Millisecond)}
			got, err := g.do(ctx, key, sh, func(context.Context) (any, error) {
				clk.SetTime(clk.Now().Add(time.Millisecond))
				if i%11 == 0 {
					return nil, errors.New("boom")
				}
				return key, nil
			}, nil)
			if err != nil {
				return
			}
			if got != key {
				t.Errorf("caller of key %s got %v", key, got)
			}
		})
	}
	wg.Wait()
}

// TestIdenticalRequestsSpreadOverTimeSendOneQuery is the adapter's case:
// 1,000 requests for the same "now" query reach the client one after
// another rather than all while one query is in flight. Every request
// arrived at the server (request.ReceivedTimestampFrom) before the first
// answer landed, so they all share it: one query. A second wave arriving
// after that answer landed sends exactly one more.
func TestIdenticalRequestsSpreadOverTimeSendOneQuery(t *testing.T) {
	const n = 1000
	t0 := time.Unix(1000, 0)
	clk := clocktesting.NewFakePassiveClock(t0)
	var served atomic.Int32
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		k := served.Add(1)
		// The answer takes a few (real) milliseconds and lands 1ms later
		// on the fake clock than the query was sent.
		time.Sleep(time.Duration(1+k%5) * time.Millisecond)
		clk.SetTime(clk.Now().Add(time.Millisecond))
		io.WriteString(w, vectorBody)
	})
	m := metrics.New()
	c := newTestClient(t, Config{Address: f.URL, Metrics: m, Clock: clk, ArrivalTime: request.ReceivedTimestampFrom})

	wave := func(arrival func(i int) time.Time) {
		t.Helper()
		var wg sync.WaitGroup
		results := make([]Samples, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				ctx := request.WithReceivedTimestamp(context.Background(), arrival(i))
				// Spread the calls out in real time too, as the API
				// server's filters do.
				time.Sleep(time.Duration(i%100) * 100 * time.Microsecond)
				results[i], errs[i] = c.QuerySamples(ctx, "sum(up)", time.Time{})
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Query %d: %v", i, errs[i])
			}
			if len(results[i]) != 1 || results[i][0].Value != 0.5 {
				t.Fatalf("Query %d: got %v, want the shared answer", i, results[i])
			}
		}
	}

	// Arrivals spread over the second before the first query was sent.
	wave(func(i int) time.Time { return t0.Add(-time.Duration(i) * time.Millisecond) })
	if got := served.Load(); got != 1 {
		t.Errorf("Prometheus served %d queries for %d identical requests that arrived before the first answer, want 1", got, n)
	}
	if got := testutil.ToFloat64(m.CoalescedQueries.WithLabelValues(metrics.DefaultBackend, metrics.EndpointQuery)); got != n-1 {
		t.Errorf("coalesced = %v, want %d", got, n-1)
	}

	// A wave that arrived after that answer landed queries again, once.
	after := clk.Now().Add(time.Nanosecond)
	wave(func(int) time.Time { return after })
	if got := served.Load(); got != 2 {
		t.Errorf("Prometheus served %d queries after a second wave, want 2", got)
	}
}

// TestDefaultWindowBurstAndSequential is the default coalescing window
// (NewOptions) at the client: in a burst, a request the handler chain took
// in after the first answer landed shares it, once it has answered another
// request than the one that sent the query, within the window of that
// query's send (over 100 pods Prometheus answers in about 1 ms while 1,000
// requests take up to ~250 ms to reach the client); a client asking one
// request at a time gets a query of its own each time, however soon it
// asks again.
func TestDefaultWindowBurstAndSequential(t *testing.T) {
	t0 := time.Unix(1000, 0)
	clk, f, served := newSlowVectorProm(t, t0)
	c := newTestClient(t, Config{Address: f.URL, Clock: clk, ArrivalTime: request.ReceivedTimestampFrom,
		CoalesceWindow: NewOptions().Default.CoalesceWindow})
	query := func(what string, arrived time.Duration) {
		t.Helper()
		ctx := request.WithReceivedTimestamp(context.Background(), t0.Add(arrived))
		if _, err := c.QuerySamples(ctx, "sum(up)", time.Time{}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	steps := []struct {
		what string
		// at is the clock when the call reaches the client; arrived when
		// its request reached the server (both after t0).
		at, arrived time.Duration
		wantQueries int32
	}{
		{what: "the burst's first request", at: 0, arrived: 0, wantQueries: 1},
		{what: "a request of the burst that arrived before the answer landed", at: 200 * time.Millisecond, arrived: 500 * time.Microsecond, wantQueries: 1},
		{what: "a request of the burst that arrived after it landed", at: 250 * time.Millisecond, arrived: 150 * time.Millisecond, wantQueries: 1},
		{what: "the last request of the burst", at: 900 * time.Millisecond, arrived: 240 * time.Millisecond, wantQueries: 1},
		{what: "a request past the window", at: 1100 * time.Millisecond, arrived: 1001 * time.Millisecond, wantQueries: 2},
		{what: "the same client's next request", at: 1110 * time.Millisecond, arrived: 1110 * time.Millisecond, wantQueries: 3},
		{what: "and the next", at: 1120 * time.Millisecond, arrived: 1120 * time.Millisecond, wantQueries: 4},
	}
	for _, st := range steps {
		clk.SetTime(t0.Add(st.at))
		query(st.what, st.arrived)
		if got := served.Load(); got != st.wantQueries {
			t.Fatalf("after %s: %d queries, want %d", st.what, got, st.wantQueries)
		}
	}
}

// TestLandedResultsOnlyForNowQueries checks what the freshness rule applies
// to: instant queries at "now" with ArrivalTime set. Queries at an explicit
// time, series and label calls, and clients without ArrivalTime send a
// query per sequential call as before.
func TestLandedResultsOnlyForNowQueries(t *testing.T) {
	t0 := time.Unix(1000, 0)
	arrivedAtT0 := func(context.Context) (time.Time, bool) { return t0, true }
	tests := []struct {
		name    string
		arrival func(context.Context) (time.Time, bool)
		call    func(c *Client) error
		want    int32
	}{{
		name: "now query", arrival: arrivedAtT0, want: 1,
		call: func(c *Client) error { _, err := c.QuerySamples(context.Background(), "up", time.Time{}); return err },
	}, {
		name: "now query without ArrivalTime", want: 2,
		call: func(c *Client) error { _, err := c.QuerySamples(context.Background(), "up", time.Time{}); return err },
	}, {
		name:    "arrival unknown",
		arrival: func(context.Context) (time.Time, bool) { return time.Time{}, false }, want: 2,
		call: func(c *Client) error { _, err := c.QuerySamples(context.Background(), "up", time.Time{}); return err },
	}, {
		name: "query at a time", arrival: arrivedAtT0, want: 2,
		call: func(c *Client) error { _, err := c.QuerySamples(context.Background(), "up", t0); return err },
	}, {
		name: "series", arrival: arrivedAtT0, want: 2,
		call: func(c *Client) error {
			_, err := c.Series(context.Background(), []string{"up"}, time.Time{}, time.Time{})
			return err
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(t0)
			var served atomic.Int32
			f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
				served.Add(1)
				clk.SetTime(clk.Now().Add(time.Millisecond))
				if r.URL.Path == "/api/v1/series" {
					io.WriteString(w, `{"status":"success","data":[{"__name__":"up"}]}`)
					return
				}
				io.WriteString(w, vectorBody)
			})
			c := newTestClient(t, Config{Address: f.URL, Clock: clk, ArrivalTime: tc.arrival})
			for i := range 2 {
				if err := tc.call(c); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if got := served.Load(); got != tc.want {
				t.Errorf("served %d requests for 2 sequential calls, want %d", got, tc.want)
			}
		})
	}
}

// TestLandedResultsShareAcrossTimeoutsOnlyPerKey checks that a client with
// another timeout (another key) does not take the first one's result.
func TestLandedResultsShareAcrossTimeoutsOnlyPerKey(t *testing.T) {
	t0 := time.Unix(1000, 0)
	clk, f, served := newSlowVectorProm(t, t0)
	c := newTestClient(t, Config{Address: f.URL, Clock: clk,
		ArrivalTime: func(context.Context) (time.Time, bool) { return t0, true }})
	for i, cl := range []*Client{c, c.WithTimeout(time.Minute), c, c.WithTimeout(time.Minute)} {
		if _, err := cl.QuerySamples(context.Background(), "up", time.Time{}); err != nil {
			t.Fatal(fmt.Errorf("call %d: %w", i, err))
		}
	}
	if got := served.Load(); got != 2 {
		t.Errorf("served %d, want 2 (one per timeout)", got)
	}
}

func keptSize(g *group) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.keptSize
}

// vecOfBytes is a one-sample vector whose resultBytes is size.
func vecOfBytes(t *testing.T, size int) Samples {
	t.Helper()
	overhead := resultMinBytes + sampleBytes + labelBytes + 1
	if size < overhead {
		t.Fatalf("vecOfBytes(%d): at least %d", size, overhead)
	}
	v := Samples{{Labels: Labels{{Name: "v", Value: strings.Repeat("x", size-overhead)}}, Value: 1}}
	if got := resultBytes(v); got != size {
		t.Fatalf("resultBytes = %d, want %d", got, size)
	}
	return v
}

// TestResultBytes checks the estimate on each kind of result: what its
// strings and parts hold, not how many samples it has.
func TestResultBytes(t *testing.T) {
	long := strings.Repeat("x", 1000)
	for _, tc := range []struct {
		name string
		val  any
		want int
	}{
		{"nil", nil, resultMinBytes},
		{"empty vector", Samples{}, resultMinBytes},
		{"two samples", Samples{{Labels: Labels{{"a", "b"}}}, {Labels: Labels{{"pod", long}}}},
			resultMinBytes + 2*sampleBytes + 2*labelBytes + 2 + 3 + 1000},
		{"histogram", Samples{{Histogram: &model.SampleHistogram{Buckets: model.HistogramBuckets{{}, {}}}}},
			resultMinBytes + sampleBytes + histogramBytes + 2*bucketBytes},
		{"series", []model.LabelSet{{"__name__": "up", "pod": model.LabelValue(long)}},
			resultMinBytes + 3*mapEntryBytes + len("__name__up") + 3 + 1000},
		{"strings", []string{"a", long}, resultMinBytes + 2*stringBytes + 1001},
	} {
		if got := resultBytes(tc.val); got != tc.want {
			t.Errorf("%s: resultBytes = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestGroupKeptBytesBudget checks that the landed results kept hold at
// most maxKeptBytes together (estimated by resultBytes): a result past the
// budget is not kept (and drops its key's older one), a smaller
// replacement makes room, and the sweep gives the room back. A single
// sample with a huge label counts for its bytes: a bound on samples kept
// a few such answers (1,446 MiB of 50 MB answers) for a minute.
func TestGroupKeptBytesBudget(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	g := &group{clock: clk}
	ctx := context.Background()
	keep := func(key string, val any) {
		t.Helper()
		if _, err := g.do(ctx, key, share{keep: true}, func(context.Context) (any, error) { return val, nil }, nil); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, wantKeys, wantSize int) {
		t.Helper()
		if got := landedCount(g); got != wantKeys {
			t.Errorf("%s: %d results kept, want %d", step, got, wantKeys)
		}
		if got := keptSize(g); got != wantSize {
			t.Errorf("%s: %d bytes kept, want %d", step, got, wantSize)
		}
	}
	keep("huge", vecOfBytes(t, maxKeptBytes+1))
	check("one sample past the budget", 0, 0)
	half := maxKeptBytes / 2
	keep("a", vecOfBytes(t, half))
	check("half the budget", 1, half)
	keep("b", vecOfBytes(t, half+1))
	check("past the budget", 1, half)
	keep("a", vecOfBytes(t, 1000))
	check("a smaller replacement", 1, 1000)
	keep("b", vecOfBytes(t, half+1))
	check("room again", 2, half+1001)
	keep("c", "not a result")
	check("anything else counts its minimum", 3, half+1001+resultMinBytes)
	keep("a", vecOfBytes(t, maxKeptBytes))
	check("a replacement past the budget drops the key", 2, half+1+resultMinBytes)
	clk.SetTime(clk.Now().Add(landedRetention))
	keep("e", vecOfBytes(t, maxKeptBytes-1))
	check("after the sweep", 1, maxKeptBytes-1)
}

// TestResultCacheBytesBudget: the result cache holds at most
// maxCacheBytes of results; one past it is not cached, expired entries
// make room.
func TestResultCacheBytesBudget(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	c := &resultCache{ttl: time.Second, clock: clk}
	c.put("huge", vecOfBytes(t, maxCacheBytes+1))
	if _, ok := c.get("huge"); ok {
		t.Error("a result past the cache's byte budget was cached")
	}
	c.put("a", vecOfBytes(t, maxCacheBytes/2))
	c.put("b", vecOfBytes(t, maxCacheBytes/2+1))
	if _, ok := c.get("b"); ok {
		t.Error("a result taking the cache past its byte budget was cached")
	}
	if _, ok := c.get("a"); !ok {
		t.Error("a result within the budget was not cached")
	}
	clk.SetTime(clk.Now().Add(time.Second))
	c.put("b", vecOfBytes(t, maxCacheBytes/2+1))
	if _, ok := c.get("b"); !ok {
		t.Error("the expired entry did not make room")
	}
	if c.size != maxCacheBytes/2+1 {
		t.Errorf("cache size %d, want %d", c.size, maxCacheBytes/2+1)
	}
}

// TestGroupFirstCallerLeaving: the first caller runs the call on its own
// goroutine. When it leaves while another caller waits, the call goes on
// for that caller (its context is not cancelled) and the first caller gets
// its own context's error once the call returns; when it leaves alone, the
// call's context is cancelled.
func TestGroupFirstCallerLeaving(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	g := &group{clock: clk}

	started, release := make(chan struct{}), make(chan struct{})
	fnCtx := make(chan context.Context, 1)
	fn := func(ctx context.Context) (any, error) {
		fnCtx <- ctx
		close(started)
		<-release
		return "answer", ctx.Err()
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := g.do(ctx1, "k", share{}, fn, nil)
		first <- err
	}()
	<-started
	joined := make(chan struct{})
	second := make(chan any, 1)
	go func() {
		v, err := g.do(context.Background(), "k", share{}, func(context.Context) (any, error) {
			t.Error("the second caller ran the call again")
			return nil, nil
		}, func() { close(joined) })
		if err != nil {
			t.Errorf("second caller: %v", err)
		}
		second <- v
	}()
	<-joined
	cancel1()
	ctx := <-fnCtx
	// The second caller still waits: the call's context stays alive.
	time.Sleep(10 * time.Millisecond)
	if err := ctx.Err(); err != nil {
		t.Fatalf("the call was cancelled although a caller still waits: %v", err)
	}
	close(release)
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("first caller: got %v, want context.Canceled", err)
	}
	if v := <-second; v != "answer" {
		t.Errorf("second caller got %v, want the answer", v)
	}

	// Alone: leaving cancels the call, which returns early.
	ctx2, cancel2 := context.WithCancel(context.Background())
	running := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := g.do(ctx2, "k", share{}, func(ctx context.Context) (any, error) {
			close(running)
			<-ctx.Done()
			return nil, ctx.Err()
		}, nil)
		errc <- err
	}()
	<-running
	cancel2()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call was not cancelled when its only caller left")
	}
	g.mu.Lock()
	left := len(g.flights)
	g.mu.Unlock()
	if left != 0 {
		t.Errorf("%d flights left in the map", left)
	}
}

// TestGroupCancelledCallerStartsNothing: a caller whose context has already
// ended does not start a call.
func TestGroupCancelledCallerStartsNothing(t *testing.T) {
	g := &group{clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := g.do(ctx, "k", share{keep: true}, func(context.Context) (any, error) {
		t.Error("the call ran for a caller that had left")
		return nil, nil
	}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// TestGroupPanicLandsTheFlight: when the call panics, the panic goes on up
// the first caller's stack, the callers that joined get an error instead of
// waiting forever, and the next caller starts afresh.
func TestGroupPanicLandsTheFlight(t *testing.T) {
	g := &group{clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0))}
	started, release := make(chan struct{}), make(chan struct{})
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_, _ = g.do(context.Background(), "k", share{keep: true}, func(context.Context) (any, error) {
			close(started)
			<-release
			panic("boom")
		}, nil)
	}()
	<-started
	joined := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := g.do(context.Background(), "k", share{keep: true}, nil, func() { close(joined) })
		errc <- err
	}()
	<-joined
	close(release)
	if p := <-panicked; p != "boom" {
		t.Errorf("recovered %v, want the call's panic", p)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, errAbandoned) {
			t.Errorf("joined caller: got %v, want errAbandoned", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the joined caller still waits for a call that panicked")
	}
	v, err := g.do(context.Background(), "k", share{keep: true}, func(context.Context) (any, error) { return "fresh", nil }, nil)
	if err != nil || v != "fresh" {
		t.Errorf("next caller got (%v, %v), want a fresh call", v, err)
	}
}

// TestRequestLogSaysHowOldTheRequestWas checks the -v=5 request log of a
// "now" query: it says how long before the query was sent the request that
// sent it arrived (requestAge), which is what tells a request that missed an
// identical answer because it was stamped late from one that waited long.
func TestRequestLogSaysHowOldTheRequestWas(t *testing.T) {
	var out syncBuffer
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"v": "5", "logtostderr": "false", "alsologtostderr": "false", "skip_headers": "true"} {
		if err := fs.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(&out)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
	})

	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, vectorBody) })
	arrived := time.Now().Add(-3 * time.Second)
	c := newTestClient(t, Config{Address: f.URL, ArrivalTime: request.ReceivedTimestampFrom})
	ctx := request.WithReceivedTimestamp(context.Background(), arrived)
	if _, err := c.QuerySamples(ctx, "sum(up)", time.Time{}); err != nil {
		t.Fatal(err)
	}
	// A query at an explicit time does not use the arrival: no age.
	if _, err := c.QuerySamples(ctx, "sum(up)", time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
	klog.Flush()

	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, `"Prometheus request"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("got %d request log lines, want 2:\n%s", len(lines), out.String())
	}
	m := regexp.MustCompile(`requestAge="([^"]+)"`).FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("the now query's log line has no requestAge: %s", lines[0])
	}
	age, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("requestAge %q: %v", m[1], err)
	}
	if age < 3*time.Second || age > time.Minute {
		t.Errorf("requestAge = %v, want the ~3s since the request's stamp", age)
	}
	if strings.Contains(lines[1], "requestAge") {
		t.Errorf("the query at an explicit time logs a requestAge: %s", lines[1])
	}
}

// syncBuffer is a bytes.Buffer safe for klog's writer and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestCallRecordsTheWaitForServerTiming checks that every caller's wait
// for Prometheus reaches its request's Server-Timing recorder: the caller
// that sends the query and one that joins it, each for as long as it
// waited.
func TestCallRecordsTheWaitForServerTiming(t *testing.T) {
	const delay = 30 * time.Millisecond
	entered := make(chan struct{}, 1)
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		time.Sleep(delay)
		io.WriteString(w, vectorBody)
	})
	c := newTestClient(t, Config{Address: f.URL})

	var first, joined servertiming.Recorder
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := c.QuerySamples(servertiming.NewContext(context.Background(), &first), "sum(up)", time.Time{}); err != nil {
			t.Error(err)
		}
	})
	<-entered
	start := time.Now()
	if _, err := c.QuerySamples(servertiming.NewContext(context.Background(), &joined), "sum(up)", time.Time{}); err != nil {
		t.Fatal(err)
	}
	joinedFor := time.Since(start)
	wg.Wait()
	if n := len(f.requests()); n != 1 {
		t.Fatalf("Prometheus served %d queries, want 1 (the second caller joins)", n)
	}
	if d, ok := first.Wait(); !ok || d < delay {
		t.Errorf("the sender's recorded wait = %v, %v; want at least %v", d, ok, delay)
	}
	if d, ok := joined.Wait(); !ok || d <= 0 || d > joinedFor {
		t.Errorf("the joined caller's recorded wait = %v, %v; want (0, %v]", d, ok, joinedFor)
	}
}

// newSlowVectorProm serves vectorBody to every query, each answer landing
// 1ms later on the returned fake clock (starting at t0) than its query was
// sent; served counts the queries.
func newSlowVectorProm(t *testing.T, t0 time.Time) (*clocktesting.FakePassiveClock, *fakeProm, *atomic.Int32) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(t0)
	served := new(atomic.Int32)
	f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		clk.SetTime(clk.Now().Add(time.Millisecond))
		io.WriteString(w, vectorBody)
	})
	return clk, f, served
}
