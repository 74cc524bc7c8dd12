package framework

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPKIChains(t *testing.T) {
	p, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		kp     *KeyPair
		ca     *CA
		usage  x509.ExtKeyUsage
		cn     string
		orgs   []string
		dnsSAN string
	}{
		{name: "apiserver serving", kp: p.APIServerServing, ca: p.ClusterCA, usage: x509.ExtKeyUsageServerAuth, cn: "kube-apiserver", dnsSAN: "kubernetes.default.svc"},
		{name: "admin client", kp: p.Admin, ca: p.ClusterCA, usage: x509.ExtKeyUsageClientAuth, cn: "kubernetes-admin", orgs: []string{"system:masters"}},
		{name: "front-proxy client", kp: p.FrontProxyClient, ca: p.FrontProxyCA, usage: x509.ExtKeyUsageClientAuth, cn: "front-proxy-client"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pair, err := tls.LoadX509KeyPair(tc.kp.CertFile, tc.kp.KeyFile)
			if err != nil {
				t.Fatalf("loading the pair from disk: %v", err)
			}
			cert, err := x509.ParseCertificate(pair.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AddCert(tc.ca.Cert)
			opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}}
			if tc.dnsSAN != "" {
				opts.DNSName = tc.dnsSAN
			}
			if _, err := cert.Verify(opts); err != nil {
				t.Errorf("verify: %v", err)
			}
			if cert.Subject.CommonName != tc.cn || !cmp.Equal(cert.Subject.Organization, tc.orgs, cmpopts.EquateEmpty()) {
				t.Errorf("subject = %v, want CN=%s O=%v", cert.Subject, tc.cn, tc.orgs)
			}
		})
	}
	// The front-proxy client must not be trusted by the cluster CA.
	roots := x509.NewCertPool()
	roots.AddCert(p.ClusterCA.Cert)
	block, _ := pem.Decode(p.FrontProxyClient.CertPEM)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("front-proxy client verifies against the cluster CA")
	}
	if _, err := os.Stat(p.ServiceAccountPubFile); err != nil {
		t.Error(err)
	}
	ips := p.APIServerServing
	block, _ = pem.Decode(ips.CertPEM)
	sc, _ := x509.ParseCertificate(block.Bytes)
	if err := sc.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("serving cert lacks 127.0.0.1: %v", err)
	}
}

func TestWriteServingSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if err := WriteServingSet(dir, "svc.ns.svc"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if err := WriteServingSet(dir); err == nil {
		t.Error("WriteServingSet without a DNS name: no error")
	}
}

func TestParseProcIP(t *testing.T) {
	tests := []struct {
		name, hex string
		want      net.IP
		wantErr   bool
	}{
		{name: "loopback v4", hex: "0100007F", want: net.IPv4(127, 0, 0, 1).To4()},
		{name: "any v4", hex: "00000000", want: net.IPv4zero.To4()},
		{name: "loopback v6", hex: "00000000000000000000000001000000", want: net.IPv6loopback},
		{name: "bad hex", hex: "zz", wantErr: true},
		{name: "bad length", hex: "0100", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcIP(tc.hex)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && !got.Equal(tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFreePortUnique(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

func TestSanitize(t *testing.T) {
	if got, want := sanitize("system:serviceaccount:ns:sa"), "system_serviceaccount_ns_sa"; got != want {
		t.Errorf("sanitize = %q, want %q", got, want)
	}
}
