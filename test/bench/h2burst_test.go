//go:build e2e && bench

package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// h2Conn is one HTTP/2 connection to the adapter driven frame by frame, so
// that a burst's requests on it leave in a single write: net/http writes
// (and flushes) each request from its own goroutine, which on a loaded
// 2-core machine spreads a 1,000-request burst over hundreds of
// milliseconds.
//
// It announces windows large enough for every answer it will read
// (2^31-1 per stream and for the connection), so it never sends
// WINDOW_UPDATE; it answers SETTINGS and PING; a GOAWAY or a connection
// error fails every stream still open.
type h2Conn struct {
	conn      *tls.Conn
	authority string
	// enc encodes every HEADERS block of the connection, in order (HPACK
	// state is per connection).
	enc    *hpack.Encoder
	encBuf bytes.Buffer
	nextID uint32

	wmu sync.Mutex // serializes writes to conn
	fr  *http2.Framer

	mu      sync.Mutex
	streams map[uint32]*h2Stream
	err     error // the connection's end, once it ended
}

// h2Stream is one request's answer.
type h2Stream struct {
	status int
	bytes  int
	// headers and done: when the answer's HEADERS and its last frame
	// were read.
	headers, done time.Time
	err           error
	finished      chan struct{}
}

func (st *h2Stream) finish(err error) {
	if st.err == nil {
		st.err = err
	}
	if st.done.IsZero() {
		st.done = time.Now()
	}
	close(st.finished)
}

// dialH2 opens a connection to the adapter at base (https://host:port) with
// the admin client certificate and completes the HTTP/2 handshake.
func dialH2(ctx context.Context, base string, kp *framework.KeyPair, maxStreams int) (*h2Conn, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("admin client certificate: %w", err)
	}
	d := tls.Dialer{Config: &tls.Config{
		Certificates:       []tls.Certificate{cert},
		InsecureSkipVerify: true, //nolint:gosec // loopback adapter, self-signed
		NextProtos:         []string{http2.NextProtoTLS},
	}}
	nc, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("dialling %s: %w", u.Host, err)
	}
	conn := nc.(*tls.Conn)
	if p := conn.ConnectionState().NegotiatedProtocol; p != http2.NextProtoTLS {
		conn.Close()
		return nil, fmt.Errorf("%s negotiated %q, not h2", u.Host, p)
	}
	c := &h2Conn{conn: conn, authority: u.Host, nextID: 1, streams: map[uint32]*h2Stream{}}
	c.enc = hpack.NewEncoder(&c.encBuf)
	c.fr = http2.NewFramer(conn, conn)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.fr.SetMaxReadFrameSize(1 << 20)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		conn.Close()
		return nil, fmt.Errorf("writing the HTTP/2 preface: %w", err)
	}
	if err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: math.MaxInt32},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20},
	); err != nil {
		conn.Close()
		return nil, fmt.Errorf("writing SETTINGS: %w", err)
	}
	if err := c.fr.WriteWindowUpdate(0, math.MaxInt32-65535); err != nil {
		conn.Close()
		return nil, fmt.Errorf("writing WINDOW_UPDATE: %w", err)
	}
	// The server's SETTINGS come first.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := c.fr.ReadFrame()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("reading the server's SETTINGS: %w", err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		conn.Close()
		return nil, fmt.Errorf("first frame from the server is %v, not SETTINGS", f.Header())
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); ok && int(v) < maxStreams {
		conn.Close()
		return nil, fmt.Errorf("the server allows %d concurrent streams per connection, fewer than %d", v, maxStreams)
	}
	_ = conn.SetReadDeadline(time.Time{})
	if err := c.fr.WriteSettingsAck(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("acknowledging SETTINGS: %w", err)
	}
	go c.readLoop()
	return c, nil
}

// close ends the connection.
func (c *h2Conn) close() { _ = c.conn.Close() }

// encodeGET appends to buf the HEADERS frame of a GET of path (with its
// query) that asks for gzip, as Go's transport does, and registers its
// stream. The HPACK state advances: the frames must be written in the order
// they were encoded.
func (c *h2Conn) encodeGET(buf *bytes.Buffer, path string) (*h2Stream, error) {
	c.encBuf.Reset()
	for _, hf := range []hpack.HeaderField{
		{Name: ":method", Value: "GET"},
		{Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: c.authority},
		{Name: ":path", Value: path},
		{Name: "accept-encoding", Value: "gzip"},
		{Name: "user-agent", Value: "promscaler-bench-h2burst"},
	} {
		if err := c.enc.WriteField(hf); err != nil {
			return nil, err
		}
	}
	id := c.nextID
	c.nextID += 2
	if err := http2.NewFramer(buf, nil).WriteHeaders(http2.HeadersFrameParam{
		StreamID: id, BlockFragment: c.encBuf.Bytes(), EndStream: true, EndHeaders: true,
	}); err != nil {
		return nil, err
	}
	st := &h2Stream{finished: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	c.streams[id] = st
	return st, nil
}

// write sends encoded frames in one write.
func (c *h2Conn) write(frames []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.conn.Write(frames)
	return err
}

// get sends one GET and waits for its answer.
func (c *h2Conn) get(ctx context.Context, path string) (*h2Stream, error) {
	var buf bytes.Buffer
	st, err := c.encodeGET(&buf, path)
	if err != nil {
		return nil, err
	}
	if err := c.write(buf.Bytes()); err != nil {
		return nil, err
	}
	select {
	case <-st.finished:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if st.err == nil && st.status != 200 {
		st.err = fmt.Errorf("HTTP %d", st.status)
	}
	return st, st.err
}

func (c *h2Conn) readLoop() {
	err := c.serve()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = fmt.Errorf("connection ended: %w", err)
	}
	for id, st := range c.streams {
		st.finish(c.err)
		delete(c.streams, id)
	}
}

func (c *h2Conn) serve() error {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				err = c.fr.WriteSettingsAck()
				c.wmu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				err = c.fr.WritePing(true, f.Data)
				c.wmu.Unlock()
			}
		case *http2.GoAwayFrame:
			return fmt.Errorf("GOAWAY %v", f.ErrCode)
		case *http2.MetaHeadersFrame:
			c.onStream(f.StreamID, func(st *h2Stream) bool {
				if st.headers.IsZero() {
					st.headers = time.Now()
					st.status, _ = strconv.Atoi(f.PseudoValue("status"))
				}
				return f.StreamEnded()
			})
		case *http2.DataFrame:
			n := len(f.Data())
			c.onStream(f.StreamID, func(st *h2Stream) bool {
				st.bytes += n
				return f.StreamEnded()
			})
		case *http2.RSTStreamFrame:
			c.mu.Lock()
			if st, ok := c.streams[f.StreamID]; ok {
				delete(c.streams, f.StreamID)
				st.finish(fmt.Errorf("RST_STREAM %v", f.ErrCode))
			}
			c.mu.Unlock()
		}
		if err != nil {
			return err
		}
	}
}

// onStream applies fn to the stream's state and finishes the stream when fn
// says it ended.
func (c *h2Conn) onStream(id uint32, fn func(*h2Stream) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.streams[id]
	if !ok {
		return
	}
	if fn(st) {
		delete(c.streams, id)
		st.finish(nil)
	}
}

// errNotOK is a finished stream whose status was not 200.
var errNotOK = errors.New("status not 200")

// h2Burst is a burst prepared on warm connections: each connection's
// requests encoded in one buffer, written with one Write each when fired.
type h2Burst struct {
	conns   []*h2Conn
	frames  [][]byte
	streams []*h2Stream
	// wrote[i]: when conns[i]'s Write started and returned.
	writeStart, writeEnd []time.Time
	writeErr             []error
}

// prepareH2Burst dials ceil(n/perConn) connections to base, sends one GET
// on each (of path on the first, warmPath on the others) and waits for its
// answer (so TLS, the HTTP/2 handshake and
// the server's per-connection state are done), then encodes n GETs of path,
// perConn per connection.
func prepareH2Burst(ctx context.Context, base, path string, kp *framework.KeyPair, n, perConn int) (*h2Burst, error) {
	conns := (n + perConn - 1) / perConn
	b := &h2Burst{writeStart: make([]time.Time, conns), writeEnd: make([]time.Time, conns), writeErr: make([]error, conns)}
	for i := range conns {
		c, err := dialH2(ctx, base, kp, perConn)
		if err != nil {
			b.close()
			return nil, err
		}
		b.conns = append(b.conns, c)
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		warm := path
		if i > 0 {
			warm = warmPath
		}
		_, err = c.get(wctx, warm)
		cancel()
		if err != nil {
			b.close()
			return nil, fmt.Errorf("warming burst connection %d: %w", i, err)
		}
	}
	for i, c := range b.conns {
		var buf bytes.Buffer
		for range min(perConn, n-i*perConn) {
			st, err := c.encodeGET(&buf, path)
			if err != nil {
				b.close()
				return nil, err
			}
			b.streams = append(b.streams, st)
		}
		b.frames = append(b.frames, buf.Bytes())
	}
	return b, nil
}

// fire writes every connection's requests at once (one goroutine per
// connection, released together) and waits for every answer or ctx.
func (b *h2Burst) fire(ctx context.Context) (release time.Time) {
	var (
		wg, ready sync.WaitGroup
		start     = make(chan struct{})
	)
	for i, c := range b.conns {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-start
			b.writeStart[i] = time.Now()
			b.writeErr[i] = c.write(b.frames[i])
			b.writeEnd[i] = time.Now()
		}()
	}
	ready.Wait()
	release = time.Now()
	close(start)
	wg.Wait()
	for _, st := range b.streams {
		select {
		case <-st.finished:
			if st.err == nil && st.status != 200 {
				st.err = fmt.Errorf("HTTP %d: %w", st.status, errNotOK)
			}
		case <-ctx.Done():
			return release
		}
	}
	return release
}

func (b *h2Burst) close() {
	for _, c := range b.conns {
		c.close()
	}
}
