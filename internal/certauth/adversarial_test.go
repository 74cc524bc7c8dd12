package certauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// issuedWithKey is newCert with a given key: the same key under several
// certificates (a re-issued or cross-signed CA).
func issuedWithKey(t *testing.T, tmpl *x509.Certificate, key *ecdsa.PrivateKey, parent *issuer) *issuer {
	t.Helper()
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	signer, parentCert := key, tmpl
	if parent != nil {
		signer, parentCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &issuer{cert: c, key: key}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func caTemplate(name string, notAfter time.Time) *x509.Certificate {
	return &x509.Certificate{
		Subject: pkix.Name{CommonName: name}, NotBefore: t0.Add(-time.Hour), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
}

// fileCA is the library's client CA provider over a bundle file, as the
// adapter's --client-ca-file builds it; write replaces the bundle and
// reloads it (what the provider's file watch does).
type fileCA struct {
	t    *testing.T
	path string
	*dynamiccertificates.DynamicFileCAContent
}

func newFileCA(t *testing.T, cas ...*issuer) *fileCA {
	t.Helper()
	f := &fileCA{t: t, path: filepath.Join(t.TempDir(), "client-ca.crt")}
	f.write(cas...)
	p, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", f.path)
	if err != nil {
		t.Fatal(err)
	}
	f.DynamicFileCAContent = p
	return f
}

func (f *fileCA) write(cas ...*issuer) {
	f.t.Helper()
	var bundle []byte
	for _, ca := range cas {
		bundle = append(bundle, ca.pem()...)
	}
	if err := os.WriteFile(f.path, bundle, 0o600); err != nil {
		f.t.Fatal(err)
	}
	if f.DynamicFileCAContent != nil {
		if err := f.RunOnce(context.Background()); err != nil {
			f.t.Fatal(err)
		}
	}
}

// adversary authenticates requests presenting chains through the fast
// path and a client CA, with a fallback that refuses.
type adversary struct {
	t     *testing.T
	authn func(certs ...*x509.Certificate) (user string, how Result)
	clock interface{ SetTime(time.Time) }
}

func newAdversary(t *testing.T, ca dynamiccertificates.CAContentProvider, ttl time.Duration) *adversary {
	cache, clk, _ := countingCache(ttl)
	var how Result
	a := NewAuthenticator(Config{ClientCA: ca, Fallback: &recorder{}, Cache: cache, Observe: func(r Result) { how = r }})
	return &adversary{t: t, clock: clk, authn: func(certs ...*x509.Certificate) (string, Result) {
		req, _ := http.NewRequest(http.MethodGet, "https://adapter/apis", nil)
		req.TLS = &tls.ConnectionState{PeerCertificates: certs}
		how = ""
		resp, ok, err := a.AuthenticateRequest(req)
		if !ok || err != nil {
			return "", how
		}
		return resp.User.GetName(), how
	}}
}

type attempt struct {
	name  string
	at    time.Duration // after t0
	certs []*x509.Certificate
	setup func()
	user  string // "" refused
	how   Result
}

func (adv *adversary) run(steps []attempt) {
	for _, st := range steps {
		if st.setup != nil {
			st.setup()
		}
		adv.clock.SetTime(t0.Add(st.at))
		user, how := adv.authn(st.certs...)
		if user != st.user || how != st.how {
			adv.t.Errorf("%s: user %q (%s), want %q (%s)", st.name, user, how, st.user, st.how)
		}
	}
}

// TestCacheAdversarialExpiryInsideTTL: a client certificate whose end falls
// inside the cache's TTL is refused from its end on, though its
// verification is younger than the TTL; likewise for the root.
func TestCacheAdversarialExpiryInsideTTL(t *testing.T) {
	root := newCA(t, "root")
	shortRoot := issuedWithKey(t, caTemplate("short-root", t0.Add(45*time.Second)), newKey(t), nil)
	leaf := root.client(t, "alice", nil, time.Hour+30*time.Second) // ends t0+30s
	viaShortRoot := shortRoot.client(t, "bob", nil, 48*time.Hour)
	adv := newAdversary(t, newFileCA(t, root, shortRoot), time.Minute)
	adv.run([]attempt{
		{name: "verified", certs: []*x509.Certificate{leaf}, user: "alice", how: Verified},
		{name: "kept before its end", at: 29 * time.Second, certs: []*x509.Certificate{leaf}, user: "alice", how: Cached},
		{name: "refused after its end, within the TTL", at: 31 * time.Second, certs: []*x509.Certificate{leaf}, how: Library},
		{name: "a leaf of a root that ends soon", certs: []*x509.Certificate{viaShortRoot}, user: "bob", how: Verified},
		{name: "kept before the root's end", at: 44 * time.Second, certs: []*x509.Certificate{viaShortRoot}, user: "bob", how: Cached},
		{name: "refused after the root's end, within the TTL", at: 46 * time.Second, certs: []*x509.Certificate{viaShortRoot}, how: Library},
	})
}

// TestCacheAdversarialCARemoved: a CA removed from the client CA bundle
// (rotation, through the library's file provider) is not trusted from the
// reload on, though its certificates verified within the TTL; a CA replaced
// by one of the same name and another key likewise.
func TestCacheAdversarialCARemoved(t *testing.T) {
	oldCA, newCA := newCA(t, "old-ca"), newCA(t, "new-ca")
	impostorKey := newKey(t)
	impostor := issuedWithKey(t, caTemplate("old-ca", t0.Add(24*time.Hour)), impostorKey, nil) // old-ca's name, another key
	alice := oldCA.client(t, "alice", []string{"system:masters"}, 48*time.Hour)
	bob := newCA.client(t, "bob", nil, 48*time.Hour)
	bundle := newFileCA(t, oldCA, newCA)
	adv := newAdversary(t, bundle, time.Minute)
	adv.run([]attempt{
		{name: "old CA's client", certs: []*x509.Certificate{alice}, user: "alice", how: Verified},
		{name: "kept", at: time.Second, certs: []*x509.Certificate{alice}, user: "alice", how: Cached},
		{name: "new CA's client", at: time.Second, certs: []*x509.Certificate{bob}, user: "bob", how: Verified},
		{name: "old CA removed: its client is refused within the TTL", at: 2 * time.Second, certs: []*x509.Certificate{alice},
			setup: func() { bundle.write(newCA) }, how: Library},
		{name: "the new CA's client verifies again", at: 3 * time.Second, certs: []*x509.Certificate{bob}, user: "bob", how: Verified},
		{name: "old CA back", at: 4 * time.Second, certs: []*x509.Certificate{alice},
			setup: func() { bundle.write(oldCA, newCA) }, user: "alice", how: Verified},
		{name: "replaced by a CA of the same name and another key: refused", at: 5 * time.Second, certs: []*x509.Certificate{alice},
			setup: func() { bundle.write(impostor, newCA) }, how: Library},
	})
}

// TestCacheAdversarialSameLeafOtherIssuer: the same leaf presented with
// another intermediate (same name and key, signed by an untrusted root) or
// without its intermediate is verified on its own, never taken from the
// verification of the chain that was trusted; likewise a leaf re-signed by a
// root of the same name.
func TestCacheAdversarialSameLeafOtherIssuer(t *testing.T) {
	trusted, untrusted := newCA(t, "root"), newCA(t, "evil-root")
	interKey := newKey(t)
	interTemplate := func() *x509.Certificate { return caTemplate("intermediate", t0.Add(12*time.Hour)) }
	inter := issuedWithKey(t, interTemplate(), interKey, trusted)
	crossInter := issuedWithKey(t, interTemplate(), interKey, untrusted) // same name and key
	leaf := inter.client(t, "alice", []string{"system:masters"}, 48*time.Hour)
	// A root of the trusted root's name and key that is expired: the same
	// leaf's chain through it must not verify.
	expiredTwin := issuedWithKey(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: "root"}, NotBefore: t0.Add(-48 * time.Hour), NotAfter: t0.Add(-time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, trusted.key, nil)
	direct := trusted.client(t, "bob", nil, 48*time.Hour)
	bundle := newFileCA(t, trusted)
	adv := newAdversary(t, bundle, time.Minute)
	adv.run([]attempt{
		{name: "leaf and its intermediate", certs: []*x509.Certificate{leaf, inter.cert}, user: "alice", how: Verified},
		{name: "kept", at: time.Second, certs: []*x509.Certificate{leaf, inter.cert}, user: "alice", how: Cached},
		{name: "same leaf, cross-signed intermediate of an untrusted root", at: 2 * time.Second, certs: []*x509.Certificate{leaf, crossInter.cert}, how: Library},
		{name: "same leaf without its intermediate", at: 3 * time.Second, certs: []*x509.Certificate{leaf}, how: Library},
		{name: "same leaf, both intermediates (the trusted one verifies)", at: 4 * time.Second, certs: []*x509.Certificate{leaf, crossInter.cert, inter.cert}, user: "alice", how: Verified},
		{name: "untrusted root's intermediate trusted now", at: 5 * time.Second, certs: []*x509.Certificate{leaf, crossInter.cert},
			setup: func() { bundle.write(untrusted) }, user: "alice", how: Verified},
		{name: "the first chain is no longer trusted", at: 6 * time.Second, certs: []*x509.Certificate{leaf, inter.cert}, how: Library},
		{name: "a leaf of the root", at: 7 * time.Second, certs: []*x509.Certificate{direct},
			setup: func() { bundle.write(trusted) }, user: "bob", how: Verified},
		{name: "same leaf, the root's expired twin in the bundle instead", at: 8 * time.Second, certs: []*x509.Certificate{direct},
			setup: func() { bundle.write(expiredTwin) }, how: Library},
	})
}
