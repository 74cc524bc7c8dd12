package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// ErrNotLeader is returned (wrapped) by a Fence when this replica may not
// write: it does not hold the lease, or its last renewal is too old.
var ErrNotLeader = errors.New("not the leader")

// Fence guards every write of the controller (/scale, HPA status and
// annotations, events that report an action). The controller asks it right
// before each write.
type Fence interface {
	// ValidUntil returns the time, on the fence's clock, until which this
	// replica may write, or an error wrapping ErrNotLeader when it may not
	// write now.
	ValidUntil() (time.Time, error)
}

// LeaseFence is a resourcelock.Interface wrapping the leader election lock:
// it watches every Create, Update and Get client-go's leader elector makes
// and knows when this replica last renewed the lease. A renewal counts
// from the moment its request was sent (before the API server stored it),
// so every other candidate, which waits a full lease duration after it
// observes a change of the lease, cannot take over before
// renewal + lease duration. The fence allows writes until
// renewal + lease duration - margin; the margin covers the write's own
// transit and the clocks' rate differences.
type LeaseFence struct {
	lock   resourcelock.Interface
	clock  clock.PassiveClock
	window time.Duration

	mu sync.Mutex
	// renewed is the send time of the last successful Create or Update that
	// made this replica the holder; zero when it does not hold the lease.
	renewed time.Time
	// lost is why the lease is no longer held (nil while held or before
	// the first acquisition).
	lost error
	// holder is the holder of the Lease as this replica last read or wrote
	// it: the record a release would overwrite (the lock's next Update is
	// conditional on that read's resourceVersion).
	holder string
}

var (
	_ resourcelock.Interface = (*LeaseFence)(nil)
	_ Fence                  = (*LeaseFence)(nil)
)

// NewLeaseFence wraps lock. Writes are allowed until leaseDuration - margin
// after the last renewal; margin must be positive and below leaseDuration.
func NewLeaseFence(lock resourcelock.Interface, clk clock.PassiveClock, leaseDuration, margin time.Duration) (*LeaseFence, error) {
	if margin <= 0 || margin >= leaseDuration {
		return nil, fmt.Errorf("fence margin %v: must be positive and less than the lease duration %v", margin, leaseDuration)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &LeaseFence{lock: lock, clock: clk, window: leaseDuration - margin}, nil
}

// ValidUntil implements Fence.
func (f *LeaseFence) ValidUntil() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.renewed.IsZero() {
		if f.lost != nil {
			return time.Time{}, f.lost
		}
		return time.Time{}, fmt.Errorf("%w: lease %s not acquired", ErrNotLeader, f.lock.Describe())
	}
	until := f.renewed.Add(f.window)
	if now := f.clock.Now(); !now.Before(until) {
		return time.Time{}, fmt.Errorf("%w: lease %s last renewed %v ago, writes allowed for %v after a renewal",
			ErrNotLeader, f.lock.Describe(), now.Sub(f.renewed).Round(time.Millisecond), f.window)
	}
	return until, nil
}

// Get implements resourcelock.Interface; a lease held by another identity
// ends this replica's right to write at once.
func (f *LeaseFence) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := f.lock.Get(ctx)
	if err != nil || rec == nil {
		return rec, raw, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holder = rec.HolderIdentity
	if rec.HolderIdentity != f.lock.Identity() && !f.renewed.IsZero() {
		f.renewed = time.Time{}
		f.lost = fmt.Errorf("%w: lease %s is held by %q", ErrNotLeader, f.lock.Describe(), rec.HolderIdentity)
	}
	return rec, raw, err
}

// Create implements resourcelock.Interface.
func (f *LeaseFence) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := f.clock.Now()
	err := f.lock.Create(ctx, ler)
	f.observeWrite(sent, ler, err)
	return err
}

// Update implements resourcelock.Interface. A release (a record naming
// another holder, or none) is sent only when the Lease this replica last
// read or wrote names it as the holder: client-go's release re-reads the
// Lease but checks leadership against the record it observed before (a
// pause), so without this check a replica resumed after another took over
// would wipe the live leader's Lease (issue 32). The release that is sent
// stays conditional on the resourceVersion of that read.
func (f *LeaseFence) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if id := f.lock.Identity(); ler.HolderIdentity != id {
		f.mu.Lock()
		holder := f.holder
		f.mu.Unlock()
		if holder != id {
			return fmt.Errorf("%w: not releasing lease %s: it is held by %q", ErrNotLeader, f.lock.Describe(), holder)
		}
	}
	sent := f.clock.Now()
	err := f.lock.Update(ctx, ler)
	f.observeWrite(sent, ler, err)
	return err
}

// observeWrite records a successful acquisition or renewal, or a release.
func (f *LeaseFence) observeWrite(sent time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	if err != nil {
		return // a failed renewal leaves the last good one in force
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holder = ler.HolderIdentity
	if ler.HolderIdentity == f.lock.Identity() {
		f.renewed, f.lost = sent, nil
		return
	}
	if !f.renewed.IsZero() {
		f.renewed = time.Time{}
		f.lost = fmt.Errorf("%w: lease %s released", ErrNotLeader, f.lock.Describe())
	}
}

// RecordEvent implements resourcelock.Interface.
func (f *LeaseFence) RecordEvent(s string) { f.lock.RecordEvent(s) }

// Identity implements resourcelock.Interface.
func (f *LeaseFence) Identity() string { return f.lock.Identity() }

// Describe implements resourcelock.Interface.
func (f *LeaseFence) Describe() string { return f.lock.Describe() }
