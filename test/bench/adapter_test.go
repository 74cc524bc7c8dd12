//go:build e2e && bench

package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// adapterProc is an adapter started by the harness itself (not through
// framework.StartAdapter), so its port is known before it starts and the
// time until a metric is listed can be measured from the exec.
type adapterProc struct {
	name    string
	cmd     *exec.Cmd
	url     string
	logFile string
	started time.Time
	done    chan struct{}
	// logOffset and passes: what discoveryPasses has read so far.
	logOffset int64
	passes    []time.Duration
}

// startAdapter runs the adapter binary with the connection flags the
// environment needs (port, certs, kubeconfigs, Prometheus URL, rules) and
// extra; every other flag keeps its default.
func (s *stack) startAdapter(name string, extra ...string) (*adapterProc, error) {
	return s.startAdapterBin(name, s.env.Bin("adapter"), extra...)
}

// startAdapterBin is startAdapter with another adapter binary (A/B runs).
func (s *stack) startAdapterBin(name, bin string, extra ...string) (*adapterProc, error) {
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	args, err := s.env.AdapterArgs(port, s.adapterKubeconfig, s.prom.URL, s.rules)
	if err != nil {
		return nil, err
	}
	args = append(args, extra...)
	logFile := filepath.Join(s.env.LogDir(), "adapter-"+name+".log")
	f, err := os.Create(logFile)
	if err != nil {
		return nil, fmt.Errorf("adapter log: %w", err)
	}
	if err := evictPageCache(bin); err != nil {
		progress("%v (peak RSS then depends on what of it is cached)", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if e := strings.Fields(os.Getenv(EnvAdapterEnv)); len(e) > 0 {
		cmd.Env = append(os.Environ(), e...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	a := &adapterProc{name: name, cmd: cmd, url: fmt.Sprintf("https://127.0.0.1:%d", port), logFile: logFile, done: make(chan struct{})}
	a.started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting adapter: %w", err)
	}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(a.done)
	}()
	s.env.OnClose(a.stop)
	progress("started adapter %s (pid %d, %s, log %s)", name, a.pid(), strings.Join(extra, " "), logFile)
	return a, nil
}

func (a *adapterProc) pid() int { return a.cmd.Process.Pid }

func (a *adapterProc) exited() bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the adapter's process group and SIGKILL after 10 s.
func (a *adapterProc) stop() {
	if a.exited() {
		return
	}
	_ = syscall.Kill(-a.pid(), syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-a.pid(), syscall.SIGKILL)
		<-a.done
	}
}

// discoveryPasses reads what the adapter logged (-v=2) since the last call
// and returns the duration of every "Discovery pass done" line so far.
func (a *adapterProc) discoveryPasses() ([]time.Duration, error) {
	f, err := os.Open(a.logFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(a.logOffset, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	// Only whole lines; a partial last line is read again next time.
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	a.logOffset += int64(len(data))
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, "Discovery pass done") {
			continue
		}
		var d time.Duration
		if m := durationRE.FindStringSubmatch(line); m != nil {
			d, _ = time.ParseDuration(m[1])
		}
		a.passes = append(a.passes, d)
	}
	return a.passes, nil
}

var durationRE = regexp.MustCompile(`duration="?([0-9.]+[a-zµ]+)"?`)

// adminClient is an HTTP client presenting the admin (system:masters)
// client certificate, over keep-alive HTTP/2 (HTTP/1.1 with
// PROMSCALER_BENCH_HTTP1 set; the adapter's serving certificate is
// self-signed).
func adminClient(kp *framework.KeyPair) (*http.Client, error) {
	tr, err := adminTransport(kp)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}, nil
}

// adminTransport is adminClient's transport: each one keeps its own
// connections.
func adminTransport(kp *framework.KeyPair) (*http.Transport, error) {
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("admin client certificate: %w", err)
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}, //nolint:gosec // loopback adapter, self-signed
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 256,
	}
	if os.Getenv(EnvHTTP1) != "" {
		// keep-alive HTTP/1.1 instead, a connection per request in flight
		tr.ForceAttemptHTTP2 = false
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return tr, nil
}

// listsMetric reports whether the adapter lists resource ("pods/<metric>")
// in custom.metrics.k8s.io/v1beta2.
func listsMetric(ctx context.Context, hc *http.Client, base, resource string) (bool, error) {
	body, code, err := framework.Get(ctx, hc, base+"/apis/custom.metrics.k8s.io/v1beta2")
	if err != nil {
		return false, err
	}
	if code != http.StatusOK {
		return false, fmt.Errorf("HTTP %d: %.200s", code, body)
	}
	var list struct {
		Resources []struct {
			Name string `json:"name"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return false, fmt.Errorf("decoding resource list: %w", err)
	}
	for _, r := range list.Resources {
		if r.Name == resource {
			return true, nil
		}
	}
	return false, nil
}

// waitListed polls the adapter every 20 ms until it lists resource and
// returns when it first did (or an error after timeout).
func (a *adapterProc) waitListed(ctx context.Context, hc *http.Client, resource string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if a.exited() {
			return time.Time{}, fmt.Errorf("adapter %s exited; log:\n%s", a.name, tail(a.logFile, 30))
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := listsMetric(rctx, hc, a.url, resource)
		cancel()
		if ok {
			return time.Now(), nil
		}
		lastErr = err
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("adapter %s does not list %s after %s (last error: %v); log:\n%s", a.name, resource, timeout, lastErr, tail(a.logFile, 30))
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLines(string(data), n)
}

// counters sums the values of a text-format metric family by the values of
// one label ("" sums everything into one key).
func counters(text, family, label string) map[string]float64 {
	out := map[string]float64{}
	var labelRE *regexp.Regexp
	if label != "" {
		labelRE = regexp.MustCompile(`[{,]` + label + `="([^"]*)"`)
	}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, family) {
			continue
		}
		rest := line[len(family):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[i+1:]), 64)
		if err != nil {
			continue
		}
		key := ""
		if labelRE != nil {
			if m := labelRE.FindStringSubmatch(rest[:i]); m != nil {
				key = m[1]
			}
		}
		out[key] += v
	}
	return out
}

// metricsText returns a /metrics page (the adapter's, with the admin client).
func metricsText(ctx context.Context, hc *http.Client, url string) (string, error) {
	body, code, err := framework.Get(ctx, hc, url)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET %s: HTTP %d: %.200s", url, code, body)
	}
	return string(body), nil
}

// apiserverMetrics returns kube-apiserver's /metrics.
func (s *stack) apiserverMetrics(ctx context.Context) (string, error) {
	body, err := s.env.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("reading kube-apiserver /metrics: %w", err)
	}
	return string(body), nil
}

// apiCalls is a snapshot of the Kubernetes API calls made by the adapter
// (its client-go rest_client_requests_total) and served by kube-apiserver
// (apiserver_request_total by resource).
type apiCalls struct {
	adapter   float64
	apiserver map[string]float64
}

func (s *stack) snapshotAPICalls(ctx context.Context, a *adapterProc) (apiCalls, error) {
	var c apiCalls
	text, err := metricsText(ctx, s.admin, a.url+"/metrics")
	if err != nil {
		return c, err
	}
	c.adapter = counters(text, "rest_client_requests_total", "")[""]
	text, err = s.apiserverMetrics(ctx)
	if err != nil {
		return c, err
	}
	c.apiserver = counters(text, "apiserver_request_total", "resource")
	return c, nil
}

// diff returns the adapter's calls and kube-apiserver's requests per
// resource made between c and later.
func (c apiCalls) diff(later apiCalls) (float64, map[string]float64) {
	out := map[string]float64{}
	for k, v := range later.apiserver {
		if d := v - c.apiserver[k]; d > 0 {
			if k == "" {
				k = "non-resource" // this harness reading /metrics
			}
			out[k] = d
		}
	}
	return later.adapter - c.adapter, out
}
