//go:build e2e && chaos

package chaos

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// The namespace and pods whose metric the load asks for, and the metric's
// true value per pod: what the exporter serves, so what every 200 must say.
const (
	truthNamespace = "chaos"
	truthMetric    = "chaos_value"
	truthExternal  = "chaos_queue"
	truthPods      = 5
)

// truthMilli is the value of truthMetric for pod i, in milli-units (a
// fraction, so a rounding or a unit slip shows as a wrong value).
func truthMilli(i int) int64 { return int64(i+1)*3000 + 250 }

func truthPod(i int) string { return fmt.Sprintf("p-%d", i) }

// truthQueueMilli is the external metric chaos_queue{queue="jobs"}.
const truthQueueMilli = 42500

// adapterRules serves the truth metrics plus every churn_* metric of the
// soak (pods in any namespace).
const adapterRules = `rules:
- seriesQuery: '{__name__=~"chaos_value|churn_.*",namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name: {matches: "^(.*)$", as: "${1}"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__="chaos_queue",namespace!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
  name: {matches: "^(.*)$", as: "${1}"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`

// badRules is adapterRules with a metricsQuery Prometheus would reject
// (unbalanced brackets): what a reload must not swap in.
var badRules = strings.Replace(adapterRules, "by (<<.GroupBy>>)'\nexternalRules", "by (<<.GroupBy>>'\nexternalRules", 1)

// stack is the real system under test: etcd, kube-apiserver (audit log of
// /scale writes), the exporter, Prometheus scraping it, a fault proxy in
// front of Prometheus, and the adapter (querying through the proxy) behind
// its APIServices.
type stack struct {
	// t owns the environment (processes the suite restarts stop with it).
	t       testing.TB
	env     *framework.Env
	x       *exporter.Exporter
	prom    *framework.Prometheus
	proxy   *faultProxy
	adapter *framework.Adapter
	rules   string // the adapter's --config file
	// exporterAddr is where Prometheus scrapes the exporter.
	exporterAddr string
	auditLog     string
	// api is an admin HTTP client of kube-apiserver (through the aggregator).
	api *http.Client
	// direct is an admin HTTP client of the adapter's own port.
	direct *http.Client

	// Processes the suite restarted: the current one and its argv.
	promProc, apiProc         *framework.Process
	apiArgs                   []string
	promRestarts, apiRestarts int
	// rotation holds the serving certificate and client CA files the
	// adapter reloads (certs_test.go).
	rotation *rotation
	// as is the autoscaler pair, started by the first autoscaler fault.
	as *autoscalers
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["update", "patch"]
  resources:
  - group: "apps"
    resources: ["deployments/scale"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
- level: None
`

type stackOptions struct {
	// adapterArgs are appended to the adapter's command line.
	adapterArgs []string
	// rotation serves the adapter from certificate and client CA files
	// the suite can rotate.
	rotation bool
	// direct points the adapter at Prometheus itself rather than at the
	// fault proxy, so that a killed Prometheus is a refused connection,
	// not the proxy's 502.
	direct bool
	// front, when set, is given Prometheus' URL and returns the URL the
	// adapter queries instead (a server of the suite in front of it).
	front func(t *testing.T, promURL string) string
	// teamRules runs the adapter with --team-rules and the RBAC of
	// deploy/components/team-rules (teams_test.go).
	teamRules bool
	// extra, when set, runs before the adapter starts and returns more
	// adapter flags and rules to append to adapterRules' custom rules.
	extra func(t *testing.T, s *stack) (args []string, rules string)
}

func startStack(t *testing.T, opts stackOptions) *stack {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, auditLog: filepath.Join(dir, "audit.log")}
	s.env = framework.New(t, framework.Config{APIServerArgs: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + s.auditLog}})
	if ok, msg := s.env.AdapterImplemented(context.Background()); !ok {
		t.Fatalf("adapter binary: %s", msg)
	}
	s.x = exporter.New(nil)
	addr, stop, err := s.x.Serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.exporterAddr = addr
	s.prom = s.env.MustStartPrometheus(t, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addr}, HonorLabels: true}},
	})
	if s.proxy, err = startFaultProxy(s.prom.URL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.proxy.close)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := s.env.EnsureNamespace(ctx, truthNamespace); err != nil {
		t.Fatal(err)
	}
	for i := range truthPods {
		if err := s.createPod(ctx, truthNamespace, truthPod(i)); err != nil {
			t.Fatal(err)
		}
		if err := s.x.Set(exporter.Series{Name: truthMetric, Labels: map[string]string{"namespace": truthNamespace, "pod": truthPod(i)}, Value: float64(truthMilli(i)) / 1000}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.x.Set(exporter.Series{Name: truthExternal, Labels: map[string]string{"namespace": truthNamespace, "queue": "jobs"}, Value: truthQueueMilli / 1000.0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.prom.WaitForQuery(ctx, truthMetric, truthPods, time.Minute); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config-reload-interval=1s"}, opts.adapterArgs...)
	rules := adapterRules
	if opts.extra != nil {
		more, extraRules := opts.extra(t, s)
		args = append(args, more...)
		rules = strings.Replace(rules, "\nexternalRules:", "\n"+extraRules+"externalRules:", 1)
	}
	s.rules = filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(s.rules, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	if opts.rotation {
		args = append(args, s.prepareRotation(t)...)
	}
	if opts.teamRules {
		rbac := filepath.Join(s.env.RepoRoot, "deploy", "components", "team-rules", "rbac.yaml")
		if out, err := s.env.Kubectl(ctx, "apply", "--server-side", "-f", rbac); err != nil {
			t.Fatalf("applying the team rules RBAC: %v\n%s", err, out)
		}
		args = append(args, "--team-rules")
	}
	promURL := s.proxy.URL
	switch {
	case opts.front != nil:
		promURL = opts.front(t, s.prom.URL)
	case opts.direct:
		promURL = s.prom.URL
	}
	s.adapter = s.env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: s.rules, PrometheusURL: promURL, ExtraArgs: args})

	cfg := rest.CopyConfig(s.env.RESTConfig)
	cfg.Timeout = 30 * time.Second
	if s.api, err = rest.HTTPClientFor(cfg); err != nil {
		t.Fatal(err)
	}
	if s.direct, err = adminClient(s.env.PKI.Admin); err != nil {
		t.Fatal(err)
	}
	// Served correctly once before anything starts.
	if err := s.waitCorrect(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return s
}

// createPod creates a pod (no kubelet: no status; the adapter's `*`
// listing only needs the object).
func (s *stack) createPod(ctx context.Context, ns, name string) error {
	tmpl := framework.PodTemplate(map[string]string{"app": "chaos"})
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name, pod.Namespace = name, ns
	if _, err := s.env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// waitCorrect waits until the truth metric is served correctly through the aggregator.
func (s *stack) waitCorrect(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last result
	for time.Now().Before(deadline) {
		if last = s.ask(ctx, kindCustom); last.correct() {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("no correct answer of %s within %v; last: status %d wrong %v partial %v err %q", truthMetric, timeout, last.status, last.wrong, last.partial, last.err)
}

// adminClient presents the admin client certificate to the adapter's own
// port (self-signed serving certificate).
func adminClient(kp *framework.KeyPair) (*http.Client, error) {
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("admin client certificate: %w", err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}, //nolint:gosec // loopback adapter, self-signed
		ForceAttemptHTTP2: true,
	}}, nil
}

// adapterGoroutines reads go_goroutines from the adapter's /metrics.
func (s *stack) adapterGoroutines(ctx context.Context, a *framework.Adapter) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, code, err := framework.Get(ctx, s.direct, a.URL+"/metrics")
	if err != nil {
		return 0, fmt.Errorf("adapter /metrics: %w", err)
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("adapter /metrics: HTTP %d", code)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("go_goroutines %q: %w", v, err)
			}
			return int(f), nil
		}
	}
	return 0, fmt.Errorf("adapter /metrics has no go_goroutines")
}

// footprint is the adapter's RSS and goroutines at one moment.
type footprint struct {
	rss        float64
	goroutines int
}

func (s *stack) footprint(ctx context.Context, a *framework.Adapter) footprint {
	var f footprint
	f.rss, _ = framework.MemMiB(a.Process.Pid(), "VmRSS")
	var err error
	if f.goroutines, err = s.adapterGoroutines(ctx, a); err != nil {
		f.goroutines = -1 // shown as "?"
	}
	return f
}

// outDir is where the suite writes its tables: $PROMSCALER_CHAOS_OUT, else
// <repo>/_output/chaos.
func outDir(t *testing.T, s *stack) string {
	t.Helper()
	dir := os.Getenv("PROMSCALER_CHAOS_OUT")
	if dir == "" {
		dir = filepath.Join(s.env.RepoRoot, "_output", "chaos")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
