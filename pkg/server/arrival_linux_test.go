//go:build linux

package server

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// rxPair is a TCP connection through a readStamps listener: the client end
// and the server end (a *stampedConn).
func rxPair(t *testing.T) (reads *readStamps, client net.Conn, server *stampedConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reads = newReadStamps(ln)
	t.Cleanup(func() { reads.Close() })
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c, err := reads.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	server = c.(*stampedConn)
	if server.rx == nil {
		t.Fatal("no receive timestamps on a Linux TCP connection")
	}
	return reads, client, server
}

// TestReadStampsKernelArrival: bytes read long after they arrived are
// stamped when they arrived, not when they were read.
func TestReadStampsKernelArrival(t *testing.T) {
	reads, client, server := rxPair(t)
	buf := make([]byte, 64)
	// The kernel turns receive timestamps on for the whole host with
	// deferred work after the first socket asks for them; until that work
	// has run (late on a loaded machine) segments carry no arrival time and
	// a read is stamped at the read, which is safe. So try a few times:
	// the stamp must come from the kernel within 3 s.
	for attempt := 1; ; attempt++ {
		sent := time.Now()
		if _, err := client.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
			t.Fatal(err)
		}
		// The server's reader gets to run late, as on a busy server.
		time.Sleep(150 * time.Millisecond)
		readAt := time.Now()
		n, err := server.Read(buf)
		if err != nil || n == 0 {
			t.Fatalf("Read: %d bytes, %v", n, err)
		}
		got, ok := reads.lastRead(client.LocalAddr().String())
		if !ok {
			t.Fatal("no stamp after a read")
		}
		// The kernel's clock and ours may differ by rounding: 2 ms of slack
		// below, none above (the stamp must not be later than the read).
		if got.Before(sent.Add(-2 * time.Millisecond)) {
			t.Fatalf("stamp %v before its bytes were sent", got.Sub(sent))
		}
		if got.Before(readAt.Add(-100 * time.Millisecond)) {
			break
		}
		if attempt == 20 {
			t.Fatalf("after %d attempts the stamp is still the read's: %v after sending (want about 0), read %v after sending", attempt, got.Sub(sent), readAt.Sub(sent))
		}
		if got.After(readAt.Add(50 * time.Millisecond)) {
			t.Fatalf("stamp %v after sending, later than the read (%v)", got.Sub(sent), readAt.Sub(sent))
		}
	}

	// A later read is stamped with its own bytes' arrival.
	sent2 := time.Now()
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Read(buf); err != nil {
		t.Fatal(err)
	}
	got2, _ := reads.lastRead(client.LocalAddr().String())
	if got2.Before(sent2.Add(-2*time.Millisecond)) || got2.After(time.Now()) {
		t.Errorf("second stamp %v after its bytes were sent", got2.Sub(sent2))
	}
}

// TestReadStampsKernelErrors: the recvmsg reader reports what a net.Conn
// read does: a deadline as a timeout, the peer closing as io.EOF, a closed
// connection as net.ErrClosed, an empty buffer as nothing read.
func TestReadStampsKernelErrors(t *testing.T) {
	_, client, server := rxPair(t)
	buf := make([]byte, 8)
	if n, err := server.Read(buf[:0]); n != 0 || err != nil {
		t.Errorf("empty read: %d, %v", n, err)
	}
	if err := server.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := server.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("read past the deadline: %v, want a timeout", err)
	}
	if err := server.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	var got []byte
	for {
		n, err := server.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("after the peer closed: %v, want io.EOF", err)
			}
			break
		}
	}
	if string(got) != "ab" {
		t.Errorf("read %q, want %q", got, "ab")
	}
	server.Close()
	if _, err := server.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after Close: %v, want net.ErrClosed", err)
	}
}

// TestReadStampsOnlyTCP: other connections are read and stamped as before.
func TestReadStampsOnlyTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if r := newRxReader(a); r != nil {
		t.Errorf("a receive-timestamp reader for %T", a)
	}
}

// cmsgBuf builds control messages in an aligned buffer.
type cmsgBuf struct{ words [16]uint64 }

func (c *cmsgBuf) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&c.words[0])), len(c.words)*8)
}

// put writes a control message at off and returns the offset of the next.
func (c *cmsgBuf) put(off int, level, typ int32, data []byte, length int) int {
	b := c.bytes()
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&b[off]))
	h.Level, h.Type = level, typ
	h.SetLen(length)
	copy(b[off+syscall.CmsgLen(0):], data)
	return off + syscall.CmsgSpace(len(data))
}

func timespecBytes(t time.Time) []byte {
	ts := syscall.NsecToTimespec(t.UnixNano())
	return unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts))
}

func TestRxTime(t *testing.T) {
	now := time.Now()
	tsLen := syscall.CmsgLen(int(unsafe.Sizeof(syscall.Timespec{})))
	for _, tc := range []struct {
		name  string
		build func(c *cmsgBuf) int // returns the control messages' length
		want  time.Duration        // before now
	}{
		{"none", func(*cmsgBuf) int { return 0 }, 0},
		{"30ms ago", func(c *cmsgBuf) int {
			return c.put(0, syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, timespecBytes(now.Add(-30*time.Millisecond)), tsLen)
		}, 30 * time.Millisecond},
		{"after another message", func(c *cmsgBuf) int {
			off := c.put(0, syscall.SOL_SOCKET, syscall.SCM_RIGHTS, []byte{1, 2, 3, 4}, syscall.CmsgLen(4))
			return c.put(off, syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, timespecBytes(now.Add(-5*time.Millisecond)), tsLen)
		}, 5 * time.Millisecond},
		{"in the future (clock stepped back): now", func(c *cmsgBuf) int {
			return c.put(0, syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, timespecBytes(now.Add(time.Minute)), tsLen)
		}, 0},
		{"older than maxRxAge: bounded", func(c *cmsgBuf) int {
			return c.put(0, syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, timespecBytes(now.Add(-time.Hour)), tsLen)
		}, maxRxAge},
		{"another level", func(c *cmsgBuf) int {
			return c.put(0, syscall.IPPROTO_IP, syscall.SCM_TIMESTAMPNS, timespecBytes(now.Add(-time.Millisecond)), tsLen)
		}, 0},
		{"too short for a timespec", func(c *cmsgBuf) int {
			return c.put(0, syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, timespecBytes(now.Add(-time.Millisecond))[:4], syscall.CmsgLen(4))
		}, 0},
		{"length past the buffer", func(c *cmsgBuf) int {
			c.put(0, syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, timespecBytes(now.Add(-time.Millisecond)), 4096)
			return tsLen
		}, 0},
		{"length under a header", func(c *cmsgBuf) int {
			c.put(0, syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, nil, 3)
			return tsLen
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c cmsgBuf
			n := tc.build(&c)
			got := now.Sub(rxTime(c.bytes()[:n], now))
			// Timespecs hold nanoseconds; the wall/monotonic round trip
			// may move them by less than a microsecond.
			if d := got - tc.want; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("arrived %v before now, want %v", got, tc.want)
			}
		})
	}
}

// BenchmarkStampedRead measures a read through the recvmsg reader against
// a plain read of the same connection.
func BenchmarkStampedRead(b *testing.B) {
	for _, kernel := range []bool{true, false} {
		name := "recvmsg"
		if !kernel {
			name = "read"
		}
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			reads := newReadStamps(ln)
			defer reads.Close()
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			c, err := reads.Accept()
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			server := c.(*stampedConn)
			if !kernel {
				server.rx = nil
			}
			msg := make([]byte, 512)
			buf := make([]byte, 4096)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(server, buf[:len(msg)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
