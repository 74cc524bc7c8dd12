package promclient

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
)

// requestStateKey carries a *requestState from Client.send to verbClient.Do.
type requestStateKey struct{}

// requestState is the per-call plumbing between the Client and the
// api.Client below client_golang's v1 API: the timeout to send, and the HTTP
// status of the last answer, which v1's errors do not carry.
type requestState struct {
	timeout time.Duration
	status  int
	// arrived is when the request of the caller that sent the call
	// arrived, when known (for the request log).
	arrived time.Time
}

// verbClient is the api.Client under v1.API. client_golang sends query,
// series and label-name calls as a form POST (falling back to GET on 405);
// verbClient turns them into what the configuration asks: GET when the verb
// is GET and the URL stays under MaxGETURLLength, POST otherwise. It also
// adds timeout= (in a format every Prometheus-compatible server parses) and
// records the answer's status code.
type verbClient struct {
	inner api.Client
	// verb is GET or POST: New makes an empty Config.Verb GET, the verb's
	// one default (NewOptions and the backends file leave it empty).
	verb string
	// http sends instant queries (see query); inner sends the rest.
	http *http.Client
}

var _ api.Client = (*verbClient)(nil)

// URL implements api.Client.
func (v *verbClient) URL(ep string, args map[string]string) *url.URL {
	return v.inner.URL(ep, args)
}

// Do implements api.Client.
func (v *verbClient) Do(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	st, _ := ctx.Value(requestStateKey{}).(*requestState)
	req, err := v.rewrite(req, st)
	if err != nil {
		return nil, nil, err
	}
	resp, body, err := v.inner.Do(ctx, req)
	if st != nil && resp != nil {
		st.status = resp.StatusCode
	}
	return resp, body, err
}

// query sends the arguments of an API call to u exactly as client_golang's
// v1 API followed by Do would (a form POST turned into the configured verb,
// GET again when the answer is 403, 405 or 501), without building and then
// re-parsing the form, and hands the answer's status code and body to
// decode. The body is read into a pooled buffer that is reused once decode
// returns: decode must not keep any part of it. The answer's body is closed
// only after decode, so that a guard counts its bytes until they are
// decoded (GuardConfig.MaxAnswerBytes).
func (v *verbClient) query(ctx context.Context, u url.URL, args url.Values, decode func(code int, body []byte)) error {
	st, _ := ctx.Value(requestStateKey{}).(*requestState)
	encoded := st.encode(args)
	u.RawQuery = ""
	req, err := newArgsRequest(ctx, v.method(u, encoded), u, encoded)
	if err != nil {
		return err
	}
	// client_golang marks its POST idempotent (the header is not sent), so
	// that the transport may retry it on a broken keep-alive connection.
	req.Header["Idempotency-Key"] = nil
	a, err := v.do(ctx, req, st)
	if a.code == http.StatusForbidden || a.code == http.StatusMethodNotAllowed || a.code == http.StatusNotImplemented {
		a.release()
		if req, err = newArgsRequest(ctx, http.MethodGet, u, encoded); err != nil {
			return err
		}
		a, err = v.do(ctx, req, st)
	}
	defer a.release()
	if err != nil {
		return err
	}
	decode(a.code, a.buf.Bytes())
	return nil
}

// readAnswer is an answer read by do: its status code (0 when no answer
// came), its body in a pooled buffer (nil on error), and its still open
// body.
type readAnswer struct {
	code int
	buf  *bytes.Buffer
	body io.Closer
}

// release closes the answer's body and gives its buffer back.
func (a readAnswer) release() {
	if a.body != nil {
		a.body.Close()
	}
	putBodyBuffer(a.buf)
}

// do sends req with the HTTP client and reads the whole answer, as
// client_golang's api.Client Do does (the status code is recorded in st;
// when ctx ends while reading, the error is ctx's), but into a pooled
// buffer rather than a new one grown from 512 bytes for every answer. The
// caller releases the answer, which closes its body.
func (v *verbClient) do(ctx context.Context, req *http.Request, st *requestState) (readAnswer, error) {
	resp, err := v.http.Do(req)
	if err != nil {
		return readAnswer{}, err
	}
	if st != nil {
		st.status = resp.StatusCode
	}
	a := readAnswer{code: resp.StatusCode, buf: getBodyBuffer(), body: resp.Body}
	if resp.ContentLength > 0 && resp.ContentLength <= maxPresized {
		a.buf.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	if _, err = a.buf.ReadFrom(resp.Body); err != nil {
		// The buffer of a failed read (an answer refused for its size, a
		// broken connection) is not pooled: the pool would keep up to
		// maxPooledBody of it per concurrent failure, the memory the
		// answer bounds are there to save.
		resp.Body.Close()
		a.buf = nil
		a.body = nil
		if cerr := ctx.Err(); cerr != nil {
			return a, cerr
		}
		return a, err
	}
	return a, nil
}

// maxPresized is the largest Content-Length the body buffer is sized for
// before reading: a server's claim is not trusted beyond it (the guard
// bounds what is actually read).
const maxPresized = 4 << 20

// maxPooledBody is the largest buffer kept for reuse: a rare huge answer
// is not worth pinning its memory.
const maxPooledBody = 8 << 20

var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBodyBuffer() *bytes.Buffer { return bodyBuffers.Get().(*bytes.Buffer) }

func putBodyBuffer(b *bytes.Buffer) {
	if b == nil || b.Cap() > maxPooledBody {
		return
	}
	b.Reset()
	bodyBuffers.Put(b)
}

// method is the configured verb, or POST when a GET of u with the encoded
// arguments would be longer than MaxGETURLLength.
func (v *verbClient) method(u url.URL, encoded string) string {
	if v.verb == http.MethodGet && len(u.String())+1+len(encoded) > MaxGETURLLength {
		return http.MethodPost
	}
	return v.verb
}

// encode encodes the arguments of a call, with the timeout to send when st
// has one.
func (st *requestState) encode(args url.Values) string {
	if st != nil && st.timeout > 0 {
		args.Set("timeout", formatTimeout(st.timeout))
	}
	return args.Encode()
}

// newArgsRequest builds a GET with the encoded arguments in the URL or a
// form POST with them in the body.
func newArgsRequest(ctx context.Context, method string, u url.URL, encoded string) (*http.Request, error) {
	if method == http.MethodGet {
		u.RawQuery = encoded
		return http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(encoded))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req, nil
}

// rewrite picks the method and adds the timeout parameter.
func (v *verbClient) rewrite(req *http.Request, st *requestState) (*http.Request, error) {
	isForm := req.Method == http.MethodPost &&
		strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded")
	if req.Method != http.MethodGet && !isForm {
		return req, nil
	}
	raw := req.URL.RawQuery
	if isForm {
		if req.GetBody == nil {
			return req, nil
		}
		rc, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("reading request arguments: %w", err)
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("reading request arguments: %w", err)
		}
		raw = string(body)
	}
	args, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing request arguments: %w", err)
	}
	encoded := st.encode(args)

	u := *req.URL
	u.RawQuery = ""
	method := req.Method
	if isForm {
		// client_golang chose POST for an endpoint that accepts both; honour
		// the configured verb unless the URL would be too long for GET.
		method = v.method(u, encoded)
	}
	out, err := newArgsRequest(req.Context(), method, u, encoded)
	if err != nil {
		return nil, err
	}
	for k, vs := range req.Header {
		if method == http.MethodGet && k == "Content-Type" {
			continue
		}
		out.Header[k] = vs
	}
	return out, nil
}

// formatTimeout renders d for the timeout= parameter as whole seconds or,
// below a second, whole milliseconds ("10s", "250ms"). Go's "1.5s" or
// "1m30s" forms are not accepted by every server; this one is. The value is
// rounded down so that Prometheus gives up (with a clear error) just before
// the client does.
func formatTimeout(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	ms := d / time.Millisecond
	if ms < 1 {
		ms = 1
	}
	return fmt.Sprintf("%dms", ms)
}
