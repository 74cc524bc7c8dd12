package promclient

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promscaler/promscaler/internal/metrics"
)

// envSimProm makes TestSimPromProcess serve: "<samples>,<delay>".
const envSimProm = "PROMCLIENT_SIM_PROM"

// TestSimPromProcess is BenchmarkBurstStarved's Prometheus, run as a
// process of its own (the test binary again) so that its answers are sent
// while the benchmark's process is short of CPU, as a real Prometheus's
// are: it answers every request with n samples after delay.
func TestSimPromProcess(t *testing.T) {
	spec := os.Getenv(envSimProm)
	if spec == "" {
		t.Skip("only as BenchmarkBurstStarved's Prometheus")
	}
	var n int
	var delay time.Duration
	var d string
	var err error
	if _, err = fmt.Sscanf(spec, "%d,%s", &n, &d); err != nil {
		t.Fatal(err)
	}
	if delay, err = time.ParseDuration(d); err != nil {
		t.Fatal(err)
	}
	body := benchAnswer(n)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(l.Addr().String())
	_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
}

// startSimProm starts TestSimPromProcess in a process of its own, answering
// with samples after delay, stopped when b ends, and returns its address.
func startSimProm(b *testing.B, samples int, delay time.Duration) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSimPromProcess$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%s", envSimProm, samples, delay))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("simulated Prometheus: reading its address: %v", err)
	}
	return addr[:len(addr)-1]
}

type arrivalKey struct{}

// BenchmarkBurstStarved fires 1,000 identical "now" queries at once through
// a client with the default guard and coalescing window, each caller doing
// what a request handler does around it on the adapter's CPU (the handler
// chain before the call, stamped at its start; encoding the answer after),
// against a Prometheus in another process. It reports the queries sent and
// the requests refused by the waiting bound. Run with -cpu 2.
func BenchmarkBurstStarved(b *testing.B) {
	for _, c := range []struct {
		samples int
		delay   time.Duration
	}{{100, time.Millisecond}, {5000, 30 * time.Millisecond}} {
		b.Run(strconv.Itoa(c.samples), func(b *testing.B) {
			addr := startSimProm(b, c.samples, c.delay)
			guard, err := NewGuard("main", GuardConfig{}, metrics.New(), nil)
			if err != nil {
				b.Fatal(err)
			}
			cl, err := New(Config{Address: "http://" + addr, HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}},
				Metrics: metrics.New(), Timeout: time.Minute, Guard: guard, CoalesceWindow: DefaultCoalesceWindow,
				ArrivalTime: func(ctx context.Context) (time.Time, bool) {
					t, ok := ctx.Value(arrivalKey{}).(time.Time)
					return t, ok
				}})
			if err != nil {
				b.Fatal(err)
			}
			defer cl.CloseIdleConnections()
			// Warm the connection.
			if _, err := cl.QuerySamples(context.Background(), "warm", time.Time{}); err != nil {
				b.Fatal(err)
			}
			var queries, refused, failed, total float64
			var spans time.Duration
			for range b.N {
				sends0 := guard.sends.Load()
				var nRefused, nFailed atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				t0 := time.Now()
				for range 1000 {
					wg.Go(func() {
						<-start
						ctx := context.WithValue(context.Background(), arrivalKey{}, time.Now())
						burn(300 * time.Microsecond) // the handler chain
						smps, err := cl.QuerySamples(ctx, "burst", time.Time{})
						var tw *TooManyWaitingError
						switch {
						case errors.As(err, &tw):
							nRefused.Add(1)
							return
						case err != nil:
							nFailed.Add(1)
							return
						}
						_ = json.NewEncoder(io.Discard).Encode(smps) // the answer's encoding
					})
				}
				close(start)
				wg.Wait()
				spans += time.Since(t0)
				queries += float64(guard.sends.Load() - sends0)
				refused += float64(nRefused.Load())
				failed += float64(nFailed.Load())
				total++
				time.Sleep(100 * time.Millisecond)
			}
			b.ReportMetric(queries/total, "queries/burst")
			b.ReportMetric(refused/total, "refused/burst")
			b.ReportMetric(failed/total, "failed/burst")
			b.ReportMetric(spans.Seconds()/total, "s/burst")
		})
	}
}

// burn spends about d of CPU.
func burn(d time.Duration) {
	t0 := time.Now()
	var h [32]byte
	for time.Since(t0) < d {
		h = sha256.Sum256(h[:])
	}
}

// BenchmarkStarvedVerdict: 100 identical queries wait on one flight (60
// beyond the default bound of 40) while 400 goroutines keep both CPUs busy
// for 3 s; Prometheus (another process) answers in 30 ms. Reports the
// requests refused, with the guard's check of the adapter's own CPU
// (Guard.cpuBusy) and without it (no-busy-check).
func BenchmarkStarvedVerdict(b *testing.B) {
	for _, mode := range []string{"busy-check", "no-busy-check"} {
		b.Run(mode, func(b *testing.B) {
			addr := startSimProm(b, 5000, 30*time.Millisecond)
			guard, err := NewGuard("main", GuardConfig{}, metrics.New(), nil)
			if err != nil {
				b.Fatal(err)
			}
			if mode == "no-busy-check" {
				guard.cpuBusy = func(int64) bool { return false }
			}
			cl, err := New(Config{Address: "http://" + addr, HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}},
				Metrics: metrics.New(), Timeout: time.Minute, Guard: guard})
			if err != nil {
				b.Fatal(err)
			}
			defer cl.CloseIdleConnections()
			if _, err := cl.QuerySamples(context.Background(), "warm", time.Time{}); err != nil {
				b.Fatal(err)
			}
			var refused, total float64
			for range b.N {
				var nRefused atomic.Int64
				var wg sync.WaitGroup
				stop := time.Now().Add(3 * time.Second)
				for range 100 {
					wg.Go(func() {
						_, err := cl.QuerySamples(context.Background(), "starved", time.Time{})
						var tw *TooManyWaitingError
						if errors.As(err, &tw) {
							nRefused.Add(1)
						}
					})
				}
				time.Sleep(5 * time.Millisecond)
				for range 400 {
					wg.Go(func() {
						for time.Now().Before(stop) {
							burn(time.Millisecond)
						}
					})
				}
				wg.Wait()
				refused += float64(nRefused.Load())
				total++
			}
			b.ReportMetric(refused/total, "refused/op")
		})
	}
}
