package turns

import (
	"context"
	"errors"
	"testing"
	"time"
)

type observations []float64

func (o *observations) Observe(v float64) { *o = append(*o, v) }

func TestTake(t *testing.T) {
	var waited observations
	ts := New(1, &waited)
	ctxA, a := ts.Begin(context.Background())
	ctxB, b := ts.Begin(context.Background())
	if err := Take(ctxA); err != nil {
		t.Fatal(err)
	}
	// Taking again (a second Prometheus call of one request) is free.
	if err := Take(ctxA); err != nil {
		t.Fatal(err)
	}
	if got := ts.Held(); got != 1 {
		t.Fatalf("held %d, want 1", got)
	}
	got := make(chan error, 1)
	go func() { got <- Take(ctxB) }()
	select {
	case err := <-got:
		t.Fatalf("b took the only turn while a held it (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	a.End()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b did not get the turn a gave back")
	}
	b.End()
	b.End() // idempotent
	if got := ts.Held(); got != 0 {
		t.Errorf("held %d after both ended, want 0", got)
	}
	// An ended turn is not taken again: the request is writing its answer.
	if err := Take(ctxA); err != nil || ts.Held() != 0 {
		t.Errorf("Take after End: err %v, held %d; want nil, 0", err, ts.Held())
	}
	if len(waited) != 2 || waited[1] < 0.04 {
		t.Errorf("waits observed %v, want 2, the second at least 40 ms", waited)
	}
}

func TestTakeCancelled(t *testing.T) {
	ts := New(1, nil)
	ctxA, a := ts.Begin(context.Background())
	if err := Take(ctxA); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	ctxB, b := ts.Begin(ctx)
	cause := errors.New("client gone")
	time.AfterFunc(20*time.Millisecond, func() { cancel(cause) })
	if err := Take(ctxB); !errors.Is(err, cause) {
		t.Fatalf("Take with its context cancelled: %v, want %v", err, cause)
	}
	b.End()
	a.End()
	if got := ts.Held(); got != 0 {
		t.Errorf("held %d, want 0", got)
	}
}

func TestNoBound(t *testing.T) {
	if New(0, nil) != nil || New(-1, nil) != nil {
		t.Fatal("0 or less must be no bound (nil)")
	}
	var ts *Turns
	ctx, tn := ts.Begin(context.Background())
	if tn != nil {
		t.Fatal("a nil Turns gave a turn")
	}
	for range 3 {
		if err := Take(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tn.End()
	// Outside a request (discovery): no turn, no wait.
	if err := Take(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestDefault(t *testing.T) {
	if Default() < 2 {
		t.Errorf("Default() = %d, want at least 2", Default())
	}
}
