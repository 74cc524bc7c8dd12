package certauth

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// issuer is a test CA (or intermediate).
type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial atomic.Int64

func newCert(t *testing.T, tmpl *x509.Certificate, parent *issuer) *issuer {
	t.Helper()
	return issuedWithKey(t, tmpl, newKey(t), parent)
}

func newCA(t *testing.T, name string) *issuer { return newCAAt(t, name, t0) }

// newCAAt returns a CA valid from an hour before at to a day after.
func newCAAt(t *testing.T, name string, at time.Time) *issuer {
	return newCert(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: name}, NotBefore: at.Add(-time.Hour), NotAfter: at.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, nil)
}

// client issues a client certificate valid from t0-1h for validity.
func (ca *issuer) client(t *testing.T, cn string, orgs []string, validity time.Duration) *x509.Certificate {
	return newCert(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: cn, Organization: orgs}, NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(-time.Hour + validity),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca).cert
}

func (ca *issuer) pem() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

func staticCA(t *testing.T, name string, ca *issuer) dynamiccertificates.CAContentProvider {
	t.Helper()
	p, err := dynamiccertificates.NewStaticCAContent(name, ca.pem())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// countingCache is a cache on a fake clock that counts real verifications.
func countingCache(ttl time.Duration) (*Cache, *clocktesting.FakePassiveClock, *atomic.Int32) {
	clk := clocktesting.NewFakePassiveClock(t0)
	c := NewCache(clk, ttl)
	var n atomic.Int32
	c.verify = func(cert *x509.Certificate, opts x509.VerifyOptions) ([][]*x509.Certificate, error) {
		n.Add(1)
		return cert.Verify(opts)
	}
	return c, clk, &n
}

func TestCacheVerify(t *testing.T) {
	root := newCA(t, "root")
	inter := newCert(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "intermediate"}, NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(12 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, root)
	other := newCA(t, "other")
	leaf := root.client(t, "alice", nil, 2*time.Hour) // expires t0+1h
	viaInter := inter.client(t, "bob", nil, 48*time.Hour)
	pool := func(cas ...*issuer) *x509.CertPool {
		p := x509.NewCertPool()
		for _, ca := range cas {
			p.AddCert(ca.cert)
		}
		return p
	}
	rootPool := pool(root)
	clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	opts := x509.VerifyOptions{Roots: rootPool, KeyUsages: clientAuth}

	c, clk, verifications := countingCache(time.Minute)
	steps := []struct {
		name  string
		at    time.Duration // since t0
		certs []*x509.Certificate
		opts  x509.VerifyOptions
		ok    bool
		// verified: whether the step verified the signatures (not from
		// the cache).
		verified bool
	}{
		{name: "first request verifies", certs: []*x509.Certificate{leaf}, opts: opts, ok: true, verified: true},
		{name: "then it is kept", at: 59 * time.Second, certs: []*x509.Certificate{leaf}, opts: opts, ok: true},
		{name: "verified again after the TTL", at: time.Minute, certs: []*x509.Certificate{leaf}, opts: opts, ok: true, verified: true},
		{name: "another pool (a reloaded CA bundle) verifies again", at: time.Minute, certs: []*x509.Certificate{leaf}, opts: x509.VerifyOptions{Roots: pool(root), KeyUsages: clientAuth}, ok: true, verified: true},
		{name: "other key usages verify again", at: time.Minute, certs: []*x509.Certificate{leaf}, opts: x509.VerifyOptions{Roots: rootPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ok: false, verified: true},
		{name: "a pool without its CA fails", at: time.Minute, certs: []*x509.Certificate{leaf}, opts: x509.VerifyOptions{Roots: pool(other), KeyUsages: clientAuth}, ok: false, verified: true},
		{name: "still kept for its own pool", at: time.Minute + time.Second, certs: []*x509.Certificate{leaf}, opts: opts, ok: true},
		{name: "verified shortly before the certificate's end", at: time.Hour - 30*time.Second, certs: []*x509.Certificate{leaf}, opts: opts, ok: true, verified: true},
		{name: "not past the certificate's end, within the TTL", at: time.Hour + time.Second, certs: []*x509.Certificate{leaf}, opts: opts, ok: false, verified: true},
		{name: "failures are not kept", at: time.Hour + 2*time.Second, certs: []*x509.Certificate{leaf}, opts: opts, ok: false, verified: true},
		{name: "chain through an intermediate", certs: []*x509.Certificate{viaInter, inter.cert}, opts: opts, ok: true, verified: true},
		{name: "kept", at: time.Second, certs: []*x509.Certificate{viaInter, inter.cert}, opts: opts, ok: true},
		{name: "without its intermediate it is another chain, which fails", at: 2 * time.Second, certs: []*x509.Certificate{viaInter}, opts: opts, ok: false, verified: true},
		{name: "verified shortly before the intermediate's end", at: 12*time.Hour - 30*time.Second, certs: []*x509.Certificate{viaInter, inter.cert}, opts: opts, ok: true, verified: true},
		{name: "not past the intermediate's end although the leaf is valid", at: 12*time.Hour + time.Second, certs: []*x509.Certificate{viaInter, inter.cert}, opts: opts, ok: false, verified: true},
		{name: "the failure past its end dropped nothing kept before", at: 12*time.Hour - 20*time.Second, certs: []*x509.Certificate{viaInter, inter.cert}, opts: opts, ok: true},
		{name: "never before the certificates' start (clock stepped back)", at: -2 * time.Hour, certs: []*x509.Certificate{viaInter, inter.cert}, opts: opts, ok: false, verified: true},
		{name: "no certificate", certs: nil, opts: opts, ok: false},
	}
	for _, st := range steps {
		clk.SetTime(t0.Add(st.at))
		before := verifications.Load()
		chains, err := c.Verify(st.certs, st.opts)
		verified := verifications.Load() != before
		if (err == nil) != st.ok || verified != st.verified {
			t.Errorf("%s: err %v, verified %v; want ok %v, verified %v", st.name, err, verified, st.ok, st.verified)
		}
		if err == nil && (len(chains) == 0 || chains[0][0] != st.certs[0]) {
			t.Errorf("%s: chains %v do not start with the leaf", st.name, chains)
		}
	}
}

func TestCacheBounded(t *testing.T) {
	ca := newCA(t, "root")
	c, _, _ := countingCache(time.Minute)
	c.max = 3
	opts := x509.VerifyOptions{Roots: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	opts.Roots.AddCert(ca.cert)
	for i := range 10 {
		if _, err := c.Verify([]*x509.Certificate{ca.client(t, "u", nil, 2*time.Hour)}, opts); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if n := c.Len(); n > 3 {
			t.Fatalf("after %d clients the cache holds %d verifications, want at most 3", i+1, n)
		}
	}
}

// recorder is the fallback authenticator: it records its calls.
type recorder struct{ calls int }

func (r *recorder) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	r.calls++
	return nil, false, errors.New("fallback")
}

// switchableCA is a CA provider whose bundle the test replaces.
type switchableCA struct {
	dynamiccertificates.CAContentProvider
}

func (s *switchableCA) VerifyOptions() (x509.VerifyOptions, bool) {
	return s.CAContentProvider.VerifyOptions()
}

// frontProxy is the aggregator's request-header configuration (the
// kube-apiserver defaults) with proxyCA's certificates named
// front-proxy-client allowed.
func frontProxy(t *testing.T, proxyCA *issuer) *authenticatorfactory.RequestHeaderConfig {
	return &authenticatorfactory.RequestHeaderConfig{
		UsernameHeaders:     headerrequest.StaticStringSlice{"X-Remote-User"},
		UIDHeaders:          headerrequest.StaticStringSlice{"X-Remote-Uid"},
		GroupHeaders:        headerrequest.StaticStringSlice{"X-Remote-Group"},
		ExtraHeaderPrefixes: headerrequest.StaticStringSlice{"X-Remote-Extra-"},
		CAContentProvider:   staticCA(t, "front-proxy-ca", proxyCA),
		AllowedClientNames:  headerrequest.StaticStringSlice{"front-proxy-client"},
	}
}

func TestAuthenticator(t *testing.T) {
	clientCA, proxyCA, otherCA := newCA(t, "client-ca"), newCA(t, "front-proxy-ca"), newCA(t, "other-ca")
	clientCAProvider := &switchableCA{staticCA(t, "client-ca", clientCA)}
	rh := frontProxy(t, proxyCA)
	admin := clientCA.client(t, "admin", []string{"system:masters"}, 48*time.Hour)
	proxy := proxyCA.client(t, "front-proxy-client", nil, 48*time.Hour)
	otherProxy := proxyCA.client(t, "someone-else", nil, 48*time.Hour)
	stranger := otherCA.client(t, "mallory", []string{"system:masters"}, 48*time.Hour)
	// credential is the extra the library's common-name conversion adds.
	credential := func(c *x509.Certificate) map[string][]string {
		return map[string][]string{"authentication.kubernetes.io/credential-id": {fmt.Sprintf("X509SHA256=%x", sha256.Sum256(c.Raw))}}
	}
	type got struct {
		User          string
		Groups        []string
		Extra         map[string][]string
		Fallback      int
		Verifications int32
		HeadersLeft   []string
		Result        Result
	}
	cache, clk, verifications := countingCache(time.Minute)
	fallback := &recorder{}
	var results []Result
	a := NewAuthenticator(Config{RequestHeader: rh, ClientCA: clientCAProvider, Fallback: fallback, Cache: cache,
		Observe: func(r Result) { results = append(results, r) }})
	steps := []struct {
		name    string
		certs   []*x509.Certificate
		headers map[string]string
		before  func()
		want    got
	}{
		{name: "client certificate", certs: []*x509.Certificate{admin},
			// The front-proxy CA is tried first (a failed verification,
			// not kept), then the client CA.
			want: got{Result: Verified, User: "admin", Groups: []string{"system:authenticated", "system:masters"}, Extra: credential(admin), Verifications: 2}},
		{name: "same certificate again: no signature verified", certs: []*x509.Certificate{admin},
			want: got{Result: Cached, User: "admin", Groups: []string{"system:authenticated", "system:masters"}, Extra: credential(admin), Verifications: 1}},
		{name: "front proxy with user headers", certs: []*x509.Certificate{proxy},
			headers: map[string]string{"X-Remote-User": "jane", "X-Remote-Group": "dev", "X-Remote-Extra-Scopes": "a"},
			want:    got{Result: Verified, User: "jane", Groups: []string{"dev", "system:authenticated"}, Extra: map[string][]string{"scopes": {"a"}}, Verifications: 1}},
		{name: "front proxy again: kept", certs: []*x509.Certificate{proxy},
			headers: map[string]string{"X-Remote-User": "joe"},
			want:    got{Result: Cached, User: "joe", Groups: []string{"system:authenticated"}}},
		{name: "front proxy without user headers goes to the library", certs: []*x509.Certificate{proxy},
			want: got{Result: Library, Fallback: 1, Verifications: 1}},
		{name: "front-proxy CA but a name not allowed goes to the library", certs: []*x509.Certificate{otherProxy},
			headers: map[string]string{"X-Remote-User": "jane"},
			want:    got{Result: Library, Fallback: 1, Verifications: 2, HeadersLeft: []string{"X-Remote-User"}}},
		{name: "unknown CA goes to the library", certs: []*x509.Certificate{stranger},
			want: got{Result: Library, Fallback: 1, Verifications: 2}},
		{name: "no certificate goes to the library", want: got{Fallback: 1}},
		{name: "client CA bundle replaced: verified again, and refused", certs: []*x509.Certificate{admin},
			before: func() { clientCAProvider.CAContentProvider = staticCA(t, "client-ca", otherCA) },
			want:   got{Result: Library, Fallback: 1, Verifications: 2}},
		{name: "a certificate of the new CA", certs: []*x509.Certificate{stranger},
			want: got{Result: Verified, User: "mallory", Groups: []string{"system:authenticated", "system:masters"}, Extra: credential(stranger), Verifications: 2}},
		{name: "past the certificate's end goes to the library", certs: []*x509.Certificate{stranger},
			before: func() { clk.SetTime(t0.Add(48 * time.Hour)) },
			want:   got{Result: Library, Fallback: 1, Verifications: 2}},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		req, _ := http.NewRequest(http.MethodGet, "https://adapter/apis", nil)
		if st.certs != nil {
			req.TLS = &tls.ConnectionState{PeerCertificates: st.certs}
		}
		for k, v := range st.headers {
			req.Header.Set(k, v)
		}
		fallbacks, before := fallback.calls, verifications.Load()
		results = results[:0]
		resp, ok, err := a.AuthenticateRequest(req)
		g := got{Fallback: fallback.calls - fallbacks, Verifications: verifications.Load() - before}
		if len(results) > 1 {
			t.Errorf("%s: observed %v, want at most one result", st.name, results)
		}
		if len(results) == 1 {
			g.Result = results[0]
		}
		if ok && err == nil {
			g.User = resp.User.GetName()
			g.Groups = append([]string(nil), resp.User.GetGroups()...)
			sort.Strings(g.Groups)
			if ex := resp.User.GetExtra(); len(ex) > 0 {
				g.Extra = ex
			}
		}
		for k := range req.Header {
			g.HeadersLeft = append(g.HeadersLeft, k)
		}
		if diff := cmp.Diff(st.want, g); diff != "" {
			t.Errorf("%s (-want +got):\n%s", st.name, diff)
		}
	}
}

func TestClientCA(t *testing.T) {
	ca := func(name string) dynamiccertificates.CAContentProvider {
		return staticCA(t, name, newCA(t, name))
	}
	client, proxy, extra := ca("client"), ca("proxy"), ca("extra")
	union := dynamiccertificates.NewUnionCAContentProvider
	tests := []struct {
		name           string
		serving, proxy dynamiccertificates.CAContentProvider
		want           dynamiccertificates.CAContentProvider
		ok             bool
	}{
		{name: "client CA and front-proxy CA (the library's union)", serving: union(client, proxy), proxy: proxy, want: client, ok: true},
		{name: "client CA only", serving: client, want: client, ok: true},
		{name: "front-proxy CA only", serving: proxy, proxy: proxy, want: nil, ok: true},
		{name: "no CA", serving: nil, want: nil, ok: true},
		{name: "two CAs besides the front proxy's", serving: union(client, extra, proxy), proxy: proxy, ok: false},
		{name: "nested unions", serving: union(union(client, extra), proxy), proxy: proxy, ok: false},
		{name: "a front-proxy CA that is not among them", serving: union(client, extra), proxy: proxy, ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ClientCA(tt.serving, tt.proxy)
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("ClientCA = %v, %v; want %v, %v", name(got), ok, name(tt.want), tt.ok)
			}
		})
	}
}

func name(p dynamiccertificates.CAContentProvider) string {
	if p == nil {
		return "<nil>"
	}
	return p.Name()
}

// TestAuthenticatorMatchesLibrary: for every certificate and header
// combination, twice (the second time from the cache), the fast path in
// front of the library's delegating authenticator answers exactly what the
// library's authenticator alone answers.
func TestAuthenticatorMatchesLibrary(t *testing.T) {
	now := time.Now()
	clientCA, proxyCA, otherCA := newCAAt(t, "client-ca", now), newCAAt(t, "front-proxy-ca", now), newCAAt(t, "other-ca", now)
	rh := frontProxy(t, proxyCA)
	clientCAProvider := staticCA(t, "client-ca", clientCA)
	library, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          &apiserver.AnonymousAuthConfig{Enabled: true},
		ClientCertificateCAContentProvider: clientCAProvider,
		RequestHeaderConfig:                rh,
	}.New()
	if err != nil {
		t.Fatal(err)
	}
	// The real clock: the library's verification uses it.
	ours := NewAuthenticator(Config{RequestHeader: rh, ClientCA: clientCAProvider, Fallback: library, Cache: NewCache(clock.RealClock{}, time.Minute)})

	issue := func(ca *issuer, cn string, orgs ...string) []*x509.Certificate {
		return []*x509.Certificate{newCert(t, &x509.Certificate{
			Subject: pkix.Name{CommonName: cn, Organization: orgs}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		}, ca).cert}
	}
	expired := []*x509.Certificate{newCert(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "old"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(-time.Minute),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, clientCA).cert}
	certs := map[string][]*x509.Certificate{
		"none":               nil,
		"client":             issue(clientCA, "admin", "system:masters"),
		"client, no groups":  issue(clientCA, "bob"),
		"front proxy":        issue(proxyCA, "front-proxy-client"),
		"front proxy, other": issue(proxyCA, "intruder"),
		"unknown CA":         issue(otherCA, "mallory", "system:masters"),
		"expired client":     expired,
	}
	headerSets := map[string]map[string]string{
		"no headers": nil,
		"user":       {"X-Remote-User": "jane", "X-Remote-Group": "dev", "X-Remote-Extra-Scopes": "a", "X-Remote-Uid": "42"},
		"group only": {"X-Remote-Group": "dev"},
	}
	type outcome struct {
		OK     bool
		Err    bool
		User   string
		UID    string
		Groups []string
		Extra  map[string][]string
		Header http.Header
	}
	run := func(a authenticator.Request, c []*x509.Certificate, h map[string]string) outcome {
		req, _ := http.NewRequest(http.MethodGet, "https://adapter/apis", nil)
		if c != nil {
			req.TLS = &tls.ConnectionState{PeerCertificates: c}
		}
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, ok, err := a.AuthenticateRequest(req)
		o := outcome{OK: ok, Err: err != nil, Header: req.Header}
		if ok {
			o.User, o.UID, o.Groups, o.Extra = resp.User.GetName(), resp.User.GetUID(), resp.User.GetGroups(), resp.User.GetExtra()
		}
		return o
	}
	for cn, c := range certs {
		for hn, h := range headerSets {
			want := run(library, c, h)
			for round := range 2 {
				if diff := cmp.Diff(want, run(ours, c, h)); diff != "" {
					t.Errorf("%s certificate, %s, round %d: differs from the library (-library +ours):\n%s", cn, hn, round+1, diff)
				}
			}
		}
	}
}

func TestUsagesOf(t *testing.T) {
	client, server, anyUsage := x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageAny
	tests := []struct {
		name string
		a, b []x509.ExtKeyUsage
		same bool
	}{
		{name: "order does not matter", a: []x509.ExtKeyUsage{client, server}, b: []x509.ExtKeyUsage{server, client}, same: true},
		{name: "repeats do not matter", a: []x509.ExtKeyUsage{client, client}, b: []x509.ExtKeyUsage{client}, same: true},
		{name: "nil and empty", a: nil, b: []x509.ExtKeyUsage{}, same: true},
		{name: "other usages differ", a: []x509.ExtKeyUsage{client}, b: []x509.ExtKeyUsage{server}},
		{name: "a subset differs", a: []x509.ExtKeyUsage{client}, b: []x509.ExtKeyUsage{client, server}},
		{name: "any is a usage of its own", a: []x509.ExtKeyUsage{anyUsage}, b: nil},
		{name: "values beyond the bits differ", a: []x509.ExtKeyUsage{client, 64}, b: []x509.ExtKeyUsage{client, 65}},
		{name: "values beyond the bits from bits", a: []x509.ExtKeyUsage{client, 64}, b: []x509.ExtKeyUsage{client}},
		{name: "negative values", a: []x509.ExtKeyUsage{-1}, b: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := usagesOf(tt.a) == usagesOf(tt.b); got != tt.same {
				t.Errorf("usagesOf(%v) == usagesOf(%v): %v, want %v", tt.a, tt.b, got, tt.same)
			}
		})
	}
}
