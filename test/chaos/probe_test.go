//go:build e2e && chaos

package chaos

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// Kubelet's probes as deploy/base ships them: /livez and /readyz every 10 s,
// 1 s timeout (the default), liveness failing 5 times in a row restarts the
// container.
const (
	probePeriod           = 10 * time.Second
	probeTimeout          = time.Second
	livenessFailThreshold = 5
)

// prober asks the adapter's /livez and /readyz every second, as a kubelet
// would (1 s timeout), and keeps every outcome.
type prober struct {
	url  func() string
	hc   *http.Client
	mu   sync.Mutex
	res  []probeResult
	stop chan struct{}
	wg   sync.WaitGroup
}

type probeResult struct {
	at         time.Time
	live, read bool
}

func startProber(url func() string) *prober {
	p := &prober{url: url, stop: make(chan struct{}), hc: &http.Client{Timeout: probeTimeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback adapter, self-signed
		// A kubelet opens a connection per probe.
		DisableKeepAlives: true,
	}}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			r := probeResult{at: time.Now(), live: p.ok("/livez"), read: p.ok("/readyz")}
			p.mu.Lock()
			p.res = append(p.res, r)
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *prober) ok(path string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	_, code, err := framework.Get(ctx, p.hc, p.url()+path)
	return err == nil && code == http.StatusOK
}

func (p *prober) close() { close(p.stop); p.wg.Wait() }

// probeSummary is what a kubelet would have concluded over a window.
type probeSummary struct {
	// liveFail and readyFail count the failed 1 s polls.
	liveFail, readyFail int
	// liveStreak and readyStreak are the longest runs of failed polls.
	liveStreak, readyStreak time.Duration
}

// kubeletRestart: liveness failed for longer than the shipped probe takes
// to restart the container.
func (s probeSummary) kubeletRestart() bool {
	return s.liveStreak >= livenessFailThreshold*probePeriod
}

func (s probeSummary) String() string {
	return fmt.Sprintf("livez %d fails (longest %v), readyz %d fails (longest %v)", s.liveFail, s.liveStreak, s.readyFail, s.readyStreak)
}

func (p *prober) window(from, to time.Time) probeSummary {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s probeSummary
	var live, ready streak
	for _, r := range p.res {
		if r.at.Before(from) || !r.at.Before(to) {
			continue
		}
		live.add(r.at, r.live)
		ready.add(r.at, r.read)
	}
	s.liveFail, s.liveStreak = live.fails, live.longest
	s.readyFail, s.readyStreak = ready.fails, ready.longest
	return s
}

// streak counts failed polls and the longest run of them.
type streak struct {
	fails   int
	longest time.Duration
	since   time.Time
}

func (s *streak) add(at time.Time, ok bool) {
	if ok {
		s.since = time.Time{}
		return
	}
	s.fails++
	if s.since.IsZero() {
		s.since = at
	}
	s.longest = max(s.longest, at.Sub(s.since)+time.Second)
}
