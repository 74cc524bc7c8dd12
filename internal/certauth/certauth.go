// Package certauth spares the API server the client certificate's signature
// verification on every request of a connection.
//
// The generic API server verifies the client certificate chain of every
// request, not once per TLS connection (kubernetes/kubernetes#90533): for
// the adapter's small answers that was 17-18 % of its CPU, an ECDSA
// verification each time, though a client (the aggregator, an HPA
// controller) sends all its requests over a few long-lived connections.
//
// Authenticator puts a fast path in front of the library's authenticator:
// a request whose certificate chain verified against the same CA pool
// within the cache's time-to-live, and is still inside every certificate's
// validity period, is authenticated as the library would (front-proxy
// headers for the request-header CA's allowed names, the certificate's
// common name and organisations for the client CA) without verifying the
// signatures again. Anything else - no certificate, a chain not verified
// yet or failing, a front-proxy certificate without user headers, bearer
// tokens - goes to the library's authenticator unchanged, which decides.
package certauth

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/utils/clock"
)

// DefaultTTL is how long a verified chain is trusted without verifying it
// again.
const DefaultTTL = time.Minute

// maxEntries bounds the cache: distinct chains (clients) per CA pool.
const maxEntries = 4096

// Cache remembers certificate chains that verified, per CA pool. It is
// safe for concurrent use.
type Cache struct {
	clock clock.PassiveClock
	ttl   time.Duration
	max   int
	// verify is (*x509.Certificate).Verify; tests count its calls.
	verify func(*x509.Certificate, x509.VerifyOptions) ([][]*x509.Certificate, error)

	mu      sync.Mutex
	entries map[cacheKey]*entry
}

// cacheKey is a presented chain (the leaf and the intermediates, by
// content), the pool it verified against (a CA provider builds a new pool
// when its CA bundle changes, so a reload never reuses a verification) and
// the key usages asked.
type cacheKey struct {
	chain  [sha256.Size]byte
	roots  *x509.CertPool
	usages usageSet
}

// usageSet is a set of extended key usages: a bit per usage the x509 package
// defines, and the printed list for any other value (verification treats the
// usages asked as a set: any of them will do).
type usageSet struct {
	bits  uint64
	other string
}

func usagesOf(usages []x509.ExtKeyUsage) usageSet {
	var s usageSet
	for _, u := range usages {
		if u < 0 || u >= 64 {
			return usageSet{other: fmt.Sprint(usages)}
		}
		s.bits |= 1 << u
	}
	return s
}

type entry struct {
	chains  [][]*x509.Certificate
	expires time.Time // the verification's age limit
	// notBefore and notAfter: the intersection of the validity periods of
	// every certificate of every verified chain, roots included.
	notBefore, notAfter time.Time
}

// NewCache returns a cache keeping verifications for ttl.
func NewCache(clk clock.PassiveClock, ttl time.Duration) *Cache {
	return &Cache{clock: clk, ttl: ttl, max: maxEntries, verify: (*x509.Certificate).Verify, entries: make(map[cacheKey]*entry)}
}

// Verify verifies the presented certificates (leaf first, then
// intermediates) as the library's x509 authenticators do, with opts'
// roots and key usages, and returns the verified chains. A chain that
// verified within the TTL, against the same pool, is not verified again
// while now is within every certificate's validity period. Failures are
// not remembered.
func (c *Cache) Verify(certs []*x509.Certificate, opts x509.VerifyOptions) ([][]*x509.Certificate, error) {
	chains, _, err := c.verifyKept(certs, opts)
	return chains, err
}

// verifyKept is Verify also saying whether the chains were kept ones.
func (c *Cache) verifyKept(certs []*x509.Certificate, opts x509.VerifyOptions) (chains [][]*x509.Certificate, kept bool, err error) {
	now := c.clock.Now()
	if len(certs) == 0 {
		return nil, false, errors.New("no certificate")
	}
	key := cacheKey{chain: chainDigest(certs), roots: opts.Roots, usages: usagesOf(opts.KeyUsages)}
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(e.expires) && !now.Before(e.notBefore) && !now.After(e.notAfter) {
		return e.chains, true, nil
	}
	if opts.Intermediates == nil && len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, inter := range certs[1:] {
			opts.Intermediates.AddCert(inter)
		}
	}
	opts.CurrentTime = now
	chains, err = c.verify(certs[0], opts)
	if err != nil {
		return nil, false, err
	}
	e = &entry{chains: chains, expires: now.Add(c.ttl)}
	for i, chain := range chains {
		for j, cert := range chain {
			if (i == 0 && j == 0) || cert.NotBefore.After(e.notBefore) {
				e.notBefore = cert.NotBefore
			}
			if (i == 0 && j == 0) || cert.NotAfter.Before(e.notAfter) {
				e.notAfter = cert.NotAfter
			}
		}
	}
	c.mu.Lock()
	if len(c.entries) >= c.max {
		for k, old := range c.entries {
			if !now.Before(old.expires) || now.After(old.notAfter) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.max {
			clear(c.entries)
		}
	}
	c.entries[key] = e
	c.mu.Unlock()
	return chains, false, nil
}

// Len returns how many verifications are kept.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// chainDigest identifies the presented certificates by their DER bytes.
func chainDigest(certs []*x509.Certificate) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, c := range certs {
		binary.BigEndian.PutUint64(n[:], uint64(len(c.Raw)))
		h.Write(n[:])
		h.Write(c.Raw)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// Config is what the fast path authenticates with: the same sources the
// library's delegating authenticator was built from.
type Config struct {
	// RequestHeader is the front-proxy configuration (nil: none).
	RequestHeader *authenticatorfactory.RequestHeaderConfig
	// ClientCA verifies client certificates whose common name is the user
	// (nil: none).
	ClientCA dynamiccertificates.CAContentProvider
	// Fallback is the library's authenticator: it answers every request
	// the fast path does not.
	Fallback authenticator.Request
	Cache    *Cache
	// Observe, if set, is told how each request presenting a client
	// certificate was authenticated.
	Observe func(Result)
}

// Result is how a request presenting a client certificate was
// authenticated.
type Result string

const (
	// Cached: by the fast path, with a chain verified earlier.
	Cached Result = "cached"
	// Verified: by the fast path, after verifying the chain.
	Verified Result = "verified"
	// Library: by the library's authenticator (whatever it answered).
	Library Result = "library"
)

// NewAuthenticator returns cfg.Fallback with the fast path in front.
func NewAuthenticator(cfg Config) authenticator.Request {
	f := &fastPath{cfg: cfg}
	if rh := cfg.RequestHeader; rh != nil {
		f.headers = headerrequest.NewDynamic(rh.UsernameHeaders, rh.UIDHeaders, rh.GroupHeaders, rh.ExtraHeaderPrefixes)
	}
	observe := cfg.Observe
	if observe == nil {
		observe = func(Result) {}
	}
	return &withFallback{fast: f, fallback: cfg.Fallback, observe: observe}
}

type withFallback struct {
	fast     *fastPath
	fallback authenticator.Request
	observe  func(Result)
}

func (a *withFallback) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return a.fallback.AuthenticateRequest(req)
	}
	resp, kept, ok := a.fast.authenticate(req)
	if !ok {
		a.observe(Library)
		return a.fallback.AuthenticateRequest(req)
	}
	if kept {
		a.observe(Cached)
	} else {
		a.observe(Verified)
	}
	// As the library's delegating authenticator does to its union's answer.
	return group.NewAuthenticatedGroupAdder(answer{resp}).AuthenticateRequest(req)
}

// answer is an authenticator giving one response.
type answer struct{ resp *authenticator.Response }

func (a answer) AuthenticateRequest(*http.Request) (*authenticator.Response, bool, error) {
	return a.resp, true, nil
}

// fastPath is the library's front-proxy verifier and x509 authenticator,
// in the library's order, with verifications from the cache. It answers
// only successes (ok), and whether the chain it took was a kept one; the
// rest goes to the fallback.
type fastPath struct {
	cfg     Config
	headers authenticator.Request
}

func (f *fastPath) authenticate(req *http.Request) (resp *authenticator.Response, kept, ok bool) {
	certs := req.TLS.PeerCertificates
	if rh := f.cfg.RequestHeader; rh != nil && rh.CAContentProvider != nil {
		if opts, ok := rh.CAContentProvider.VerifyOptions(); ok {
			if _, kept, err := f.cfg.Cache.verifyKept(certs, opts); err == nil && allowedName(certs[0].Subject.CommonName, rh.AllowedClientNames) {
				if resp, ok, err := f.headers.AuthenticateRequest(req); err == nil && ok {
					return resp, kept, true
				}
			}
		}
	}
	if f.cfg.ClientCA != nil {
		if opts, ok := f.cfg.ClientCA.VerifyOptions(); ok {
			chains, kept, err := f.cfg.Cache.verifyKept(certs, opts)
			if err != nil {
				return nil, false, false
			}
			for _, chain := range chains {
				if resp, ok, err := x509request.CommonNameUserConversion.User(chain); err == nil && ok {
					return resp, kept, true
				}
			}
		}
	}
	return nil, false, false
}

// allowedName is the library's front-proxy name check: any name when the
// list is empty.
func allowedName(cn string, names headerrequest.StringSliceProvider) bool {
	if names == nil {
		return true
	}
	allowed := names.Value()
	return len(allowed) == 0 || slices.Contains(allowed, cn)
}

// ClientCA returns the client CA provider among the serving's CA providers
// (the API server's SecureServingInfo.ClientCA: the client CA, the
// front-proxy CA, or the library's union of both, in that order), the
// front-proxy's being requestHeader. ok is false when they are not laid
// out that way (then the fast path must not be used): a misread provider
// would authenticate front-proxy certificates as users.
func ClientCA(serving, requestHeader dynamiccertificates.CAContentProvider) (clientCA dynamiccertificates.CAContentProvider, ok bool) {
	if serving == nil {
		return nil, true
	}
	members := []dynamiccertificates.CAContentProvider{serving}
	if v := reflect.ValueOf(serving); v.Kind() == reflect.Slice {
		members = members[:0]
		for i := range v.Len() {
			p, isProvider := v.Index(i).Interface().(dynamiccertificates.CAContentProvider)
			if !isProvider || p == nil || reflect.ValueOf(p).Kind() == reflect.Slice {
				return nil, false
			}
			members = append(members, p)
		}
	}
	for _, p := range members {
		if !reflect.TypeOf(p).Comparable() {
			return nil, false
		}
		if requestHeader != nil && p == requestHeader {
			continue
		}
		if clientCA != nil {
			return nil, false
		}
		clientCA = p
	}
	return clientCA, true
}
