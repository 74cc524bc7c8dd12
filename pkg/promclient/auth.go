package promclient

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// secretRefreshInterval is how long a credential read from a file is used
// before the file is read again. A 401 answer forces a re-read at once.
const secretRefreshInterval = 30 * time.Second

// fileSecret is a credential kept in a file (a mounted Secret) that may be
// rotated: it is re-read every secretRefreshInterval and after a 401. When a
// re-read fails (e.g. mid-rotation) the previous value keeps being used.
type fileSecret struct {
	path  string
	clock clock.PassiveClock

	mu     sync.Mutex
	value  string
	readAt time.Time
	stale  bool
}

func newFileSecret(path string, clk clock.PassiveClock) *fileSecret {
	return &fileSecret{path: path, clock: clk}
}

// get returns the current value, re-reading the file when due.
func (f *fileSecret) get() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.value != "" && !f.stale && f.clock.Since(f.readAt) < secretRefreshInterval {
		return f.value, nil
	}
	data, err := os.ReadFile(f.path)
	v := strings.TrimSpace(string(data))
	if err == nil && v == "" {
		err = fmt.Errorf("%s is empty", f.path)
	}
	if err != nil {
		if f.value == "" {
			return "", fmt.Errorf("reading credential file: %w", err)
		}
		// Keep serving with the old value; retry after the interval.
		klog.V(2).InfoS("Could not re-read credential file, keeping the previous value", "path", f.path, "err", err)
		f.readAt, f.stale = f.clock.Now(), false
		return f.value, nil
	}
	if f.value != "" && v != f.value {
		klog.V(2).InfoS("Credential file changed, using the new value", "path", f.path)
	}
	f.value, f.readAt, f.stale = v, f.clock.Now(), false
	return v, nil
}

// invalidate makes the next get re-read the file.
func (f *fileSecret) invalidate() {
	f.mu.Lock()
	f.stale = true
	f.mu.Unlock()
}

// bearerFileRoundTripper sets "Authorization: Bearer <token>" from a file,
// unless the request already has an Authorization header (an explicit
// --prometheus-header wins, as in prometheus-adapter).
type bearerFileRoundTripper struct {
	token *fileSecret
	next  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b *bearerFileRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return b.next.RoundTrip(req)
	}
	tok, err := b.token.get()
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("bearer token: %w", err)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.next.RoundTrip(r)
	if resp != nil && resp.StatusCode == http.StatusUnauthorized {
		b.token.invalidate()
	}
	return resp, err
}

// basicAuthRoundTripper sets basic auth from a user name and a password file,
// unless the request already has an Authorization header.
type basicAuthRoundTripper struct {
	user     string
	password *fileSecret
	next     http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b *basicAuthRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return b.next.RoundTrip(req)
	}
	pw, err := b.password.get()
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("basic auth password: %w", err)
	}
	r := req.Clone(req.Context())
	r.SetBasicAuth(b.user, pw)
	resp, err := b.next.RoundTrip(r)
	if resp != nil && resp.StatusCode == http.StatusUnauthorized {
		b.password.invalidate()
	}
	return resp, err
}

// headerRoundTripper adds fixed headers (e.g. X-Scope-OrgID) to every request.
type headerRoundTripper struct {
	headers http.Header
	next    http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (h *headerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	for k, vs := range h.headers {
		r.Header.Del(k)
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	return h.next.RoundTrip(r)
}

// closeBody honours the RoundTripper contract of closing the request body
// even when the request is not sent.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// closeIdler is implemented by transports that keep idle connections.
type closeIdler interface{ CloseIdleConnections() }

func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(closeIdler); ok {
		c.CloseIdleConnections()
	}
}

// CloseIdleConnections forwards to the wrapped transport, so that
// http.Client.CloseIdleConnections reaches it.
func (b *bearerFileRoundTripper) CloseIdleConnections() { closeIdle(b.next) }

// CloseIdleConnections forwards to the wrapped transport.
func (b *basicAuthRoundTripper) CloseIdleConnections() { closeIdle(b.next) }

// CloseIdleConnections forwards to the wrapped transport.
func (h *headerRoundTripper) CloseIdleConnections() { closeIdle(h.next) }
