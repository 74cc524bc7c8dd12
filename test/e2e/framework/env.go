package framework

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Environment variables the harness reads.
const (
	// EnvToolsDir names the folder of the third-party binaries (hack/tools.sh).
	EnvToolsDir = "PROMSCALER_TOOLS_DIR"
	// EnvBinDir names the folder of the project's own binaries (make build).
	EnvBinDir = "PROMSCALER_BIN_DIR"
	// EnvPrometheus selects the Prometheus binary (default: the 3.x one in the tools dir);
	// e.g. /usr/bin/prometheus for Debian's 2.42.
	EnvPrometheus = "PROMSCALER_PROMETHEUS"
	// EnvKeep, when set to 1, keeps the working directory (logs, configs) after Close.
	EnvKeep = "PROMSCALER_E2E_KEEP"
)

// Config configures an environment. The zero value is usable: every field
// has a default taken from the environment variables above or the repository
// layout.
type Config struct {
	// Dir is the working directory (PKI, data, configs, logs). Default: a new
	// temporary directory, removed by Close unless KeepDir.
	Dir string
	// KeepDir keeps Dir after Close (default: $PROMSCALER_E2E_KEEP=1).
	KeepDir bool
	// ToolsDir holds etcd, kube-apiserver, ... (default $PROMSCALER_TOOLS_DIR, else <repo>/.cache/tools).
	ToolsDir string
	// BinDir holds the adapter and autoscaler (default $PROMSCALER_BIN_DIR, else <repo>/_output/bin).
	BinDir string
	// Logf receives progress messages (default: discarded).
	Logf func(format string, args ...any)
	// APIServerArgs are appended to kube-apiserver's command line (e.g. an
	// audit policy and log).
	APIServerArgs []string
}

// Env is a running local control plane: etcd and kube-apiserver, plus what
// the caller adds (Prometheus, the adapter, kube-controller-manager). All of
// it listens on 127.0.0.1 only. Close stops everything.
type Env struct {
	// Dir is the working directory; logs are under Dir/logs.
	Dir string
	// ToolsDir and BinDir are where binaries come from.
	ToolsDir, BinDir string
	// RepoRoot is the repository checkout (found from the working directory).
	RepoRoot string
	// PKI holds every credential; tests may issue more client certificates.
	PKI *PKI
	// APIServerURL is https://127.0.0.1:<port>.
	APIServerURL string
	// EtcdURL is http://127.0.0.1:<port>.
	EtcdURL string
	// Kubeconfig is the admin (system:masters) kubeconfig file.
	Kubeconfig string
	// RESTConfig, Client and Dynamic act as the admin.
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface

	cfg     Config
	mu      sync.Mutex
	procs   []*Process
	cleanup []func()
	closed  bool
	names   map[string]int
}

// Start starts etcd and kube-apiserver (aggregation layer and RBAC on),
// waits until the apiserver is ready and the default ServiceAccount exists,
// and returns the environment. On error everything started is stopped.
func Start(ctx context.Context, cfg Config) (_ *Env, err error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if os.Getenv(EnvKeep) == "1" {
		cfg.KeepDir = true
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	e := &Env{cfg: cfg, RepoRoot: root, names: map[string]int{}}
	e.ToolsDir = firstNonEmpty(cfg.ToolsDir, os.Getenv(EnvToolsDir), filepath.Join(root, ".cache", "tools"))
	e.BinDir = firstNonEmpty(cfg.BinDir, os.Getenv(EnvBinDir), filepath.Join(root, "_output", "bin"))
	if cfg.Dir == "" {
		if e.Dir, err = os.MkdirTemp("", "promscaler-e2e-"); err != nil {
			return nil, fmt.Errorf("creating working dir: %w", err)
		}
	} else {
		e.Dir = cfg.Dir
		if err := os.MkdirAll(e.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating working dir: %w", err)
		}
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if err := os.MkdirAll(filepath.Join(e.Dir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("creating log dir: %w", err)
	}
	t0 := time.Now()
	if e.PKI, err = newPKI(filepath.Join(e.Dir, "pki")); err != nil {
		return nil, err
	}
	for _, start := range []func(context.Context) error{e.startEtcd, e.startAPIServer} {
		if _, err := retryPortClash(func() (struct{}, error) { return struct{}{}, start(ctx) }); err != nil {
			return nil, err
		}
	}
	if err := e.EnsureNamespace(ctx, "default"); err != nil {
		return nil, err
	}
	e.logf("control plane ready in %s (apiserver %s, dir %s)", time.Since(t0).Round(time.Millisecond), e.APIServerURL, e.Dir)
	return e, nil
}

func (e *Env) logf(format string, args ...any) { e.cfg.Logf(format, args...) }

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// repoRoot walks up from the working directory to the project's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding repository root: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/promscaler/promscaler\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("finding repository root: no go.mod of github.com/promscaler/promscaler above %s", dir)
		}
	}
}

// Tool returns the path of a third-party binary in the tools dir.
func (e *Env) Tool(name string) string { return filepath.Join(e.ToolsDir, name) }

// Bin returns the path of one of the project's binaries.
func (e *Env) Bin(name string) string { return filepath.Join(e.BinDir, name) }

// LogDir is where each process writes its log.
func (e *Env) LogDir() string { return filepath.Join(e.Dir, "logs") }

// start runs a binary as a child of the environment; Close stops it.
func (e *Env) start(name, bin string, args []string, env ...string) (*Process, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errors.New("environment closed")
	}
	n := e.names[name]
	e.names[name]++
	e.mu.Unlock()
	logName := name
	if n > 0 {
		logName = fmt.Sprintf("%s.%d", name, n)
	}
	p, err := startProcess(name, filepath.Join(e.LogDir(), logName+".log"), bin, args, env)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	e.logf("started %s (pid %d, log %s)", name, p.Pid(), p.LogFile)
	return p, nil
}

// StartProcess runs bin with args (and env added to the harness's
// environment) as a child of the environment, its output in LogDir/name.log;
// Close stops it. It is how tests run servers the framework has no starter
// for (Thanos, VictoriaMetrics, Cortex: test/engines).
func (e *Env) StartProcess(name, bin string, args []string, env ...string) (*Process, error) {
	return e.start(name, bin, args, env...)
}

// WaitHTTP polls url until it answers 200, proc exits or timeout passes.
func (e *Env) WaitHTTP(ctx context.Context, proc *Process, url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	return e.waitFor(ctx, proc, proc.Name+" "+url, timeout, func(ctx context.Context) (bool, error) {
		_, code, err := httpGet(ctx, hc, url)
		return err == nil && code == http.StatusOK, nil
	})
}

// OnClose registers f to run when the environment closes (before processes
// stop, in reverse order of registration).
func (e *Env) OnClose(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanup = append(e.cleanup, f)
}

// Processes lists the processes started so far.
func (e *Env) Processes() []*Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Process(nil), e.procs...)
}

// Close stops every process (last started first), runs OnClose functions and
// removes the working directory unless it is kept. Safe to call twice.
func (e *Env) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	cleanup, procs := e.cleanup, e.procs
	e.mu.Unlock()
	for i := len(cleanup) - 1; i >= 0; i-- {
		cleanup[i]()
	}
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(10 * time.Second)
	}
	if !e.cfg.KeepDir && e.cfg.Dir == "" {
		_ = os.RemoveAll(e.Dir)
	}
}

// DumpLogs writes the last n lines of every process log to w.
func (e *Env) DumpLogs(w io.Writer, n int) {
	for _, p := range e.Processes() {
		state := "running"
		if ok, err := p.Exited(); ok {
			state = fmt.Sprintf("exited: %v", err)
		}
		fmt.Fprintf(w, "===== %s (pid %d, %s) %s =====\n%s\n", p.Name, p.Pid(), state, p.LogFile, p.Tail(n))
	}
}

func (e *Env) startEtcd(ctx context.Context) error {
	var p [3]int
	for i := range p {
		port, err := FreePort()
		if err != nil {
			return err
		}
		p[i] = port
	}
	dataDir := filepath.Join(e.Dir, "etcd")
	// A fresh member: a failed earlier attempt may have bootstrapped with other URLs.
	if err := os.RemoveAll(dataDir); err != nil {
		return fmt.Errorf("clearing etcd data dir: %w", err)
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", p[1])
	args := []string{
		"--name=e2e",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=e2e=" + peer,
		fmt.Sprintf("--listen-metrics-urls=http://127.0.0.1:%d", p[2]),
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	proc, err := e.start("etcd", e.Tool("etcd"), args)
	if err != nil {
		return err
	}
	e.EtcdURL = client
	hc := &http.Client{Timeout: 2 * time.Second}
	return e.waitFor(ctx, proc, "etcd health", 30*time.Second, func(ctx context.Context) (bool, error) {
		body, code, err := httpGet(ctx, hc, client+"/health")
		return err == nil && code == http.StatusOK && strings.Contains(body, `"health":"true"`), nil
	})
}

func (e *Env) startAPIServer(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	k := e.PKI
	args := []string{
		"--etcd-servers=" + e.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--client-ca-file=" + k.ClusterCA.CertFile,
		"--tls-cert-file=" + k.APIServerServing.CertFile,
		"--tls-private-key-file=" + k.APIServerServing.KeyFile,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + k.ServiceAccountPubFile,
		"--service-account-signing-key-file=" + k.ServiceAccountKeyFile,
		"--requestheader-client-ca-file=" + k.FrontProxyCA.CertFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + k.FrontProxyClient.CertFile,
		"--proxy-client-key-file=" + k.FrontProxyClient.KeyFile,
		"--profiling=false",
		"--cert-dir=" + filepath.Join(e.Dir, "apiserver-certs"),
	}
	args = append(args, e.cfg.APIServerArgs...)
	proc, err := e.start("kube-apiserver", e.Tool("kube-apiserver"), args)
	if err != nil {
		return err
	}
	e.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	e.Kubeconfig = filepath.Join(e.Dir, "admin.kubeconfig")
	if err := e.writeKubeconfig(e.Kubeconfig, "admin", k.Admin); err != nil {
		return err
	}
	if e.RESTConfig, err = clientcmd.BuildConfigFromFlags("", e.Kubeconfig); err != nil {
		return fmt.Errorf("loading admin kubeconfig: %w", err)
	}
	e.RESTConfig.QPS, e.RESTConfig.Burst = 100, 200
	if e.Client, err = kubernetes.NewForConfig(e.RESTConfig); err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	if e.Dynamic, err = dynamic.NewForConfig(e.RESTConfig); err != nil {
		return fmt.Errorf("admin dynamic client: %w", err)
	}
	return e.waitFor(ctx, proc, "kube-apiserver /readyz", 90*time.Second, func(ctx context.Context) (bool, error) {
		res := e.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx)
		var code int
		res.StatusCode(&code)
		return code == http.StatusOK, nil
	})
}

// waitFor polls cond every 100ms until it holds, the process exits, the
// timeout passes or ctx ends; errors name what was awaited.
func (e *Env) waitFor(ctx context.Context, proc *Process, what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	t0 := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if proc != nil {
			if err := proc.exitError(); err != nil {
				return false, err
			}
		}
		return cond(ctx)
	})
	if err != nil {
		if proc != nil {
			if perr := proc.exitError(); perr != nil {
				return fmt.Errorf("waiting for %s: %w", what, perr)
			}
			return fmt.Errorf("waiting for %s (%s): %w; last log lines of %s:\n%s", what, timeout, err, proc.Name, proc.Tail(30))
		}
		return fmt.Errorf("waiting for %s (%s): %w", what, timeout, err)
	}
	e.logf("%s after %s", what, time.Since(t0).Round(time.Millisecond))
	return nil
}

func httpGet(ctx context.Context, hc *http.Client, url string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(body), resp.StatusCode, err
}

// insecureClient talks TLS to loopback components whose serving certificate
// is self-signed (the adapter, kube-controller-manager).
func insecureClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback test components only
	}}
}

// writeKubeconfig writes a kubeconfig for the apiserver with a client certificate.
func (e *Env) writeKubeconfig(path, user string, kp *KeyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: e.APIServerURL, CertificateAuthorityData: e.PKI.ClusterCA.CertPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// UserKubeconfig issues a client certificate for user in groups, signed by
// the cluster CA, and writes a kubeconfig for it (authorization is RBAC:
// the user can do nothing until bound to a role).
func (e *Env) UserKubeconfig(user string, groups ...string) (string, error) {
	file := "user-" + sanitize(user)
	kp, err := e.PKI.ClusterCA.IssueClient(e.PKI.Dir, file, user, groups...)
	if err != nil {
		return "", err
	}
	path := filepath.Join(e.Dir, file+".kubeconfig")
	if err := e.writeKubeconfig(path, sanitize(user), kp); err != nil {
		return "", err
	}
	return path, nil
}

// UserRESTConfig is UserKubeconfig loaded as a *rest.Config.
func (e *Env) UserRESTConfig(user string, groups ...string) (*rest.Config, error) {
	path, err := e.UserKubeconfig(user, groups...)
	if err != nil {
		return nil, err
	}
	c, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig of %s: %w", user, err)
	}
	return c, nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// EnsureNamespace creates a namespace (if missing) and its `default`
// ServiceAccount, which the missing serviceaccount controller would create
// and without which pods are refused.
func (e *Env) EnsureNamespace(ctx context.Context, name string) error {
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	_, err = e.Client.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating default ServiceAccount in %s: %w", name, err)
	}
	return nil
}

// Kubectl runs the kubectl of the tools dir as admin and returns its stdout;
// the error carries stderr.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	return e.KubectlAs(ctx, e.Kubeconfig, args...)
}

// KubectlAs runs kubectl with the given kubeconfig.
func (e *Env) KubectlAs(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.Tool("kubectl"), append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Dir = e.RepoRoot
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
