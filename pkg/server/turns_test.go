package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/turns"
)

// turnRequest is one request through instrumentRequests whose handler runs
// a provider call quietly (as the metrics APIs' do), then signals built and
// waits for write before writing its answer: the test decides when each
// request has built its answer.
type turnRequest struct {
	built   chan struct{} // closed when the request holds its turn
	write   chan struct{} // closed by the test: write the answer
	written chan struct{} // closed when the answer's first write returned
	done    chan struct{} // closed when ServeHTTP returned
	err     error
}

func newTurnRequest() *turnRequest {
	return &turnRequest{built: make(chan struct{}), write: make(chan struct{}), written: make(chan struct{}), done: make(chan struct{})}
}

// serveTurn serves r through instrumentRequests with ts, writing to w.
// timeout, when positive, is the request's deadline inside the chain (the
// API server's request timeout).
func serveTurn(timeout time.Duration, ts *turns.Turns, r *turnRequest, w http.ResponseWriter) {
	h := instrumentRequests(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		_, err := quietly(ctx, func(context.Context) (int, error) { return 1, nil })
		r.err = err
		if err != nil {
			return
		}
		close(r.built)
		<-r.write
		_, _ = w.Write([]byte("answer"))
		close(r.written)
	}), metrics.New(), ts)
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/a/pods/*/x", nil))
	close(r.done)
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// blockingWriter is a client that does not read: Write blocks until
// release is closed.
type blockingWriter struct {
	*httptest.ResponseRecorder
	release chan struct{}
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	return b.ResponseRecorder.Write(p)
}

// One turn: a second request builds only once the first is writing, a
// request writing to a client that does not read holds no turn, and a
// handler's write gives its turn back.
func TestAnswerTurns(t *testing.T) {
	ts := turns.New(1, nil)
	a, b, c := newTurnRequest(), newTurnRequest(), newTurnRequest()
	slowClient := &blockingWriter{ResponseRecorder: httptest.NewRecorder(), release: make(chan struct{})}
	go serveTurn(0, ts, a, slowClient)
	<-a.built
	go serveTurn(0, ts, b, httptest.NewRecorder())
	time.Sleep(50 * time.Millisecond)
	if closed(b.built) {
		t.Fatal("a second request built its answer while the only turn was held")
	}
	close(a.write)
	select {
	case <-b.built:
	case <-time.After(5 * time.Second):
		t.Fatal("a request writing to a client that does not read still holds its turn")
	}
	if closed(a.written) {
		t.Fatal("the slow client's write returned before it was released")
	}
	go serveTurn(0, ts, c, httptest.NewRecorder())
	time.Sleep(50 * time.Millisecond)
	if closed(c.built) {
		t.Fatal("c built while b held the turn")
	}
	close(b.write)
	<-b.done
	select {
	case <-c.built:
	case <-time.After(5 * time.Second):
		t.Fatal("b's turn was not given back when it wrote its answer")
	}
	close(c.write)
	<-c.done
	close(slowClient.release)
	<-a.done
	for name, r := range map[string]*turnRequest{"a": a, "b": b, "c": c} {
		if r.err != nil {
			t.Errorf("%s: %v", name, r.err)
		}
	}
	if n := ts.Held(); n != 0 {
		t.Errorf("%d turns held after every request returned, want 0", n)
	}
}

// A request whose deadline passes while it waits for its turn fails with a
// 504 (quietly), and leaves no turn held.
func TestAnswerTurnDeadline(t *testing.T) {
	ts := turns.New(1, nil)
	a := newTurnRequest()
	go serveTurn(0, ts, a, httptest.NewRecorder())
	<-a.built
	b := newTurnRequest()
	serveTurn(100*time.Millisecond, ts, b, httptest.NewRecorder())
	var s apierrors.APIStatus
	if !errors.As(b.err, &s) || s.Status().Code != http.StatusGatewayTimeout {
		t.Fatalf("waiting for a turn past the deadline: got %v, want a 504 status", b.err)
	}
	close(a.write)
	<-a.done
	if n := ts.Held(); n != 0 {
		t.Errorf("%d turns held after every request returned, want 0", n)
	}
}

// Without a bound every request builds at once.
func TestAnswerTurnsOff(t *testing.T) {
	if turns.New(0, nil) != nil {
		t.Fatal("0 turns must mean no bound")
	}
	var rs []*turnRequest
	for range 3 {
		r := newTurnRequest()
		rs = append(rs, r)
		go serveTurn(0, nil, r, httptest.NewRecorder())
	}
	for i, r := range rs {
		select {
		case <-r.built:
		case <-time.After(5 * time.Second):
			t.Fatalf("request %d waited without a bound", i)
		}
	}
	for _, r := range rs {
		close(r.write)
		<-r.done
	}
}
