package promclient

import (
	"context"
	"fmt"
	"sync"
)

// TeamBusyError is the error of a team rule's request whose context ended
// while Limit requests of namespace Namespace's team rules were in flight
// to Backend (GuardConfig.MaxConcurrentPerTeam): the team's own queries
// kept it waiting.
type TeamBusyError struct {
	Backend, Namespace string
	Limit              int
	Err                error
}

// Error implements error.
func (e *TeamBusyError) Error() string {
	return fmt.Sprintf("waiting for one of the %d requests of the team rules of namespace %q in flight to backend %q (--team-rules-max-in-flight): %v",
		e.Limit, e.Namespace, e.Backend, e.Err)
}

// Unwrap returns the context's error.
func (e *TeamBusyError) Unwrap() error { return e.Err }

// teamSlots holds, per namespace with team rule requests in flight or
// waiting, the slots of GuardConfig.MaxConcurrentPerTeam.
type teamSlots struct {
	mu sync.Mutex
	ns map[string]*teamSlot
}

// teamSlot is one namespace's slots and how many requests hold or wait for
// one (the entry goes when none does).
type teamSlot struct {
	slots chan struct{}
	users int
}

// acquire takes one of namespace ns's slots on guard g, waiting while all
// are held until ctx ends; release frees it (once; safe to call for every
// outcome). A request not of a team rule (ns "") or a guard without the
// bound takes nothing.
func (t *teamSlots) acquire(ctx context.Context, g *Guard, ns string) (release func(), err error) {
	limit := g.cfg.MaxConcurrentPerTeam
	if ns == "" || limit <= 0 {
		return func() {}, nil
	}
	t.mu.Lock()
	if t.ns == nil {
		t.ns = map[string]*teamSlot{}
	}
	s := t.ns[ns]
	if s == nil {
		s = &teamSlot{slots: make(chan struct{}, limit)}
		t.ns[ns] = s
	}
	s.users++
	t.mu.Unlock()
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		t.leave(ns, s)
		return nil, &TeamBusyError{Backend: g.name, Namespace: ns, Limit: limit, Err: context.Cause(ctx)}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-s.slots
			t.leave(ns, s)
		})
	}, nil
}

// leave counts a request of namespace ns out of its slot's users and drops
// the entry when none is left.
func (t *teamSlots) leave(ns string, s *teamSlot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.users--
	if s.users == 0 && t.ns[ns] == s {
		delete(t.ns, ns)
	}
}
