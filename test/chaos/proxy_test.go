//go:build e2e && chaos

package chaos

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// proxyMode is what the fault proxy does to each request.
type proxyMode int32

const (
	// passThrough forwards to Prometheus unchanged.
	passThrough proxyMode = iota
	// slow forwards after a delay (faultProxy.delay).
	slow
	// garbage answers itself, without asking Prometheus, with a malformed
	// body, rotating through several kinds of malformation.
	garbage
)

// garbageBodies are 200 answers a broken Prometheus (or something in
// between) might send: truncated JSON, the wrong JSON, a non-number value,
// HTML, an empty body.
var garbageBodies = []struct{ contentType, body string }{
	{"application/json", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"p-0"`},
	{"application/json", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"chaos","pod":"p-0"},"value":[1700000000,"not-a-number"]}]}}`},
	{"application/json", `{"status":"success","data":{"resultType":"matrix","result":"oops"}}`},
	{"application/json", `[1,2,3]`},
	{"text/html", `<html><body>502 Bad Gateway</body></html>`},
	{"application/json", ``},
	{"application/json", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"chaos","pod":"p-0"},"value":[1700000000]}]}}`},
	{"application/json", "\x00\xff\xfe garbage \x1b[0m"},
}

// faultProxy sits between the adapter and Prometheus.
type faultProxy struct {
	URL   string
	mode  atomic.Int32
	delay atomic.Int64
	n     atomic.Int64
	srv   *http.Server
}

func startFaultProxy(target string) (*faultProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{URL: "http://" + l.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = nil
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch proxyMode(p.mode.Load()) {
		case slow:
			select {
			case <-time.After(time.Duration(p.delay.Load())):
			case <-r.Context().Done():
				return
			}
		case garbage:
			g := garbageBodies[int(p.n.Add(1))%len(garbageBodies)]
			w.Header().Set("Content-Type", g.contentType)
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(g.body))
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

func (p *faultProxy) set(m proxyMode, delay time.Duration) {
	p.delay.Store(int64(delay))
	p.mode.Store(int32(m))
}

func (p *faultProxy) close() { _ = p.srv.Close() }
