package apistatus

import (
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Failed requests are logged at most failureLogBurst at once and
// failureLogRate per second after that (issue 32: a 60 s Prometheus outage
// wrote 6,231 lines); the next line logged says how many were left out
// since the previous one. The client's message names the request id; a
// left-out request's id is then not in the log, but the failure that
// follows it (the same outage, usually) is.
const (
	failureLogRate  = 5
	failureLogBurst = 20
)

// failureLog is a token bucket over the "Metrics request failed" lines.
type failureLog struct {
	mu         sync.Mutex
	now        func() time.Time
	tokens     float64
	last       time.Time
	suppressed int
}

var failures = &failureLog{now: time.Now, tokens: failureLogBurst}

// allow takes a token; it returns whether to log and how many lines were
// left out since the last one logged.
func (l *failureLog) allow() (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.last.IsZero() {
		l.tokens = min(failureLogBurst, l.tokens+now.Sub(l.last).Seconds()*failureLogRate)
	}
	l.last = now
	if l.tokens < 1 {
		l.suppressed++
		return false, 0
	}
	l.tokens--
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// logFailure logs a failed request, rate-limited.
func logFailure(err error, id, what string) {
	ok, suppressed := failures.allow()
	if !ok {
		return
	}
	if suppressed > 0 {
		klog.ErrorS(err, "Metrics request failed", "requestID", id, "request", what, "failuresNotLogged", suppressed)
		return
	}
	klog.ErrorS(err, "Metrics request failed", "requestID", id, "request", what)
}
