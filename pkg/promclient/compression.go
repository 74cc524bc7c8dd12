package promclient

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Values of Backend.Compression. The zero value "" is CompressionNone:
// the default, of the flag (--prometheus-compression) as of a Backend built
// without it (the transport asks for gzip only when told CompressionGzip).
const (
	// CompressionNone asks for uncompressed answers (no Accept-Encoding):
	// cheapest in CPU on both sides when the link is fast (in-cluster).
	CompressionNone = "none"
	// CompressionGzip asks for gzip-compressed answers (Go's transport
	// default): 10-20x fewer bytes for CPU on both sides, worth it on slow
	// or metered links (a remote Thanos, Mimir or VictoriaMetrics).
	CompressionGzip = "gzip"
)

// gunzipRoundTripper inflates gzip answers that reach the client still
// compressed: Go's transport inflates only the answers to the gzip it asked
// for itself, not those of a server that compresses unasked (with
// --prometheus-compression=none no Accept-Encoding is sent, which RFC 9110
// reads as "any coding") or of a request whose Accept-Encoding was set by
// --prometheus-header. Any other coding is an error naming it, rather than
// a JSON syntax error.
type gunzipRoundTripper struct {
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (g *gunzipRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	switch ce := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); ce {
	case "", "identity":
		return resp, nil
	case "gzip", "x-gzip":
		resp.Body = &gzipBody{body: resp.Body}
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Uncompressed = true
		return resp, nil
	default:
		resp.Body.Close()
		return nil, fmt.Errorf("prometheus answered with Content-Encoding %q, which the adapter does not decode (see --prometheus-compression)", ce)
	}
}

// CloseIdleConnections forwards to the wrapped transport.
func (g *gunzipRoundTripper) CloseIdleConnections() { closeIdle(g.next) }

// gzipBody inflates body, reading the gzip header on the first Read (as
// the standard transport does) so that RoundTrip does not block on it.
type gzipBody struct {
	body io.ReadCloser
	zr   *gzip.Reader
	err  error
}

func (b *gzipBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.zr == nil {
		if b.zr, b.err = gzip.NewReader(b.body); b.err != nil {
			return 0, fmt.Errorf("reading the gzip answer: %w", b.err)
		}
	}
	return b.zr.Read(p)
}

func (b *gzipBody) Close() error { return b.body.Close() }

// closeIdler is implemented by transports that keep idle connections.
type closeIdler interface{ CloseIdleConnections() }

func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(closeIdler); ok {
		c.CloseIdleConnections()
	}
}
