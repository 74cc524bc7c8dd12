package framework

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority whose key the harness keeps, so tests can
// issue more client certificates (users, groups) at any time.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	// CertFile is the CA certificate on disk.
	CertFile string
}

// KeyPair is a certificate with its private key, in PEM and on disk.
type KeyPair struct {
	CertPEM, KeyPEM   []byte
	CertFile, KeyFile string
}

// PKI is every credential the control plane needs: the cluster CA (serving
// and client certificates), the front-proxy CA of the aggregation layer, and
// the service-account signing key pair.
type PKI struct {
	Dir              string
	ClusterCA        *CA
	FrontProxyCA     *CA
	APIServerServing *KeyPair
	FrontProxyClient *KeyPair
	Admin            *KeyPair
	// ServiceAccountKeyFile and ServiceAccountPubFile hold the token signing pair.
	ServiceAccountKeyFile, ServiceAccountPubFile string
}

// certValidity is long enough for any test run and a long `make up` session.
const certValidity = 7 * 24 * time.Hour

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating ECDSA key: %w", err)
	}
	return k, nil
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return n, nil
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func writeFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// newCA creates a self-signed CA and writes <dir>/<name>.crt.
func newCA(dir, name string) (*CA, error) {
	key, der, err := newCert(&x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("creating CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA %s: %w", name, err)
	}
	ca := &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		CertFile: filepath.Join(dir, name+".crt")}
	if err := writeFile(ca.CertFile, ca.CertPEM); err != nil {
		return nil, err
	}
	return ca, nil
}

// newCert generates a key and a certificate for it from tmpl (its serial
// number and validity set here), signed by ca or, when ca is nil, by the
// key itself.
func newCert(tmpl *x509.Certificate, ca *CA) (*ecdsa.PrivateKey, []byte, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(certValidity)
	parent, signer := tmpl, crypto.Signer(key)
	if ca != nil {
		parent, signer = ca.Cert, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	return key, der, err
}

// certRequest describes a leaf certificate.
type certRequest struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool
	Client       bool
}

// Issue signs a leaf certificate and writes <dir>/<file>.crt and .key.
func (ca *CA) Issue(dir, file string, req certRequest) (*KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: req.CommonName, Organization: req.Organization},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:    req.DNSNames,
		IPAddresses: req.IPs,
	}
	if req.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	key, der, err := newCert(tmpl, ca)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %s: %w", file, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	kp := &KeyPair{
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   keyPEM,
		CertFile: filepath.Join(dir, file+".crt"),
		KeyFile:  filepath.Join(dir, file+".key"),
	}
	if err := writeFile(kp.CertFile, kp.CertPEM); err != nil {
		return nil, err
	}
	if err := writeFile(kp.KeyFile, kp.KeyPEM); err != nil {
		return nil, err
	}
	return kp, nil
}

// IssueClient signs a client certificate for user (CN) in groups (O).
func (ca *CA) IssueClient(dir, file, user string, groups ...string) (*KeyPair, error) {
	return ca.Issue(dir, file, certRequest{CommonName: user, Organization: groups, Client: true})
}

// newPKI creates every credential of the control plane under dir.
func newPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating PKI dir: %w", err)
	}
	p := &PKI{Dir: dir}
	var err error
	if p.ClusterCA, err = newCA(dir, "cluster-ca"); err != nil {
		return nil, err
	}
	if p.FrontProxyCA, err = newCA(dir, "front-proxy-ca"); err != nil {
		return nil, err
	}
	if p.APIServerServing, err = p.ClusterCA.Issue(dir, "apiserver", certRequest{
		CommonName: "kube-apiserver",
		DNSNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPs:        []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		Server:     true,
	}); err != nil {
		return nil, err
	}
	// The aggregator presents this certificate to extension API servers,
	// which trust it through the front-proxy CA and the allowed name.
	if p.FrontProxyClient, err = p.FrontProxyCA.IssueClient(dir, "front-proxy-client", "front-proxy-client"); err != nil {
		return nil, err
	}
	if p.Admin, err = p.ClusterCA.IssueClient(dir, "admin", "kubernetes-admin", "system:masters"); err != nil {
		return nil, err
	}
	saKey, err := newKey()
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := encodeKey(saKey)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("encoding service-account public key: %w", err)
	}
	p.ServiceAccountKeyFile = filepath.Join(dir, "sa.key")
	p.ServiceAccountPubFile = filepath.Join(dir, "sa.pub")
	if err := writeFile(p.ServiceAccountKeyFile, saKeyPEM); err != nil {
		return nil, err
	}
	if err := writeFile(p.ServiceAccountPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})); err != nil {
		return nil, err
	}
	return p, nil
}

// WriteServingSet writes a fresh CA (ca.crt) and a serving certificate it
// signed (tls.crt, tls.key) for dnsNames into dir: what a tls-secret
// deployment needs, for tests and throwaway setups.
func WriteServingSet(dir string, dnsNames ...string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	ca, err := newCA(dir, "ca")
	if err != nil {
		return err
	}
	if len(dnsNames) == 0 {
		return errors.New("WriteServingSet: no DNS name")
	}
	_, err = ca.Issue(dir, "tls", certRequest{CommonName: dnsNames[0], DNSNames: dnsNames, Server: true})
	return err
}
