package promclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/promtest"
)

// testCA signs client certificates for the mTLS test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a client certificate for cn and its key to certFile/keyFile.
func (ca *testCA) issue(t *testing.T, cn, certFile, keyFile string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
}

func TestMutualTLSAndClientCertRotation(t *testing.T) {
	ca := newTestCA(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)

	var mu sync.Mutex
	var seen []string
	srv := promtest.NewUnstarted(nil)
	srv.Handle(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.TLS.PeerCertificates[0].Subject.CommonName)
		mu.Unlock()
		io.WriteString(w, vectorBody)
	})
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.Config.SetKeepAlivesEnabled(false) // a handshake per request
	srv.StartTLS()
	defer srv.Close()

	dir := t.TempDir()
	caFile := writeFile(t, filepath.Join(dir, "ca.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.issue(t, "client-1", certFile, keyFile, 2)

	c := optionsClient(t, srv.URL, nil, func(o *Options) {
		o.CAFile = caFile
		o.ClientCertFile, o.ClientKeyFile = certFile, keyFile
	})
	query := func() error {
		_, err := c.QuerySamples(context.Background(), "up", time.Time{})
		return err
	}

	if err := query(); err != nil {
		t.Fatalf("Query: %v", err)
	}
	// A rotated pair is presented from the next request on.
	ca.issue(t, "client-2", certFile, keyFile, 3)
	if err := query(); err != nil {
		t.Fatalf("Query after rotation: %v", err)
	}
	// A broken key fails the request rather than presenting nothing.
	writeFile(t, keyFile, "garbage")
	if err := query(); err == nil {
		t.Error("Query with a broken key file succeeded")
	}

	mu.Lock()
	defer mu.Unlock()
	want := []string{"client-1", "client-2"}
	if len(seen) != len(want) {
		t.Fatalf("server saw %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("request %d presented %q, want %q", i, seen[i], want[i])
		}
	}
}
