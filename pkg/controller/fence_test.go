package controller

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeLock is a resourcelock.Interface over one in-memory lease shared by
// several identities (one fakeLock per replica, one leaseStore between
// them). Updates carry the version the replica last read, so a replica
// that missed another's takeover gets a conflict, as with a Lease.
type fakeLock struct {
	id    string
	store *leaseStore
	seen  int // the version this replica last read or wrote
}

type leaseStore struct {
	mu      sync.Mutex
	rec     *resourcelock.LeaderElectionRecord
	version int
}

var _ resourcelock.Interface = (*fakeLock)(nil)

func (l *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	if l.store.rec == nil {
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "lease")
	}
	l.seen = l.store.version
	rec := *l.store.rec
	raw, err := json.Marshal(rec)
	return &rec, raw, err
}

func (l *fakeLock) Create(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	if l.store.rec != nil {
		return apierrors.NewAlreadyExists(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "lease")
	}
	l.store.rec, l.store.version = &ler, 1
	l.seen = 1
	return nil
}

func (l *fakeLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	if l.seen != l.store.version {
		return apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "lease", errors.New("modified"))
	}
	l.store.rec = &ler
	l.store.version++
	l.seen = l.store.version
	return nil
}

func (l *fakeLock) RecordEvent(string) {}
func (l *fakeLock) Identity() string   { return l.id }
func (l *fakeLock) Describe() string   { return "kube-system/promscaler-autoscaler" }
func record(id string) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: id, LeaseDurationSeconds: 15}
}

func TestLeaseFence(t *testing.T) {
	const lease, margin = 15 * time.Second, 2 * time.Second
	type step struct {
		do   string // "acquire", "renew", "release", "get", "wait", "take" (b takes the lease)
		wait time.Duration
	}
	tests := []struct {
		name  string
		steps []step
		// wantLeft is how long writes stay allowed after the last step;
		// 0: refused.
		wantLeft time.Duration
	}{
		{name: "never acquired", wantLeft: 0},
		{name: "just acquired", steps: []step{{do: "acquire"}}, wantLeft: 13 * time.Second},
		{name: "renewed", steps: []step{{do: "acquire"}, {do: "wait", wait: 10 * time.Second}, {do: "renew"}, {do: "wait", wait: time.Second}}, wantLeft: 12 * time.Second},
		{name: "renewal within the window", steps: []step{{do: "acquire"}, {do: "wait", wait: 12999 * time.Millisecond}}, wantLeft: time.Millisecond},
		{name: "renewal older than lease less margin", steps: []step{{do: "acquire"}, {do: "wait", wait: 13 * time.Second}}, wantLeft: 0},
		{name: "failed renewal keeps the old one", steps: []step{{do: "acquire"}, {do: "take"}, {do: "wait", wait: 5 * time.Second}, {do: "renew"}}, wantLeft: 8 * time.Second},
		{name: "taken and observed", steps: []step{{do: "acquire"}, {do: "take"}, {do: "get"}}, wantLeft: 0},
		{name: "released", steps: []step{{do: "acquire"}, {do: "release"}}, wantLeft: 0},
		{name: "reacquired after a loss", steps: []step{{do: "acquire"}, {do: "take"}, {do: "get"}, {do: "wait", wait: 20 * time.Second}, {do: "take-back"}}, wantLeft: 13 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(now)
			store := &leaseStore{}
			a := &fakeLock{id: "a", store: store}
			b := &fakeLock{id: "b", store: store}
			f, err := NewLeaseFence(a, clk, lease, margin)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for _, s := range tt.steps {
				switch s.do {
				case "acquire":
					if err := f.Create(ctx, record("a")); err != nil {
						t.Fatal(err)
					}
				case "renew":
					_ = f.Update(ctx, record("a")) // may conflict: the case checks what it leaves
				case "release":
					if err := f.Update(ctx, record("")); err != nil {
						t.Fatal(err)
					}
				case "get":
					if _, _, err := f.Get(ctx); err != nil {
						t.Fatal(err)
					}
				case "wait":
					clk.Step(s.wait)
				case "take":
					if _, _, err := b.Get(ctx); err != nil {
						t.Fatal(err)
					}
					if err := b.Update(ctx, record("b")); err != nil {
						t.Fatal(err)
					}
				case "take-back":
					if err := f.Update(ctx, record("a")); err != nil {
						t.Fatal(err)
					}
				}
			}
			until, err := f.ValidUntil()
			if tt.wantLeft == 0 {
				if !errors.Is(err, ErrNotLeader) {
					t.Fatalf("ValidUntil = %v, %v; want an ErrNotLeader", until, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ValidUntil: %v", err)
			}
			if got := until.Sub(clk.Now()); got != tt.wantLeft {
				t.Errorf("writes allowed for %v more, want %v", got, tt.wantLeft)
			}
		})
	}
}

func TestNewLeaseFenceRejectsBadMargin(t *testing.T) {
	for _, margin := range []time.Duration{0, -time.Second, 15 * time.Second, 20 * time.Second} {
		if _, err := NewLeaseFence(&fakeLock{id: "a", store: &leaseStore{}}, nil, 15*time.Second, margin); err == nil {
			t.Errorf("margin %v accepted", margin)
		}
	}
}

// withFence puts a LeaseFence (lease 15 s, margin 2 s) on the harness's
// clock in front of the controller; the replica acquires the lease now.
func withFence(f **LeaseFence, store *leaseStore) harnessOption {
	return func(h *harness, c *Config) {
		fence, err := NewLeaseFence(&fakeLock{id: "a", store: store}, h.clock, 15*time.Second, 2*time.Second)
		if err != nil {
			h.t.Fatal(err)
		}
		if err := fence.Create(context.Background(), record("a")); err != nil {
			h.t.Fatal(err)
		}
		c.Fence, *f = fence, fence
	}
}

// TestPausedLeaderDoesNotWrite is the split brain of issue 21: a leader
// paused past its lease while another replica took over resumes in the
// middle of a reconcile that decided to rescale. Nothing may be written:
// neither /scale nor the HPA status nor an event, and the workers stop.
func TestPausedLeaderDoesNotWrite(t *testing.T) {
	tests := []struct {
		name string
		// pause runs while the reconcile reads the metrics.
		pause func(h *harness, f *LeaseFence, b *fakeLock)
		// wantWrites: the lease is still ours, the rescale goes through.
		wantWrites bool
	}{
		{
			name:       "lease still held",
			pause:      func(h *harness, _ *LeaseFence, _ *fakeLock) { h.clock.Step(5 * time.Second) },
			wantWrites: true,
		},
		{
			name: "paused past the lease, taken by another replica",
			pause: func(h *harness, _ *LeaseFence, b *fakeLock) {
				h.clock.Step(16 * time.Second)
				if _, _, err := b.Get(context.Background()); err != nil {
					h.t.Fatal(err)
				}
				if err := b.Update(context.Background(), record("b")); err != nil {
					h.t.Fatal(err)
				}
				h.clock.Step(10 * time.Second)
			},
		},
		{
			name:  "renewal older than the lease less the margin",
			pause: func(h *harness, _ *LeaseFence, _ *fakeLock) { h.clock.Step(14 * time.Second) },
		},
		{
			name: "takeover observed by the renew loop",
			pause: func(h *harness, f *LeaseFence, b *fakeLock) {
				if _, _, err := b.Get(context.Background()); err != nil {
					h.t.Fatal(err)
				}
				if err := b.Update(context.Background(), record("b")); err != nil {
					h.t.Fatal(err)
				}
				if _, _, err := f.Get(context.Background()); err != nil {
					h.t.Fatal(err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fence *LeaseFence
			store := &leaseStore{}
			h := newHarness(t, world{
				hpas:    []*autoscalingv2.HorizontalPodAutoscaler{cpuHPA("web", 1, 10, 50)},
				targets: []target{{name: "web", replicas: 2, cpuRequest: 100, cpuUsage: []int64{150, 150}}},
			}, withFence(&fence, store))
			b := &fakeLock{id: "b", store: store}
			h.metrics.PrependReactor("list", "pods", func(core.Action) (bool, runtime.Object, error) {
				tt.pause(h, fence, b)
				return false, nil, nil
			})

			err := h.reconcile("web")
			scaleWrites, hpaWrites, events := h.scaleWrites(), h.hpaWrites(), h.events.take()
			if tt.wantWrites {
				if err != nil || scaleWrites != 1 || len(hpaWrites) != 1 || len(events) != 1 || h.c.lostError() != nil {
					t.Fatalf("with the lease held: err=%v, %d scale writes, HPA writes %v, events %v, lost %v; want the rescale written",
						err, scaleWrites, hpaWrites, events, h.c.lostError())
				}
				return
			}
			if !errors.Is(err, ErrNotLeader) {
				t.Errorf("reconcile error = %v, want ErrNotLeader", err)
			}
			if scaleWrites != 0 {
				t.Errorf("%d /scale writes, want none", scaleWrites)
			}
			if diff := cmp.Diff([]string(nil), hpaWrites); diff != "" {
				t.Errorf("HPA writes (-want +got):\n%s", diff)
			}
			if len(events) != 0 {
				t.Errorf("events %v, want none", events)
			}
			if h.replicas("web") != 2 {
				t.Errorf("target replicas = %d, want 2", h.replicas("web"))
			}
			if !errors.Is(h.c.lostError(), ErrNotLeader) {
				t.Errorf("workers not stopped: lostError = %v", h.c.lostError())
			}
			if got := h.counter("promscaler_autoscaler_fence_refusals_total", nil); got != 1 {
				t.Errorf("fence_refusals_total = %v, want 1", got)
			}
		})
	}
}

// TestRunStopsWhenLeaseLost: with nothing to write, the fence poll alone
// stops a running controller once the lease is stale.
func TestRunStopsWhenLeaseLost(t *testing.T) {
	var fence *LeaseFence
	h := newHarness(t, world{}, withFence(&fence, &leaseStore{}), func(_ *harness, c *Config) { c.FencePollInterval = time.Millisecond })
	done := make(chan error, 1)
	go func() { done <- h.c.Run(context.Background()) }()
	h.clock.Step(14 * time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("Run = %v, want an ErrNotLeader", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after the lease went stale")
	}
}
