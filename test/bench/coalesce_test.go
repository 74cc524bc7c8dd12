//go:build e2e && bench

package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCoalesce1000 sends 1,000 identical pods/* requests at once and
// counts the Prometheus queries they caused, over a 100-pod namespace and
// over the 5,000-pod one (whose query runs longer, so more requests find it
// in flight).
//
// "At once": the burst's connections are dialled and warmed beforehand (one
// HTTP/2 connection per PROMSCALER_BENCH_BURST_PER_CONN requests, default
// 100, well under the adapter's 250 streams per connection), every request is prepared, and all are released
// together. Two senders:
//   - frames: every connection's requests are HPACK-encoded in advance and
//     written with a single write per connection (h2Conn), so the burst
//     leaves the load generator within a millisecond or so whatever the
//     load;
//   - net-http: one net/http request per goroutine over pre-warmed
//     transports, as a Go client would send them; each request is written
//     and flushed on its own, so under load they leave over hundreds of ms.
//
// Each reports the connections dialled during the burst (0), when the
// requests were written and when the answers came, relative to the
// release, and the Prometheus queries the burst caused (the target: 1).
func BenchmarkCoalesce1000(b *testing.B) {
	s := setup(b)
	a := s.serving(b)
	for _, c := range []struct {
		ns   string
		pods int
	}{{servingNamespace(0), s.cfg.servePods}, {bigNamespace, s.cfg.bigPods}} {
		b.Run(fmt.Sprintf("pods-star-%d", c.pods), func(b *testing.B) {
			b.Run("frames", func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					s.benchCoalesceFrames(b, a, c.ns, 1000)
				}
			})
			b.Run("net-http", func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					s.benchCoalesceNetHTTP(b, a, c.ns, 1000)
				}
			})
		})
	}
}

// warmPath is what the burst's connections but the first are warmed with:
// cheap, and it does not query Prometheus.
const warmPath = "/apis/custom.metrics.k8s.io/v1beta2"

// burstStats is what a burst's requests saw, relative to its release.
type burstStats struct {
	release                                  time.Time
	n, conns, dials, reused, wasIdle, unsent int
	// firstSent, medianSent, lastSent: when requests were written.
	firstSent, medianSent, lastSent time.Duration
	// firstAnswer, medianAnswer, lastAnswer: when answers were read in full.
	firstAnswer, medianAnswer, lastAnswer time.Duration
	// answerSinceSent: each answered request's time from written to read.
	answerSinceSent []time.Duration
}

// times fills the send and answer times from the requests' offsets since
// the release.
func (st *burstStats) times(sent, done []time.Duration) {
	slices.Sort(sent)
	slices.Sort(done)
	if len(sent) > 0 {
		st.firstSent, st.medianSent, st.lastSent = sent[0], sent[len(sent)/2], sent[len(sent)-1]
	}
	if len(done) > 0 {
		st.firstAnswer, st.medianAnswer, st.lastAnswer = done[0], done[len(done)/2], done[len(done)-1]
	}
}

func (st burstStats) sendSpread() time.Duration { return st.lastSent - st.firstSent }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (st burstStats) report(b *testing.B, m measured, name string) {
	m.report(b, name)
	progress("%s: %d connections warmed beforehand, %d dialled during the burst; %d requests on a reused connection (%d on an idle one), %d never written; written %.1f-%.1f ms after the release (median %.1f, spread %.1f ms); answers %.1f-%.1f ms after the release (median %.1f); %d Prometheus queries logged, %.0f sent by the adapter, %.0f calls coalesced",
		name, st.conns, st.dials, st.reused, st.wasIdle, st.unsent, ms(st.firstSent), ms(st.lastSent), ms(st.medianSent), ms(st.sendSpread()),
		ms(st.firstAnswer), ms(st.lastAnswer), ms(st.medianAnswer), len(m.logged),
		m.after.queries-m.before.queries, m.after.coalesced-m.before.coalesced)
	var qs []string
	for _, e := range m.entries {
		qs = append(qs, fmt.Sprintf("received %.1f ms, logged %.1f ms (ran %.1f ms)", ms(e.start.Sub(st.release)), ms(e.logged.Sub(st.release)), ms(e.exec)))
	}
	progress("%s: Prometheus queries after the release: %s", name, strings.Join(qs, "; "))
	if n := m.after.apiCount - m.before.apiCount; n > 0 && len(st.answerSinceSent) > 0 {
		var client time.Duration
		for _, d := range st.answerSinceSent {
			client += d
		}
		clientMean := ms(client) / float64(len(st.answerSinceSent))
		serverMean := (m.after.apiSum - m.before.apiSum) / n * 1000
		progress("%s: mean time from a request written to its answer read %.1f ms; the adapter's mean apiserver_request_duration_seconds (from its received timestamp, %.0f requests) %.1f ms: on average a request was stamped ~%.1f ms after it was written (less the answer's transfer)",
			name, clientMean, n, serverMean, clientMean-serverMean)
		b.ReportMetric(clientMean-serverMean, "mean-stamp-lag-ms")
	}
	b.ReportMetric(float64(st.dials), "dials-during-burst")
	b.ReportMetric(float64(st.reused), "reused-conn-reqs")
	b.ReportMetric(ms(st.sendSpread()), "send-spread-ms")
	b.ReportMetric(ms(st.lastSent), "last-sent-ms")
	b.ReportMetric(ms(st.firstAnswer), "first-answer-ms")
	b.ReportMetric(ms(st.lastAnswer), "last-answer-ms")
}

// benchCoalesceFrames fires the burst as pre-encoded HTTP/2 frames, one
// write per connection, and returns what it measured.
func (s *stack) benchCoalesceFrames(b *testing.B, a *adapterProc, ns string, n int) measured {
	ctx := context.Background()
	u, err := url.Parse(podsStarURL(a.url, ns))
	if err != nil {
		b.Fatal(err)
	}
	perConn := s.cfg.burstPerConn
	burst, err := prepareH2Burst(ctx, a.url, u.RequestURI(), s.env.PKI.Admin, n, perConn)
	if err != nil {
		b.Fatal(err)
	}
	defer burst.close()
	// Let the warm-up's query land well before the burst, and collect now
	// rather than during it.
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	var release time.Time
	m := s.measure(b, a, `namespace="`+ns+`"`, func() result {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		release = burst.fire(rctx)
		var r result
		var last time.Time
		for _, st := range burst.streams {
			select {
			case <-st.finished:
			default:
				st.err = fmt.Errorf("no answer after 2m")
			}
			if st.err != nil {
				r.errors++
				if r.firstErr == "" {
					r.firstErr = st.err.Error()
				}
				continue
			}
			r.latencies = append(r.latencies, st.done.Sub(release))
			if st.done.After(last) {
				last = st.done
			}
		}
		r.elapsed = last.Sub(release)
		r.requests = len(r.latencies) + r.errors
		return r
	})
	st := burstStats{release: release, n: n, conns: len(burst.conns), reused: n}
	var sent, done []time.Duration
	for i := range burst.conns {
		if burst.writeErr[i] != nil {
			st.unsent += min(perConn, n-i*perConn)
			continue
		}
		for range min(perConn, n-i*perConn) {
			sent = append(sent, burst.writeEnd[i].Sub(release))
		}
	}
	for j, x := range burst.streams {
		if x.err == nil {
			done = append(done, x.done.Sub(release))
			if i := j / perConn; burst.writeErr[i] == nil {
				st.answerSinceSent = append(st.answerSinceSent, x.done.Sub(burst.writeEnd[i]))
			}
		}
	}
	st.times(sent, done)
	if len(burst.conns) <= 20 {
		var writes []string
		for i := range burst.conns {
			writes = append(writes, fmt.Sprintf("%.2f-%.2f", ms(burst.writeStart[i].Sub(release)), ms(burst.writeEnd[i].Sub(release))))
		}
		progress("burst writes (ms after the release, one per connection of %d requests, %d bytes each): %v", perConn, len(burst.frames[0]), writes)
	}
	st.report(b, m, fmt.Sprintf("%d concurrent identical requests in %s (pre-encoded HTTP/2 frames)", n, ns))
	return m
}

// burstRequest is one net/http request of a burst and what its trace saw.
type burstRequest struct {
	req *http.Request
	hc  *http.Client
	// sent is when the request was written (httptrace WroteRequest), in
	// UnixNano; 0 when it never was.
	sent            atomic.Int64
	reused, wasIdle atomic.Bool
	done            time.Time
	err             error
}

// burstClients returns conns clients, each with its own transport holding
// one connection to the adapter at base, opened by a request (to u for the
// first, warmPath for the others) and kept alive.
func (s *stack) burstClients(ctx context.Context, base, u string, conns int) ([]*http.Client, error) {
	out := make([]*http.Client, conns)
	for i := range out {
		tr, err := adminTransport(s.env.PKI.Admin)
		if err != nil {
			return nil, err
		}
		out[i] = &http.Client{Transport: tr, Timeout: 2 * time.Minute}
		warm := u
		if i > 0 {
			warm = base + warmPath
		}
		if _, err := do(ctx, out[i], warm); err != nil {
			return nil, fmt.Errorf("warming burst connection %d: %w", i, err)
		}
	}
	return out, nil
}

// benchCoalesceNetHTTP fires the burst as one net/http request per
// goroutine over pre-warmed transports, and returns what it measured.
func (s *stack) benchCoalesceNetHTTP(b *testing.B, a *adapterProc, ns string, n int) measured {
	ctx := context.Background()
	u := podsStarURL(a.url, ns)
	perConn := s.cfg.burstPerConn
	clients, err := s.burstClients(ctx, a.url, u, (n+perConn-1)/perConn)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, hc := range clients {
			hc.CloseIdleConnections()
		}
	}()
	var dials atomic.Int64
	reqs := make([]*burstRequest, n)
	for i := range reqs {
		br := &burstRequest{hc: clients[i/perConn]}
		trace := &httptrace.ClientTrace{
			ConnectStart: func(string, string) { dials.Add(1) },
			GotConn: func(ci httptrace.GotConnInfo) {
				br.reused.Store(ci.Reused)
				br.wasIdle.Store(ci.WasIdle)
			},
			WroteRequest: func(httptrace.WroteRequestInfo) { br.sent.Store(time.Now().UnixNano()) },
		}
		if br.req, err = http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, u, nil); err != nil {
			b.Fatal(err)
		}
		reqs[i] = br
	}
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	var release time.Time
	m := s.measure(b, a, `namespace="`+ns+`"`, func() result {
		var (
			wg, ready sync.WaitGroup
			start     = make(chan struct{})
		)
		for _, br := range reqs {
			wg.Add(1)
			ready.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-start
				_, br.err = doRequest(br.hc, br.req)
				br.done = time.Now()
			}()
		}
		ready.Wait()
		release = time.Now()
		close(start)
		wg.Wait()
		var r result
		for _, br := range reqs {
			if br.err != nil {
				r.errors++
				if r.firstErr == "" {
					r.firstErr = br.err.Error()
				}
				continue
			}
			r.latencies = append(r.latencies, br.done.Sub(release))
		}
		r.elapsed = time.Since(release)
		r.requests = len(r.latencies) + r.errors
		return r
	})
	st := burstStats{release: release, n: n, conns: len(clients), dials: int(dials.Load())}
	var sent, done []time.Duration
	for _, br := range reqs {
		if br.reused.Load() {
			st.reused++
		}
		if br.wasIdle.Load() {
			st.wasIdle++
		}
		if t := br.sent.Load(); t != 0 {
			sent = append(sent, time.Unix(0, t).Sub(release))
		} else {
			st.unsent++
		}
		if br.err == nil {
			done = append(done, br.done.Sub(release))
			if t := br.sent.Load(); t != 0 {
				st.answerSinceSent = append(st.answerSinceSent, br.done.Sub(time.Unix(0, t)))
			}
		}
	}
	st.times(sent, done)
	st.report(b, m, fmt.Sprintf("%d concurrent identical requests in %s (net/http)", n, ns))
	return m
}
