package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// pausableLock stands for a process stopped with SIGSTOP: while paused,
// every call blocks until resume; a call whose context ended meanwhile
// then fails as a real request would.
type pausableLock struct {
	resourcelock.Interface
	mu      sync.Mutex
	gate    chan struct{} // nil: running
	blocked chan context.Context
}

func (p *pausableLock) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate, p.blocked = make(chan struct{}), make(chan context.Context, 1)
}

func (p *pausableLock) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.gate)
	p.gate = nil
}

func (p *pausableLock) wait(ctx context.Context) error {
	p.mu.Lock()
	gate, blocked := p.gate, p.blocked
	p.mu.Unlock()
	if gate != nil {
		select {
		case blocked <- ctx:
		default:
		}
		<-gate
	}
	return ctx.Err()
}

func (p *pausableLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if err := p.wait(ctx); err != nil {
		return nil, nil, err
	}
	return p.Interface.Get(ctx)
}

func (p *pausableLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if err := p.wait(ctx); err != nil {
		return err
	}
	return p.Interface.Update(ctx, ler)
}

// TestResumedStaleLeaderDoesNotRelease is fault 2 of issue 32 with
// client-go's own leader elector (ReleaseOnCancel, as the autoscaler runs
// it): the leader is paused in a renewal past its renew deadline, another
// replica takes the lease, the leader resumes. Its renewal fails and
// client-go releases the lease: it re-reads the Lease (fresh
// resourceVersion) but checks leadership against the record it observed
// before the pause, so the release would overwrite the live leader's
// Lease. The fence must refuse that write.
func TestResumedStaleLeaderDoesNotRelease(t *testing.T) {
	store := &leaseStore{}
	a := &pausableLock{Interface: &fakeLock{id: "a", store: store}}
	b := &fakeLock{id: "b", store: store}
	fence, err := NewLeaseFence(a, clock.RealClock{}, 2*time.Second, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: fence, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 50 * time.Millisecond,
		ReleaseOnCancel: true, Name: "test",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(started) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); le.Run(ctx) }()
	<-started

	a.pause()
	blockedCtx := <-a.blocked // a renewal is in flight, the process stopped
	<-blockedCtx.Done()       // ... past its renew deadline
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, record("b")); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	took := store.version
	store.mu.Unlock()
	a.resume()
	<-done // renew failed, release tried, Run returned

	store.mu.Lock()
	defer store.mu.Unlock()
	if store.rec.HolderIdentity != "b" || store.version != took {
		t.Errorf("the resumed stale leader wrote the Lease: holder %q (want \"b\"), version %d (want %d)", store.rec.HolderIdentity, store.version, took)
	}
	if _, err := fence.ValidUntil(); err == nil {
		t.Errorf("the stale leader's fence still allows writes")
	}
}
