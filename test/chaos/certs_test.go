//go:build e2e && chaos

package chaos

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// rotation is the adapter's serving certificate and client CA bundle as
// files it watches (--tls-cert-file, --tls-private-key-file,
// --client-ca-file), so the suite can rotate them under load.
type rotation struct {
	dir               string
	certFile, keyFile string
	clientCAFile      string
	clusterCAPEM      []byte
	newCA             *framework.CA
	newAdmin          *framework.KeyPair
}

// prepareRotation writes the first serving certificate (its own CA) and a
// client CA bundle holding the cluster CA, and returns the adapter flags.
func (s *stack) prepareRotation(t *testing.T) []string {
	t.Helper()
	r := &rotation{dir: filepath.Join(t.TempDir(), "rotation"), clusterCAPEM: s.env.PKI.ClusterCA.CertPEM}
	first := filepath.Join(r.dir, "first")
	if err := framework.WriteServingSet(first, "localhost"); err != nil {
		t.Fatal(err)
	}
	r.certFile, r.keyFile, r.clientCAFile = filepath.Join(r.dir, "tls.crt"), filepath.Join(r.dir, "tls.key"), filepath.Join(r.dir, "client-ca.crt")
	copyFile(t, filepath.Join(first, "tls.crt"), r.certFile)
	copyFile(t, filepath.Join(first, "tls.key"), r.keyFile)
	writeFile(t, r.clientCAFile, string(r.clusterCAPEM))
	s.rotation = r
	return []string{"--tls-cert-file=" + r.certFile, "--tls-private-key-file=" + r.keyFile, "--client-ca-file=" + r.clientCAFile}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, string(data))
}

// servedCert is the leaf certificate the adapter presents now.
func servedCert(addr string) ([]byte, error) {
	conn, err := tls.DialWithDialer(&netDialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // we only read the certificate
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

// rotateServing replaces the serving certificate and key and waits until
// the adapter presents the new one; it returns how long that took.
func (s *stack) rotateServing(t *testing.T) (time.Duration, error) {
	t.Helper()
	r := s.rotation
	next := filepath.Join(r.dir, fmt.Sprintf("next-%d", time.Now().UnixNano()))
	if err := framework.WriteServingSet(next, "localhost"); err != nil {
		return 0, err
	}
	want := pemDER(t, filepath.Join(next, "tls.crt"))
	t0 := time.Now()
	copyFile(t, filepath.Join(next, "tls.key"), r.keyFile)
	copyFile(t, filepath.Join(next, "tls.crt"), r.certFile)
	addr := fmt.Sprintf("127.0.0.1:%d", s.adapter.Port)
	for time.Since(t0) < 2*time.Minute {
		if got, err := servedCert(addr); err == nil && bytes.Equal(got, want) {
			return time.Since(t0), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("the adapter does not serve the rotated certificate 2 minutes after the files changed")
}

// rotateClientCA adds a new CA to the client CA bundle, waits until a
// client of the new CA is served, then removes the old (cluster) CA and
// waits until its clients are refused. The suite's own direct client
// moves to the new CA.
func (s *stack) rotateClientCA(t *testing.T, ctx context.Context) (accepted, refused time.Duration, err error) {
	t.Helper()
	r := s.rotation
	if r.newCA, err = framework.NewCA(r.dir, "client-ca-2"); err != nil {
		return 0, 0, err
	}
	if r.newAdmin, err = r.newCA.IssueClient(r.dir, "admin-2", "chaos-admin-2", "system:masters"); err != nil {
		return 0, 0, err
	}
	newClient, err := adminClient(r.newAdmin)
	if err != nil {
		return 0, 0, err
	}
	oldClient := s.direct
	url := s.adapter.URL + kindCustom.path()
	status := func(hc *http.Client) int {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		hc.CloseIdleConnections()
		_, code, _ := framework.Get(ctx, hc, url)
		return code
	}
	t0 := time.Now()
	writeFile(t, r.clientCAFile, string(r.clusterCAPEM)+string(r.newCA.CertPEM))
	for status(newClient) != http.StatusOK {
		if time.Since(t0) > 2*time.Minute {
			return 0, 0, fmt.Errorf("a client of the added CA is not served 2 minutes after the bundle changed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	accepted = time.Since(t0)
	t1 := time.Now()
	writeFile(t, r.clientCAFile, string(r.newCA.CertPEM))
	// No longer authenticated: 401, or 403 as the anonymous user the
	// request falls back to.
	for code := status(oldClient); code != http.StatusUnauthorized && code != http.StatusForbidden; code = status(oldClient) {
		if time.Since(t1) > 2*time.Minute {
			return accepted, 0, fmt.Errorf("a client of the removed CA is still served 2 minutes after the bundle changed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	refused = time.Since(t1)
	s.direct = newClient
	return accepted, refused, nil
}

var netDialer = net.Dialer{Timeout: 5 * time.Second}

// pemDER is the DER of the first certificate in a PEM file.
func pemDER(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	return b.Bytes
}

// rotationAdmin is the admin key pair the adapter accepts now (the
// cluster's until the client CA rotation, then the new CA's).
func (s *stack) rotationAdmin() *framework.KeyPair {
	if s.rotation != nil && s.rotation.newAdmin != nil {
		return s.rotation.newAdmin
	}
	return s.env.PKI.Admin
}
