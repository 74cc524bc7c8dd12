package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/promscaler/promscaler/pkg/promclient"

	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// stampArrivals is the one seam of the arrival stamps: it wraps gc's
// listener so that connections remember when the bytes they last read
// arrived (readStamps), puts stampArrival outermost in gc's handler chain
// (call it after BuildHandlerChainFunc is set), and returns the Prometheus
// clients' ArrivalFunc. Without it the clients would take the API server's
// received timestamp (request.ReceivedTimestampFrom), which a busy server
// sets as late as a handler goroutine gets to run: a 1,000-request burst
// then sent 2-9 queries instead of 1 (docs/performance.md).
func stampArrivals(gc *genericapiserver.Config) promclient.ArrivalFunc {
	var reads *readStamps
	if ss := gc.SecureServing; ss != nil && ss.Listener != nil {
		reads = newReadStamps(ss.Listener)
		ss.Listener = reads
	}
	build := gc.BuildHandlerChainFunc
	gc.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return stampArrival(reads, build(h, c))
	}
	return arrivalTime
}

// arrivalKey is the context key of the time a request arrived (see
// stampArrival).
type arrivalKey struct{}

// readStamps wraps the API server's listener so that every connection
// remembers when the bytes it last read reached the server. A request's
// bytes arrived no later than that time as seen when its handler starts,
// and usually much earlier than the handler starts: on a busy server the
// HTTP/2 reader parses a burst of requests over hundreds of milliseconds
// while the handlers already started compete with it for the processors,
// but it read the burst's bytes from the socket in its first reads, and
// the kernel says when they arrived (on Linux, newRxReader: a reader that
// only got to run late still stamps them when they came).
type readStamps struct {
	net.Listener
	// base gives the stamps a monotonic clock reading.
	base  time.Time
	conns sync.Map // remote address -> *stampedConn
}

func newReadStamps(l net.Listener) *readStamps {
	return &readStamps{Listener: l, base: time.Now()}
}

// Accept implements net.Listener.
func (l *readStamps) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &stampedConn{Conn: c, l: l, key: c.RemoteAddr().String(), rx: newRxReader(c)}
	l.conns.Store(sc.key, sc)
	return sc, nil
}

// lastRead is when the open connection from the remote address last read
// bytes, if it did.
func (l *readStamps) lastRead(remote string) (time.Time, bool) {
	v, ok := l.conns.Load(remote)
	if !ok {
		return time.Time{}, false
	}
	ns := v.(*stampedConn).lastRead.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	return l.base.Add(time.Duration(ns)), true
}

// rxReader reads a connection and says when the bytes it returns arrived
// (no earlier than they did).
type rxReader interface {
	read(p []byte) (n int, arrived time.Time, err error)
}

// stampedConn records when the bytes it last read arrived.
type stampedConn struct {
	net.Conn
	l   *readStamps
	key string
	// rx, when not nil, reads the connection with the kernel's receive
	// times; otherwise a read's bytes are stamped when it returns.
	rx rxReader
	// lastRead is the arrival of the bytes of the last read that returned
	// any, in nanoseconds since l.base (0: none yet).
	lastRead  atomic.Int64
	closeOnce sync.Once
}

// Read implements net.Conn.
func (c *stampedConn) Read(p []byte) (int, error) {
	if c.rx != nil {
		n, at, err := c.rx.read(p)
		if n > 0 {
			c.lastRead.Store(max(int64(at.Sub(c.l.base)), 1))
		}
		return n, err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.lastRead.Store(max(int64(time.Since(c.l.base)), 1))
	}
	return n, err
}

// Close implements net.Conn; the connection's stamp goes with it.
func (c *stampedConn) Close() error {
	c.closeOnce.Do(func() { c.l.conns.CompareAndDelete(c.key, c) })
	return c.Conn.Close()
}

// stampArrival records in the request's context when the request arrived:
// when the bytes its connection last read arrived (reads, nil when the
// listener is not wrapped) or else now, when the outermost handler starts.
//
// The time is what lets identical "now" Prometheus queries share an answer
// (pkg/promclient: an answer that landed after the request arrived is as fresh
// as one the request would have asked for itself). Both times are no
// earlier than the request's bytes reached the server, so the rule never
// hands out an answer older than the request; the connection's stamp is the
// closer of the two when the server is busy.
func stampArrival(reads *readStamps, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.Now()
		if reads != nil {
			if read, ok := reads.lastRead(r.RemoteAddr); ok && read.Before(t) {
				t = read
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), arrivalKey{}, t)))
	})
}

// arrivalTime is the Prometheus client's ArrivalTime: stampArrival's time,
// or else the API server's received timestamp (requests that did not come
// through stampArrival, e.g. tests of the inner chain).
func arrivalTime(ctx context.Context) (time.Time, bool) {
	if t, ok := ctx.Value(arrivalKey{}).(time.Time); ok {
		return t, true
	}
	return request.ReceivedTimestampFrom(ctx)
}
