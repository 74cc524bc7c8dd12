//go:build e2e && chaos

package chaos

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
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
var garbageBodies = []struct{ name, contentType, body string }{
	{"truncated JSON", "application/json", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"p-0"`},
	{"a value that is not a number", "application/json", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"chaos","pod":"p-0"},"value":[1700000000,"not-a-number"]}]}}`},
	{"a result of the wrong type", "application/json", `{"status":"success","data":{"resultType":"matrix","result":"oops"}}`},
	{"a JSON array", "application/json", `[1,2,3]`},
	{"HTML", "text/html", `<html><body>502 Bad Gateway</body></html>`},
	{"an empty body", "application/json", ``},
	{"a sample without its value", "application/json", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"namespace":"chaos","pod":"p-0"},"value":[1700000000]}]}}`},
	{"binary", "application/json", "\x00\xff\xfe garbage \x1b[0m"},
}

// faultProxy sits between the adapter and Prometheus.
type faultProxy struct {
	URL   string
	mode  atomic.Int32
	delay atomic.Int64
	n     atomic.Int64
	// fixed, when >= 0, picks one garbage body instead of rotating.
	fixed atomic.Int32
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
	p.fixed.Store(-1)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // a down Prometheus is the fault, not news
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch proxyMode(p.mode.Load()) {
		case slow:
			select {
			case <-time.After(time.Duration(p.delay.Load())):
			case <-r.Context().Done():
				return
			}
		case garbage:
			i := int(p.n.Add(1)) % len(garbageBodies)
			if f := p.fixed.Load(); f >= 0 {
				i = int(f)
			}
			g := garbageBodies[i]
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

// garbageByKind asks for each metric once per garbage body (the proxy
// answering only that one) and reports the bodies that came back as a 200
// with a wrong value. It ends with the proxy passing through again.
func (s *stack) garbageByKind(ctx context.Context) string {
	defer func() {
		s.proxy.fixed.Store(-1)
		s.proxy.set(passThrough, 0)
	}()
	var out []string
	for i, g := range garbageBodies {
		s.proxy.fixed.Store(int32(i))
		s.proxy.set(garbage, 0)
		var kinds []string
		for _, k := range []kind{kindCustom, kindExternal} {
			r := s.ask(ctx, k)
			if r.status == http.StatusOK && r.wrong {
				kinds = append(kinds, k.String())
				s.t.Logf("garbage body %q: %s metric answered 200: %s", g.body, k, r.body)
			}
		}
		if len(kinds) > 0 {
			out = append(out, fmt.Sprintf("%s (`%s`): 200 with a wrong value (%s metrics)", g.name, g.body, strings.Join(kinds, " and ")))
		}
	}
	if len(out) == 0 {
		return "every garbage body, asked one by one, answered without a wrong value"
	}
	return "bodies giving a wrong value, asked one by one: " + strings.Join(out, "; ")
}
