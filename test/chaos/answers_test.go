//go:build e2e && chaos

package chaos

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// Oversized answer suite settings (environment):
//
//	PROMSCALER_CHAOS_ANSWER_MB       size of each answer in MB (default 50)
//	PROMSCALER_CHAOS_ANSWER_CEILING  the peak RSS ceiling asserted, MiB (default maxAnswerRSS)
//	PROMSCALER_CHAOS_ANSWER_GOMEMLIMIT  the adapter's GOMEMLIMIT (default 512MiB, as the shipped
//	                                    deployment sets it from its 512Mi memory limit; "off" for none)
const defaultAnswerMB = 50

// maxAnswerRSS is the adapter's documented peak RSS ceiling (MiB) under
// oversized answers at the default limits (docs/reliability.md, "Answer
// size bounds"): below the shipped deployment's 512Mi memory limit.
const maxAnswerRSS = 448

// answerPhase is the time each concurrency level keeps its requests in flight.
const answerPhase = 15 * time.Second

// hugeFront, once on, answers every instant query with a valid vector
// answer of size bytes (many samples of long label sets); it forwards every
// other request (series, labels: discovery), and every request while off,
// to Prometheus.
type hugeFront struct {
	URL    string
	body   []byte
	on     atomic.Bool
	served atomic.Int64
	srv    *http.Server
}

func startHugeFront(t *testing.T, promURL string, size int) *hugeFront {
	t.Helper()
	u, err := url.Parse(promURL)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &hugeFront{URL: "http://" + l.Addr().String(), body: hugeVector(size)}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	f.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || !f.on.Load() {
			rp.ServeHTTP(w, r)
			return
		}
		f.served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(f.body) // chunked: the adapter learns the size by reading
	})}
	go func() { _ = f.srv.Serve(l) }()
	t.Cleanup(func() { _ = f.srv.Close() })
	return f
}

// hugeVector is an instant query answer of about size bytes: samples of
// the truth namespace with 200-byte pod names.
func hugeVector(size int) []byte {
	var b strings.Builder
	b.Grow(size + 512)
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	pad := strings.Repeat("x", 200)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metric":{"namespace":%q,"queue":"jobs","pod":"p-%d-%s"},"value":[1700000000,"%d"]}`, truthNamespace, i, pad, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// answerRow is one concurrency level's figures.
type answerRow struct {
	concurrent           int
	requests             int
	codes                map[string]int
	before, peak, after  float64 // RSS MiB: before, peak during, 10 s after
	hwm                  float64 // VmHWM since the phase began (MiB), 0 when it could not be reset
	goroutinesAfter      int
	queriesServedByFront int64
}

// TestOversizedAnswers has the adapter ask a Prometheus whose every
// instant query answer is 50 MB of valid samples (a fake in front of the
// real Prometheus, which still serves discovery), with 1, 10 and 30
// distinct requests in flight (distinct label selectors: no coalescing),
// and measures the adapter's peak RSS from /proc. The adapter, run with
// the shipped deployment's GOMEMLIMIT (512 MiB), must answer every request
// (a 503 naming the limit) and stay under maxAnswerRSS.
func TestOversizedAnswers(t *testing.T) {
	size := envInt("PROMSCALER_CHAOS_ANSWER_MB", defaultAnswerMB) * 1_000_000
	ceiling := float64(envInt("PROMSCALER_CHAOS_ANSWER_CEILING", maxAnswerRSS))
	// The processes of the stack inherit the environment: the adapter runs
	// with the GOMEMLIMIT of the shipped deployment.
	limit := os.Getenv("PROMSCALER_CHAOS_ANSWER_GOMEMLIMIT")
	switch limit {
	case "":
		t.Setenv("GOMEMLIMIT", "512MiB")
	case "off":
		t.Setenv("GOMEMLIMIT", "")
	default:
		t.Setenv("GOMEMLIMIT", limit)
	}
	var front *hugeFront
	s := startStackWithFront(t, func(t *testing.T, promURL string) string {
		front = startHugeFront(t, promURL, size)
		return front.URL
	})
	table := filepath.Join(outDir(t, s), "answers-"+time.Now().UTC().Format("20060102-150405")+".md")
	hc := *s.direct
	hc.Timeout = 2 * time.Minute
	front.on.Store(true)
	var rows []answerRow
	for _, c := range []int{1, 10, 30} {
		t.Run(fmt.Sprintf("concurrent-%d", c), func(t *testing.T) {
			r := s.oversizedPhase(t, &hc, front, c)
			rows = append(rows, r)
			t.Logf("%d concurrent: %d requests (%s), RSS %.0f MiB before, peak %.0f (VmHWM %.0f), %.0f 10 s after",
				c, r.requests, codesText(r.codes), r.before, r.peak, r.hwm, r.after)
			if err := os.WriteFile(table, []byte(answerTable(rows, size)), 0o644); err != nil {
				t.Error(err)
			}
			if peak := max(r.peak, r.hwm); peak > ceiling {
				t.Errorf("peak RSS %.0f MiB with %d concurrent %d MB answers, above the documented ceiling of %.0f MiB", peak, c, size/1_000_000, ceiling)
			}
			if n := r.codes["200"]; n > 0 {
				t.Logf("%d answers of %d MB were served whole", n, size/1_000_000)
			}
			if n := r.codes["timeout"] + r.codes["conn"]; n > 0 {
				t.Errorf("%d requests got no answer", n)
			}
		})
	}
	t.Logf("oversized answer table %s:\n%s", table, answerTable(rows, size))
}

func startStackWithFront(t *testing.T, front func(t *testing.T, promURL string) string) *stack {
	t.Helper()
	return startStack(t, stackOptions{front: front, adapterArgs: strings.Fields(os.Getenv("PROMSCALER_CHAOS_ADAPTER_ARGS"))})
}

// oversizedPhase keeps c distinct external metric requests in flight to
// the adapter's own port for answerPhase, sampling its RSS.
func (s *stack) oversizedPhase(t *testing.T, hc *http.Client, front *hugeFront, c int) answerRow {
	pid := s.adapter.Process.Pid()
	r := answerRow{concurrent: c, codes: map[string]int{}}
	r.before, _ = framework.MemMiB(pid, "VmRSS")
	if os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil {
		r.hwm = -1 // reset: read at the end
	}
	served := front.served.Load()
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if rss, err := framework.MemMiB(pid, "VmRSS"); err == nil && rss > r.peak {
				r.peak = rss
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var (
		mu  sync.Mutex
		n   atomic.Int64
		wg  sync.WaitGroup
		end = time.Now().Add(answerPhase)
	)
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				i := n.Add(1)
				path := "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + truthNamespace + "/" + truthExternal + "?labelSelector=queue%3Dq-" + strconv.FormatInt(i, 10)
				ctx, cancel := context.WithTimeout(context.Background(), hc.Timeout)
				_, code, err := framework.Get(ctx, hc, s.adapter.URL+path)
				cancel()
				key := strconv.Itoa(code)
				if err != nil {
					key = classify(err)
				}
				mu.Lock()
				r.codes[key]++
				r.requests++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	if r.hwm < 0 {
		r.hwm, _ = framework.MemMiB(pid, "VmHWM")
	}
	r.queriesServedByFront = front.served.Load() - served
	time.Sleep(10 * time.Second)
	f := s.footprint(context.Background(), s.adapter)
	r.after, r.goroutinesAfter = f.rss, f.goroutines
	return r
}

func codesText(codes map[string]int) string {
	w := window{errors: codes}
	return w.errorText()
}

func answerTable(rows []answerRow, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Oversized answer run %s: every instant query answered with %d MB of valid samples; distinct external metric requests to the adapter's port, each level for %v; adapter GOMEMLIMIT=%q; load average %s.\n\n",
		time.Now().UTC().Format(time.RFC3339), size/1_000_000, answerPhase, os.Getenv("GOMEMLIMIT"), framework.LoadAvg())
	b.WriteString("| requests in flight | requests | answers | queries answered by the fake | RSS MiB before | peak RSS MiB (sampled every 20 ms / VmHWM) | RSS MiB 10 s after | goroutines after |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %d | %s | %d | %.0f | %.0f / %.0f | %.0f | %s |\n", r.concurrent, r.requests, codesText(r.codes), r.queriesServedByFront,
			r.before, r.peak, r.hwm, r.after, gor(r.goroutinesAfter))
	}
	return b.String()
}
