//go:build e2e && chaos

package chaos

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// tcpGate is a TCP proxy in front of kube-apiserver for one process; hold
// stops every byte both ways (a network that does not answer yet) until
// release.
type tcpGate struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	held     chan struct{} // nil: open
}

func newTCPGate(t *testing.T, upstream string) *tcpGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &tcpGate{ln: ln, upstream: upstream}
	t.Cleanup(func() { g.release(); _ = ln.Close() })
	go g.serve()
	return g
}

func (g *tcpGate) serve() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			g.wait()
			up, err := net.Dial("tcp", g.upstream)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { g.copy(up, c); done <- struct{}{} }()
			go func() { g.copy(c, up); done <- struct{}{} }()
			<-done
		}()
	}
}

// copy forwards src to dst, each chunk only while the gate is open.
func (g *tcpGate) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			g.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (g *tcpGate) wait() {
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	if held != nil {
		<-held
	}
}

func (g *tcpGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held = make(chan struct{})
	}
}

func (g *tcpGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

// gatedKubeconfig writes a copy of kubeconfig whose clusters point at a new
// tcpGate in front of their server (TLS still ends at kube-apiserver: the
// gate is on 127.0.0.1 as the server is).
func gatedKubeconfig(t *testing.T, kubeconfig string) (string, *tcpGate) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var g *tcpGate
	for _, c := range cfg.Clusters {
		u, err := hostPort(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		if g == nil {
			g = newTCPGate(t, u)
		}
		c.Server = fmt.Sprintf("https://%s", g.ln.Addr())
	}
	out := filepath.Join(t.TempDir(), "gated-"+filepath.Base(kubeconfig))
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}
	return out, g
}

func hostPort(server string) (string, error) {
	const prefix = "https://"
	if len(server) <= len(prefix) || server[:len(prefix)] != prefix {
		return "", fmt.Errorf("kubeconfig server %q: want https://host:port", server)
	}
	return server[len(prefix):], nil
}
