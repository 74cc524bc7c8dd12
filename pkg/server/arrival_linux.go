//go:build linux

package server

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// maxRxAge bounds how long before a read its bytes may be said to have
// arrived. The kernel's receive time is a wall-clock reading; if the wall
// clock steps forward between a segment's arrival and its read, the age
// computed from it is too long by the step. A longer real wait is simply
// stamped later than it happened, which is always safe (see stampArrival).
const maxRxAge = time.Second

// rxStamps reads a TCP connection with recvmsg, asking the kernel when the
// bytes of each read reached the socket (SO_TIMESTAMPNS). For TCP the kernel
// reports the arrival of the last segment a read consumed, so every byte the
// read returns arrived no later than that.
//
// The point is a busy server: a connection's reader may run tens of
// milliseconds after its bytes arrived, and the time it ran is all a plain
// read can tell.
type rxStamps struct {
	conn net.Conn
	raw  syscall.RawConn

	// mu serializes reads (a TLS connection does already) so that recv and
	// its state are used by one read at a time without allocating a closure
	// per read.
	mu   sync.Mutex
	recv func(fd uintptr) bool
	p    []byte
	n    int
	oobn int
	err  error
	oob  [oobWords]uint64 // uint64: aligned for syscall.Cmsghdr
}

// oobWords holds one SCM_TIMESTAMPNS control message with room to spare.
const oobWords = 8

// newRxReader turns on receive timestamps on c and returns a reader that
// uses them, or nil when c is not a TCP connection that takes them.
func newRxReader(c net.Conn) rxReader {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return nil
	}
	r := &rxStamps{conn: c, raw: raw}
	r.recv = func(fd uintptr) bool {
		for {
			r.n, r.oobn, _, _, r.err = syscall.Recvmsg(int(fd), r.p, r.oobBytes(), 0)
			if r.err != syscall.EINTR {
				// EAGAIN: nothing to read yet; RawConn.Read waits until the
				// socket is readable (honouring deadlines) and calls again.
				return r.err != syscall.EAGAIN
			}
		}
	}
	return r
}

func (r *rxStamps) oobBytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&r.oob[0])), len(r.oob)*8)
}

// read implements rxReader: it reads like net.Conn.Read and returns when the
// bytes read arrived (the read's end when the kernel did not say).
func (r *rxStamps) read(p []byte) (int, time.Time, error) {
	if len(p) == 0 {
		return 0, time.Now(), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.p = p
	err := r.raw.Read(r.recv)
	r.p = nil
	now := time.Now()
	switch {
	case err != nil: // deadline, closed connection: already a *net.OpError
		return 0, now, err
	case r.err != nil:
		return 0, now, &net.OpError{Op: "read", Net: "tcp", Source: r.conn.LocalAddr(), Addr: r.conn.RemoteAddr(), Err: os.NewSyscallError("recvmsg", r.err)}
	case r.n == 0:
		return 0, now, io.EOF
	}
	return r.n, rxTime(r.oobBytes()[:r.oobn], now), nil
}

// rxTime is the arrival time in the control messages oob, as a time with a
// monotonic reading (now less the arrival's age, at most maxRxAge), or now
// when oob has none. oob must be aligned for syscall.Cmsghdr.
func rxTime(oob []byte, now time.Time) time.Time {
	tsLen := syscall.CmsgLen(int(unsafe.Sizeof(syscall.Timespec{})))
	for len(oob) >= syscall.SizeofCmsghdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < syscall.SizeofCmsghdr || l > len(oob) {
			break
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS && l >= tsLen {
			ts := (*syscall.Timespec)(unsafe.Pointer(&oob[syscall.CmsgLen(0)]))
			age := now.Sub(time.Unix(ts.Unix()))
			return now.Add(-min(max(age, 0), maxRxAge))
		}
		next := syscall.CmsgSpace(l - syscall.CmsgLen(0))
		if next > len(oob) {
			break
		}
		oob = oob[next:]
	}
	return now
}
