//go:build e2e && chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// secondMetric is the truth metric as the second backend serves it.
const secondMetric = "chaos_second_value"

// secondRules serves chaos_value from the backend named second as
// secondMetric.
const secondRules = `- seriesQuery: '{__name__="chaos_value",namespace!="",pod!=""}'
  backend: second
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name: {matches: "^chaos_value$", as: "` + secondMetric + `"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`

// Stalled backend settings (environment):
//
//	PROMSCALER_CHAOS_STALL_RATE  requests per second through the aggregator (default 200)
//	PROMSCALER_CHAOS_STALL_HOLD  how long the default backend stays stopped (default 30s)
const (
	defaultStallRate = 200
	defaultStallHold = 30 * time.Second
	// maxHealthyErrors is the largest share of the healthy backend's
	// metric requests, and of the discovery document's, that may fail
	// while the other backend is stalled.
	maxHealthyErrors = 0.02
)

// stallMix is what the load asks in turn: the stalled backend's two
// metrics, the healthy backend's metric and the discovery document.
var stallMix = []kind{kindCustom, kindSecond, kindExternal, kindDiscovery}

// TestStalledBackend runs the adapter with two real Prometheus backends,
// the default one (queried directly) and a second one (--backends-config),
// under a mixed load, and stops the default one with SIGSTOP (a real paused
// process: connections accepted by the kernel, nothing answered) for the
// hold time. The stalled backend's requests must cost its own metrics only:
// the second backend's metrics and the discovery document keep answering.
func TestStalledBackend(t *testing.T) {
	rate := envInt("PROMSCALER_CHAOS_STALL_RATE", defaultStallRate)
	hold := defaultStallHold
	if v, err := time.ParseDuration(os.Getenv("PROMSCALER_CHAOS_STALL_HOLD")); err == nil && v > 0 {
		hold = v
	}
	s := startStack(t, stackOptions{direct: true, adapterArgs: strings.Fields(os.Getenv("PROMSCALER_CHAOS_ADAPTER_ARGS")),
		extra: secondBackend})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := s.waitKind(ctx, kindSecond, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Not the admin: system:masters is exempt from the API servers'
	// in-flight limits, the HPA's identity is not.
	hc, err := s.metricsReader(ctx, "chaos-hpa")
	if err != nil {
		t.Fatal(err)
	}
	load := s.startMixedLoad(rate, 0, stallMix, hc, s.env.APIServerURL)
	defer load.close()
	time.Sleep(5 * time.Second)

	pid := s.promPid()
	start := time.Now()
	signal(t, pid, syscall.SIGSTOP)
	mid := make(chan string, 1)
	go func() {
		time.Sleep(hold * 2 / 3)
		mid <- s.metricsNote(ctx, "apiserver_current_inflight_requests", "promscaler_prometheus_requests_in_flight", "go_goroutines ", "apiserver_request_total{code=\"429\"")
	}()
	time.Sleep(hold)
	signal(t, pid, syscall.SIGCONT)
	end := time.Now()
	var recovery time.Duration
	recovered := false
	for deadline := end.Add(2 * time.Minute); time.Now().Before(deadline) && !recovered; time.Sleep(200 * time.Millisecond) {
		recovery, recovered = load.recoveryOf(kindCustom, end)
	}
	time.Sleep(2 * time.Second)

	rows := []stallRow{}
	for _, k := range []kind{kindSecond, kindDiscovery, kindCustom, kindExternal} {
		rows = append(rows, stallRow{kind: k, w: load.windowOf([]kind{k}, start, end)})
	}
	note := fmt.Sprintf("%s into the stall: %s; after it: %s", hold*2/3, <-mid,
		s.metricsNote(ctx, "promscaler_prometheus_rejected_requests_total", "promscaler_prometheus_up"))
	text := stallTable(rows, rate, hold, recovery, recovered, note)
	table := filepath.Join(outDir(t, s), "stalled-backend-"+time.Now().UTC().Format("20060102-150405")+".md")
	if err := os.WriteFile(table, []byte(text), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("stalled backend table %s:\n%s", table, text)
	for _, r := range rows[:2] {
		if share := r.errorShare(); share > maxHealthyErrors {
			t.Errorf("%s: %d of %d requests failed (%s) while the default backend was stalled, want at most %.0f %%",
				r.kind, r.w.total-r.w.ok, r.w.total, r.w.errorText(), 100*maxHealthyErrors)
		}
	}
	for _, r := range rows {
		if r.w.wrong > 0 {
			t.Errorf("%s: %d wrong values: %q", r.kind, r.w.wrong, r.w.wrongBodies)
		}
	}
	if !recovered {
		t.Errorf("the stalled backend's metric: no correct answer within 2 minutes after SIGCONT")
	}
}

// secondBackend starts the second Prometheus (scraping the same exporter)
// and returns the flags and rules that serve secondMetric from it.
func secondBackend(t *testing.T, s *stack) ([]string, string) {
	second := s.env.MustStartPrometheus(t, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{s.exporterAddr}, HonorLabels: true}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := second.WaitForQuery(ctx, truthMetric, truthPods, time.Minute); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backends.yaml")
	if err := os.WriteFile(file, []byte("backends:\n- name: second\n  url: "+second.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--backends-config=" + file}, secondRules
}

// metricsReader returns an HTTP client of kube-apiserver authenticated as
// user, bound to the metrics-reader ClusterRole.
func (s *stack) metricsReader(ctx context.Context, user string) (*http.Client, error) {
	_, err := s.env.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "chaos-" + user + "-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: framework.MetricsReaderClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("binding %s to the metrics reader role: %w", user, err)
	}
	cfg, err := s.env.UserRESTConfig(user)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 30 * time.Second
	return rest.HTTPClientFor(cfg)
}

// waitKind waits until a request of kind k is answered correctly.
func (s *stack) waitKind(ctx context.Context, k kind, timeout time.Duration) error {
	var last result
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if last = s.ask(ctx, k); last.correct() {
			return nil
		}
	}
	return fmt.Errorf("no correct answer of %s within %v; last: status %d err %q", k, timeout, last.status, last.err)
}

// recoveryOf is recovery over the requests of kind k.
func (l *loader) recoveryOf(k kind, end time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, r := range l.res {
		if r.kind != k || r.start.Before(end) || !r.correct() {
			continue
		}
		if first.IsZero() || r.end.Before(first) {
			first = r.end
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return first.Sub(end), true
}

// stallRow is one kind of request's figures during the stall.
type stallRow struct {
	kind kind
	w    window
}

func (r stallRow) errorShare() float64 {
	if r.w.total == 0 {
		return 1
	}
	return float64(r.w.total-r.w.ok) / float64(r.w.total)
}

func stallTable(rows []stallRow, rate int, hold, recovery time.Duration, recovered bool, note string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Stalled backend run %s: %d req/s through the aggregator as a user with the metrics-reader ClusterRole (%s in turn), the default backend's Prometheus stopped with SIGSTOP for %v; load average %s.\n\n",
		time.Now().UTC().Format(time.RFC3339), rate, kindsText(stallMix), hold, framework.LoadAvg())
	b.WriteString("| requests | during the stall | ok | errors | error rate | p99 / max latency |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %.1f %% | %v / %v |\n", r.kind, r.w.total, r.w.ok, r.w.errorText(), 100*r.errorShare(),
			r.w.p99.Round(time.Millisecond), r.w.maxLatency.Round(time.Millisecond))
	}
	rec := "none within 2 min"
	if recovered {
		rec = recovery.Round(10 * time.Millisecond).String()
	}
	fmt.Fprintf(&b, "\nThe stalled backend's custom metric answered correctly again %s after SIGCONT. Adapter: %s\n", rec, note)
	return b.String()
}

func kindsText(ks []kind) string {
	var names []string
	for _, k := range ks {
		names = append(names, k.String())
	}
	return strings.Join(names, ", ")
}
