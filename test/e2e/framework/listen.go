package framework

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Listener is a listening TCP socket of one of the environment's processes.
type Listener struct {
	Process string
	Addr    net.IP
	Port    int
}

// Listeners returns every listening TCP socket owned by the environment's
// running processes (from /proc; Linux only), so tests can check that
// nothing listens beyond loopback.
func (e *Env) Listeners() ([]Listener, error) {
	table, err := listenTable()
	if err != nil {
		return nil, err
	}
	var out []Listener
	for _, p := range e.Processes() {
		if done, _ := p.Exited(); done {
			continue
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.Pid()))
		if err != nil {
			return nil, fmt.Errorf("listing sockets of %s: %w", p.Name, err)
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", p.Pid()), fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			inode := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
			if l, ok := table[inode]; ok {
				l.Process = p.Name
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// listenTable maps socket inodes to listening addresses (/proc/net/tcp{,6}).
func listenTable() (map[string]Listener, error) {
	out := map[string]Listener{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		sc := bufio.NewScanner(fh)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			host, port, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			ip, err := parseProcIP(host)
			if err != nil {
				continue
			}
			p, err := strconv.ParseInt(port, 16, 32)
			if err != nil {
				continue
			}
			out[fields[9]] = Listener{Addr: ip, Port: int(p)}
		}
		fh.Close()
	}
	return out, nil
}

// parseProcIP decodes /proc/net/tcp's hex address: 32-bit words in host
// (little-endian) byte order.
func parseProcIP(h string) (net.IP, error) {
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil, fmt.Errorf("bad address %q", h)
	}
	ip := make(net.IP, len(b))
	for i := 0; i < len(b); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return ip, nil
}
