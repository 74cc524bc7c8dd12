package promclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// countingTransport answers every request at once and counts, per
// namespace (WithTenant), the requests that reached it.
type countingTransport struct {
	mu    sync.Mutex
	calls map[string]int
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	if t.calls == nil {
		t.calls = map[string]int{}
	}
	t.calls[tenantOf(req.Context())]++
	t.mu.Unlock()
	return answerWith(http.StatusOK)
}

func (t *countingTransport) count(ns string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[ns]
}

// users is how many requests of namespace ns hold or wait for a team slot.
func (t *teamSlots) users(ns string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.ns[ns]; s != nil {
		return s.users
	}
	return 0
}

func roundTripAs(t *testing.T, rt http.RoundTripper, ctx context.Context, ns string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(WithTenant(ctx, ns), http.MethodGet, "http://prometheus.invalid/api/v1/query", nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt.RoundTrip(req)
}

// TestGuardTeamConcurrencyBound: a namespace's team rule requests hold at
// most MaxConcurrentPerTeam of the backend at once; one more waits (it
// does not fail, and does not reach the backend) until one of them is
// done, or fails with a *TeamBusyError when its own context ends; other
// namespaces and the cluster's rules are not held back.
func TestGuardTeamConcurrencyBound(t *testing.T) {
	g, _, _ := newTestGuard(t, GuardConfig{MaxConcurrentPerTeam: 2})
	next := &countingTransport{}
	rt := g.RoundTripper(next)
	ctx := context.Background()
	var held []*http.Response
	for range 2 {
		resp, err := roundTripAs(t, rt, ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, resp)
	}
	// The third waits for a slot.
	third := make(chan error, 1)
	go func() {
		resp, err := roundTripAs(t, rt, ctx, "team-a")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		third <- err
	}()
	for g.teams.users("team-a") != 3 {
		time.Sleep(time.Millisecond)
	}
	// Another team and the cluster's rules go through meanwhile.
	for _, ns := range []string{"team-b", ""} {
		resp, err := roundTripAs(t, rt, ctx, ns)
		if err != nil {
			t.Fatalf("namespace %q while team-a holds its slots: %v", ns, err)
		}
		resp.Body.Close()
	}
	// A team-a request that gives up while waiting fails naming the bound.
	short, cancel := context.WithCancel(ctx)
	cancel()
	_, err := roundTripAs(t, rt, short, "team-a")
	var busy *TeamBusyError
	if !errors.As(err, &busy) || busy.Namespace != "team-a" || busy.Limit != 2 || !errors.Is(err, context.Canceled) {
		t.Fatalf("team-a request with a cancelled context while waiting: %v, want a *TeamBusyError of team-a, limit 2, wrapping context.Canceled", err)
	}
	if got := next.count("team-a"); got != 2 {
		t.Fatalf("team-a requests reaching the backend with two held: %d, want 2", got)
	}
	// Reading one answer to the end frees its slot for the waiting one.
	_, _ = io.Copy(io.Discard, held[0].Body)
	if err := <-third; err != nil {
		t.Fatalf("the waiting team-a request: %v", err)
	}
	if got := next.count("team-a"); got != 3 {
		t.Errorf("team-a requests reaching the backend: %d, want 3", got)
	}
	for _, resp := range held {
		resp.Body.Close()
	}
	if n := g.teams.users("team-a") + g.teams.users("team-b"); n != 0 {
		t.Errorf("%d team slot users left after every answer was closed", n)
	}
}

// TestGuardTeamSlotFreedOnRefusal: a team request the backend's own bounds
// refuse (here: in-flight bound full) frees its team slot.
func TestGuardTeamSlotFreedOnRefusal(t *testing.T) {
	g, _, _ := newTestGuard(t, GuardConfig{MaxConcurrent: 1, MaxConcurrentPerTeam: 1})
	rt := g.RoundTripper(&countingTransport{})
	ctx := context.Background()
	held, err := roundTripAs(t, rt, ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := roundTripAs(t, rt, ctx, "team-a"); !errors.Is(err, ErrBackendBusy) {
		t.Fatalf("team-a request with the backend's slot held: %v, want ErrBackendBusy", err)
	}
	held.Body.Close()
	resp, err := roundTripAs(t, rt, ctx, "team-a")
	if err != nil {
		t.Fatalf("team-a request after the refusal: %v (its slot was not freed)", err)
	}
	resp.Body.Close()
	if n := g.teams.users("team-a"); n != 0 {
		t.Errorf("%d team-a slot users left", n)
	}
}

// TestTeamLimitsSwitchedOff: the team flags' 0 (WithTeamLimits) leaves a
// namespace's team rule requests with no bound of their own: more than
// DefaultMaxConcurrentPerTeam of them reach the backend at once, and more
// than a quarter of the backend's waiting bound wait on it without any
// being beyond a bound. Before, the flags' 0 was GuardConfig's default: 2
// in flight, 10 of 40 waiting.
func TestTeamLimitsSwitchedOff(t *testing.T) {
	const maxWaiting = 40
	zero := 0
	tests := []struct {
		name        string
		maxInFlight int
		maxWaiting  *int
		// wantSent of DefaultMaxConcurrentPerTeam+1 requests held at once
		// reach the backend; wantBeyond of maxWaiting/4+1 waiting ones are
		// beyond a bound.
		wantSent, wantBeyond int
	}{
		{name: "the flags' defaults", maxInFlight: DefaultMaxConcurrentPerTeam, maxWaiting: nil,
			wantSent: DefaultMaxConcurrentPerTeam, wantBeyond: 1},
		{name: "0 switches both off", maxInFlight: 0, maxWaiting: &zero,
			wantSent: DefaultMaxConcurrentPerTeam + 1, wantBeyond: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := GuardConfig{MaxWaiting: maxWaiting}.WithTeamLimits(tc.maxInFlight, tc.maxWaiting)
			g, _, _ := newTestGuard(t, cfg)
			next := &countingTransport{}
			rt := g.RoundTripper(next)
			for range DefaultMaxConcurrentPerTeam + 1 {
				// A request waiting for a team slot gives up after 200ms.
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				resp, err := roundTripAs(t, rt, ctx, "team-a")
				cancel()
				var busy *TeamBusyError
				if errors.As(err, &busy) {
					continue
				} else if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
			}
			if got := next.count("team-a"); got != tc.wantSent {
				t.Errorf("team-a requests in flight at once: %d, want %d", got, tc.wantSent)
			}

			teamA := WithTenant(context.Background(), "team-a")
			beyond := 0
			for range maxWaiting/4 + 1 {
				wt, err := g.wait(teamA)
				if err != nil {
					t.Fatalf("team-a request waiting: %v", err)
				}
				if wt.beyond {
					beyond++
				}
				defer func() { _ = wt.done(nil) }()
			}
			if beyond != tc.wantBeyond {
				t.Errorf("team-a requests beyond a waiting bound: %d, want %d", beyond, tc.wantBeyond)
			}
		})
	}
}
