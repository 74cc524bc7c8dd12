package promclient

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// keyPairReloader serves a TLS client certificate from files that may be
// rotated (cert-manager, a Secret update): on a handshake at most every
// secretRefreshInterval it re-reads both files and, if they changed and
// still form a valid pair, switches to the new pair. A pair that fails to
// load keeps the previous one in use.
type keyPairReloader struct {
	certFile, keyFile string
	clock             clock.PassiveClock

	mu              sync.Mutex
	cert            *tls.Certificate
	certPEM, keyPEM []byte
	checkedAt       time.Time
}

func newKeyPairReloader(certFile, keyFile string, clk clock.PassiveClock) (*keyPairReloader, error) {
	r := &keyPairReloader{certFile: certFile, keyFile: keyFile, clock: clk}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads both files and installs the pair if it differs from the one in use.
func (r *keyPairReloader) load() error {
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return err
	}
	r.checkedAt = r.clock.Now()
	if r.cert != nil && bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM) {
		return nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("loading client certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	if r.cert != nil {
		klog.V(2).InfoS("Client certificate for Prometheus changed, using the new one", "certFile", r.certFile)
	}
	r.cert, r.certPEM, r.keyPEM = &cert, certPEM, keyPEM
	return nil
}

// getClientCertificate implements tls.Config.GetClientCertificate.
func (r *keyPairReloader) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.clock.Since(r.checkedAt) >= secretRefreshInterval {
		if err := r.load(); err != nil {
			// Mid-rotation or a broken update: keep the pair in use.
			r.checkedAt = r.clock.Now()
			klog.V(2).InfoS("Could not reload the Prometheus client certificate, keeping the previous one", "err", err)
		}
	}
	return r.cert, nil
}
