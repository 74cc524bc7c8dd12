//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/promscaler/promscaler/pkg/scaletozero"
	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// The coexistence e2e: kube-controller-manager with its HPA controller (and
// the deployment and replicaset controllers) and two promscaler autoscaler
// replicas in --mode=coexist beside it, with leader election, on metrics
// the adapter serves from a real Prometheus through the aggregator. The
// autoscalers run with the RBAC of deploy/components/autoscaler. Every
// write to a Deployment's /scale or an HPA is counted from the apiserver's
// audit log, per user: replica a is the component's ServiceAccount, replica
// b a second user bound to the same roles, so each write names its writer.

const (
	coexistOurSync    = time.Second
	coexistKCMSync    = 2 * time.Second
	coexistLease      = 4 * time.Second
	coexistIdle       = 6 * time.Second
	coexistUserA      = "system:serviceaccount:promscaler:promscaler-autoscaler"
	coexistUserB      = framework.SecondAutoscalerUser
	coexistLeaseSpace = "promscaler"
)

const coexistAdapterConfig = `rules:
- seriesQuery: '{__name__="worker_requests",namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name: {matches: "^(.*)$", as: "${1}"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
` + queueExternalRules

const coexistAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["update", "patch"]
  resources:
  - group: "apps"
    resources: ["deployments", "deployments/scale"]
  - group: "autoscaling"
    resources: ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]
- level: None
`

func TestAutoscalerCoexist(t *testing.T) {
	auditDir := t.TempDir()
	policy, auditLog := filepath.Join(auditDir, "policy.yaml"), filepath.Join(auditDir, "audit.log")
	if err := os.WriteFile(policy, []byte(coexistAuditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	env := framework.New(t, framework.Config{APIServerArgs: []string{"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog}})
	x, addr := serveExporter(t)
	prom := env.MustStartPrometheus(t, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addr}, HonorLabels: true}},
	})
	requireAdapter(t, env)
	for _, bin := range []string{"autoscaler"} {
		if _, err := os.Stat(env.Bin(bin)); err != nil {
			t.Fatalf("%s binary: %v (run `make build`)", bin, err)
		}
	}
	cfgFile := filepath.Join(t.TempDir(), "coexist-config.yaml")
	if err := os.WriteFile(cfgFile, []byte(coexistAdapterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: cfgFile, PrometheusURL: prom.URL})
	env.MustStartControllerManager(t, framework.ControllerManagerConfig{
		Controllers:   []string{framework.HPAController, framework.DeploymentController, framework.ReplicaSetController},
		HPASyncPeriod: coexistKCMSync,
		ExtraArgs:     []string{"--horizontal-pod-autoscaler-downscale-stabilization=5s"},
	})
	ctx := ctxFor(t, 12*time.Minute)

	// RBAC: the component's, as shipped.
	if err := env.EnsureNamespace(ctx, coexistLeaseSpace); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(ctx, "apply", "-f", filepath.Join(env.RepoRoot, "deploy", "components", "autoscaler", "rbac.yaml")); err != nil {
		t.Fatalf("applying the component's RBAC: %v\n%s", err, out)
	}
	extra := filepath.Join(t.TempDir(), "rbac-b.yaml")
	if err := os.WriteFile(extra, []byte(framework.SecondAutoscalerRBAC), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(ctx, "apply", "-f", extra); err != nil {
		t.Fatalf("binding the second replica: %v\n%s", err, out)
	}

	// Workloads. zero-ext: a Deployment at 0 on an External metric,
	// activation from the same metric, fallback 2 after 3 periods.
	// zero-pods: 2 replicas on a Pods metric, activation from a separate
	// external metric. plain: an unannotated HPA beside them.
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	queueMetric := func(queue string) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": queue}}},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("10")},
		}}
	}
	setQueue := func(ns, queue string, v float64) {
		t.Helper()
		if err := x.Set(exporter.Series{Name: "queue_messages", Labels: map[string]string{"namespace": ns, "queue": queue}, Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	setQueue("zero-ext", "jobs", 0)
	setQueue("zero-pods", "api", 1)
	setQueue("plain", "jobs", 5)
	var podLoad atomic.Int64
	podLoad.Store(10)
	go syncPodSeries(ctx, env, x, "zero-pods", "api", &podLoad)
	time.Sleep(3 * time.Second) // the first scrapes

	createWorkload(t, ctx, env, "zero-ext", "worker", 0, 1, 5, queueMetric("jobs"), map[string]string{
		scaletozero.AnnotationActivationMetric:    "queue_messages",
		scaletozero.AnnotationActivationThreshold: "0",
		scaletozero.AnnotationIdlePeriod:          coexistIdle.String(),
		scaletozero.AnnotationFallbackReplicas:    "2",
		scaletozero.AnnotationFallbackAfter:       "3",
	})
	createWorkload(t, ctx, env, "zero-pods", "api", 2, 2, 6, autoscalingv2.MetricSpec{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "worker_requests"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("10")},
		},
	}, map[string]string{
		scaletozero.AnnotationActivationMetric: "external:queue_messages{queue=api}",
		scaletozero.AnnotationIdlePeriod:       coexistIdle.String(),
	})
	createWorkload(t, ctx, env, "plain", "web", 1, 1, 4, queueMetric("jobs"), nil)

	flags := []string{
		"--mode=coexist",
		"--horizontal-pod-autoscaler-sync-period=" + coexistOurSync.String(),
		"--leader-elect-resource-namespace=" + coexistLeaseSpace,
		"--leader-elect-lease-duration=" + coexistLease.String(),
		"--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=500ms",
		"--leader-elect-fence-margin=1s",
		"--api-request-timeout=5s",
	}
	a := startReplica(t, env, "autoscaler-a", coexistUserA, flags)
	waitHolder(t, ctx, env, a, 30*time.Second)
	b := startReplica(t, env, "autoscaler-b", coexistUserB, flags)

	// (a) zero-ext: stays at 0 at the threshold, wakes above it, kcm
	// scales up and down, ours takes it to 0 after the idle period.
	requireReplicasFor(t, ctx, env, "zero-ext", "worker", 0, 3*time.Second)
	wake := measureWake(t, ctx, env, func() { setQueue("zero-ext", "jobs", 25) }, "zero-ext", "worker")
	t.Logf("reaction zero-ext: breach served by the metrics API -> replicas >= 1: %v (exporter set -> replicas >= 1: %v; our sync period %v)",
		wake.fromServed, wake.fromSet, coexistOurSync)
	if wake.fromServed > coexistOurSync+time.Second {
		t.Errorf("reaction time %v exceeds the sync period + 1s (%v)", wake.fromServed, coexistOurSync+time.Second)
	}
	waitSpecReplicas(t, ctx, env, "zero-ext", "worker", 3, time.Minute) // kcm: ceil(25/10)
	setQueue("zero-ext", "jobs", 5)
	waitSpecReplicas(t, ctx, env, "zero-ext", "worker", 1, time.Minute) // kcm, after its stabilization
	setQueue("zero-ext", "jobs", 0)
	atMin := time.Now()
	waitSpecReplicas(t, ctx, env, "zero-ext", "worker", 0, time.Minute) // ours, after the idle period
	if idle := time.Since(atMin); idle < coexistIdle {
		t.Errorf("scaled to zero %v after the metric fell, before the idle period %v", idle, coexistIdle)
	}
	requireStatus(t, ctx, env, "zero-ext", "worker", "ScaledToZero", scaletozero.ActionScaleToZero)
	requireEvent(t, ctx, env, "zero-ext", "ScaledToZero")
	// What a user sees: kubectl describe hpa shows the state and the events.
	desc, err := env.Kubectl(ctx, "describe", "hpa", "-n", "zero-ext", "worker")
	if err != nil {
		t.Fatalf("kubectl describe hpa: %v\n%s", err, desc)
	}
	for _, want := range []string{scaletozero.AnnotationStatus, `"state":"ScaledToZero"`, "ScaledToZero", "Activated"} {
		if !strings.Contains(desc, want) {
			t.Errorf("kubectl describe hpa lacks %q:\n%s", want, desc)
		}
	}

	// zero-pods: kcm scales on the Pods metric, then down to minReplicas.
	podLoad.Store(30)
	waitSpecReplicas(t, ctx, env, "zero-pods", "api", 6, 2*time.Minute)
	podLoad.Store(5)
	waitSpecReplicas(t, ctx, env, "zero-pods", "api", 2, 2*time.Minute)

	// (d) the leader is killed while zero-pods counts down its idle period:
	// the follower takes over within the lease and does it, once.
	setQueue("zero-pods", "api", 0)
	time.Sleep(2 * time.Second)
	leader, follower := a, b
	if b.leads(ctx) {
		leader, follower = b, a
	}
	killed := time.Now()
	leader.signal(t, syscall.SIGKILL)
	waitHolder(t, ctx, env, follower, 3*coexistLease)
	failover := time.Since(killed)
	t.Logf("failover: leader SIGKILLed -> follower holds the lease: %v (lease duration %v)", failover, coexistLease)
	// The follower may take the lease one lease duration after it last saw
	// it renewed, at its next retry: client-go jitters the 0.5 s retry
	// period by up to 1.2 times itself (1.1 s); 2 s more for a loaded
	// machine and this test's polling. A failover that does not happen, or
	// waits for a second lease, still fails.
	if limit := coexistLease + 1100*time.Millisecond + 2*time.Second; failover > limit {
		t.Errorf("failover took %v, more than the lease duration %v + jittered retry period + 2s", failover, coexistLease)
	}
	waitSpecReplicas(t, ctx, env, "zero-pods", "api", 0, time.Minute)
	requireStatus(t, ctx, env, "zero-pods", "api", "ScaledToZero", scaletozero.ActionScaleToZero)
	wake = measureWake(t, ctx, env, func() { setQueue("zero-pods", "api", 3) }, "zero-pods", "api")
	t.Logf("reaction zero-pods (new leader): served -> replicas >= 1: %v (exporter set -> replicas >= 1: %v)", wake.fromServed, wake.fromSet)
	if wake.fromServed > coexistOurSync+time.Second {
		t.Errorf("reaction time %v exceeds the sync period + 1s (%v)", wake.fromServed, coexistOurSync+time.Second)
	}
	waitSpecReplicas(t, ctx, env, "zero-pods", "api", 2, time.Minute) // woken to minReplicas

	// (d) pause: the leader is stopped past its lease; the other replica
	// takes over and wakes zero-ext; the old leader, resumed, writes
	// nothing and exits.
	restarted := startReplica(t, env, leader.name+"-2", leader.user, flags)
	paused := follower
	pauseAt := time.Now()
	paused.signal(t, syscall.SIGSTOP)
	waitHolder(t, ctx, env, restarted, 4*coexistLease)
	t.Logf("pause: leader SIGSTOPped -> the other replica holds the lease: %v", time.Since(pauseAt))
	setQueue("zero-ext", "jobs", 25)
	waitSpecReplicas(t, ctx, env, "zero-ext", "worker", 3, time.Minute)
	if held := time.Since(pauseAt); held < 2*coexistLease {
		time.Sleep(2*coexistLease - held)
	}
	resumed := time.Now()
	paused.signal(t, syscall.SIGCONT)
	select {
	case <-paused.exited:
		t.Logf("resumed leader exited %v after SIGCONT (exit code %d)", time.Since(resumed).Round(time.Millisecond), paused.cmd.ProcessState.ExitCode())
		if paused.cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("resumed leader exit code %d, want 1", paused.cmd.ProcessState.ExitCode())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the resumed stale leader is still running 10s after SIGCONT")
	}
	requireReplicasFor(t, ctx, env, "zero-ext", "worker", 3, 3*time.Second)

	// (b) Prometheus stopped: after 3 failed periods the fallback (2);
	// back, kube-controller-manager scales normally again.
	promArgs := prom.Process.Args
	prom.Process.Stop(10 * time.Second)
	stopped := time.Now()
	waitSpecReplicas(t, ctx, env, "zero-ext", "worker", 2, time.Minute)
	t.Logf("fallback: Prometheus stopped -> fallback replicas: %v", time.Since(stopped))
	requireStatus(t, ctx, env, "zero-ext", "worker", "Fallback", scaletozero.ActionFallback)
	setQueue("zero-ext", "jobs", 45)
	restartProcess(t, ctx, env, "prometheus-2", promArgs, prom.URL+"/-/ready")
	waitSpecReplicas(t, ctx, env, "zero-ext", "worker", 5, 2*time.Minute) // kcm: ceil(45/10)
	requireStatus(t, ctx, env, "zero-ext", "worker", "Active", scaletozero.ActionRecover)

	// (c) and the counts: every write of ours, from the audit log.
	time.Sleep(2 * time.Second)
	writes := readAudit(t, auditLog)
	ours := func(w auditWrite) bool { return w.User == coexistUserA || w.User == coexistUserB }
	scaleWrites := map[string]int{}
	for _, w := range writes {
		if !ours(w) {
			continue
		}
		if w.Namespace == "plain" {
			t.Errorf("wrote the unannotated HPA's namespace: %+v", w)
		}
		if w.User == paused.user && !w.At.Before(resumed) {
			t.Errorf("stale write by the resumed replica: %+v", w)
		}
		if w.Resource == "deployments" && w.Subresource == "scale" {
			scaleWrites[w.Namespace]++
		}
	}
	// Each action is one /scale write: as many writes as the actions the
	// autoscalers reported (events), and at least the scenario's: zero-ext
	// wake, zero, wake, fallback; zero-pods zero, wake. (More when the
	// metrics flicker during the outage: the adapter may answer a read
	// between failures, which restarts the count and the fallback.)
	want := map[string]int{"zero-ext": actionEvents(t, ctx, env, "zero-ext"), "zero-pods": actionEvents(t, ctx, env, "zero-pods")}
	if want["zero-ext"] < 4 || want["zero-pods"] < 2 {
		t.Errorf("actions reported %v, want at least zero-ext 4, zero-pods 2", want)
	}
	if fmt.Sprint(scaleWrites) != fmt.Sprint(want) {
		t.Errorf("/scale writes by the autoscalers per namespace = %v, want %v (one per reported action)", scaleWrites, want)
		for _, w := range writes {
			if ours(w) || w.Namespace == "zero-ext" && w.Subresource == "scale" {
				t.Logf("write %s %s %s %s/%s/%s", w.At.Format("15:04:05.000"), w.User, w.Verb, w.Namespace, w.Resource, w.Subresource)
			}
		}
	}
	plainWrites := 0
	for _, w := range writes {
		if w.Namespace == "plain" {
			plainWrites++
		}
	}
	t.Logf("audit: /scale writes by ours %v; writes in plain (kcm's) %d, by ours 0", scaleWrites, plainWrites)
}

// replica is an autoscaler process of the coexistence test. Replicas
// differ by user (the audit log names the writer); the one restarted after
// the kill takes the killed one's user, so the paused replica's user is
// its alone.
type replica struct {
	name, user string
	metricsURL string
	cmd        *exec.Cmd
	exited     chan struct{}
}

// leads reports whether the replica says (on /metrics) it is the active
// controller.
func (r *replica) leads(ctx context.Context) bool {
	return framework.AutoscalerLeads(ctx, r.metricsURL)
}

func (r *replica) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(r.cmd.Process.Pid, sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, r.name, err)
	}
}

// startReplica runs the autoscaler as user.
func startReplica(t *testing.T, env *framework.Env, name, user string, flags []string) *replica {
	t.Helper()
	groups := []string{"system:authenticated"}
	if strings.HasPrefix(user, "system:serviceaccount:") {
		groups = append(groups, "system:serviceaccounts", "system:serviceaccounts:promscaler")
	}
	kubeconfig, err := env.UserKubeconfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(env.LogDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=127.0.0.1:" + strconv.Itoa(port), "-v=4"}, flags...)
	cmd := exec.Command(env.Bin("autoscaler"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	r := &replica{name: name, user: user, cmd: cmd, exited: make(chan struct{}), metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", port)}
	go func() { _ = cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-r.exited
		}
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("%s log (tail):\n%s", name, b)
			}
		}
	})
	return r
}

// waitHolder waits until r leads (holds the lease, workers started).
func waitHolder(t *testing.T, ctx context.Context, _ *framework.Env, r *replica, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r.leads(ctx) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s does not lead after %v", r.name, timeout)
}

// syncPodSeries keeps worker_requests{namespace,pod} = load for every pod
// of app in ns.
func syncPodSeries(ctx context.Context, env *framework.Env, x *exporter.Exporter, ns, app string, load *atomic.Int64) {
	sel := labels.SelectorFromSet(labels.Set{"app": app}).String()
	for ctx.Err() == nil {
		if pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel}); err == nil {
			for _, p := range pods.Items {
				_ = x.Set(exporter.Series{Name: "worker_requests", Labels: map[string]string{"namespace": ns, "pod": p.Name}, Value: float64(load.Load())})
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// createWorkload creates ns, a Deployment with ready pods, and its HPA.
func createWorkload(t *testing.T, ctx context.Context, env *framework.Env, ns, name string, replicas, minR, maxR int32, metric autoscalingv2.MetricSpec, ann map[string]string) {
	t.Helper()
	if err := env.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	podLabels := map[string]string{"app": name}
	env.RunPodReadier(ctx, ns, labels.SelectorFromSet(podLabels), time.Second)
	if err := env.CreateDeployment(ctx, ns, name, replicas, podLabels); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    &minR,
			MaxReplicas:    maxR,
			Metrics:        []autoscalingv2.MetricSpec{metric},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func specReplicas(ctx context.Context, env *framework.Env, ns, name string) (int32, error) {
	d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	return *d.Spec.Replicas, nil
}

func waitSpecReplicas(t *testing.T, ctx context.Context, env *framework.Env, ns, name string, want int32, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got int32
	var err error
	for time.Now().Before(deadline) {
		if got, err = specReplicas(ctx, env, ns, name); err == nil && got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s/%s: replicas %d (err %v), want %d after %v", ns, name, got, err, want, timeout)
}

// requireReplicasFor checks the replicas stay want for d.
func requireReplicasFor(t *testing.T, ctx context.Context, env *framework.Env, ns, name string, want int32, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got, err := specReplicas(ctx, env, ns, name); err != nil || got != want {
			t.Fatalf("%s/%s: replicas %d (err %v), want %d to hold", ns, name, got, err, want)
		}
	}
}

type wakeTimes struct{ fromSet, fromServed time.Duration }

// measureWake runs breach and times replicas >= 1 from it and from the
// first external metrics API answer above 0 (through the aggregator).
func measureWake(t *testing.T, ctx context.Context, env *framework.Env, breach func(), ns, name string) wakeTimes {
	t.Helper()
	set := time.Now()
	breach()
	var served time.Time
	path := "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + ns + "/queue_messages"
	for deadline := set.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if served.IsZero() {
			if body, err := env.Client.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx); err == nil && externalAboveZero(body) {
				served = time.Now()
			}
		}
		if r, err := specReplicas(ctx, env, ns, name); err == nil && r >= 1 {
			woke := time.Now()
			if served.IsZero() {
				served = woke
			}
			return wakeTimes{fromSet: woke.Sub(set), fromServed: woke.Sub(served)}
		}
	}
	t.Fatalf("%s/%s not woken 30s after the breach", ns, name)
	return wakeTimes{}
}

func externalAboveZero(body []byte) bool {
	var list struct {
		Items []struct {
			Value resource.Quantity `json:"value"`
		} `json:"items"`
	}
	if json.Unmarshal(body, &list) != nil {
		return false
	}
	for _, it := range list.Items {
		if it.Value.Sign() > 0 {
			return true
		}
	}
	return false
}

func requireStatus(t *testing.T, ctx context.Context, env *framework.Env, ns, name, state string, action scaletozero.Action) {
	t.Helper()
	eventually(t, ctx, 20*time.Second, ns+"/"+name+" status "+state, func(ctx context.Context) error {
		h, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var st scaletozero.Status
		if err := json.Unmarshal([]byte(h.Annotations[scaletozero.AnnotationStatus]), &st); err != nil {
			return fmt.Errorf("status annotation %q: %w", h.Annotations[scaletozero.AnnotationStatus], err)
		}
		if st.State != state || st.LastAction != action || st.Valid.Status != "True" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

func requireEvent(t *testing.T, ctx context.Context, env *framework.Env, ns, reason string) {
	t.Helper()
	eventually(t, ctx, 20*time.Second, "a "+reason+" event in "+ns, func(ctx context.Context) error {
		list, err := env.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.ReportingController == "promscaler-autoscaler" && e.Regarding.Kind == "HorizontalPodAutoscaler" {
				return nil
			}
		}
		return fmt.Errorf("%d events, none %s", len(list.Items), reason)
	})
}

// actionEvents counts the autoscalers' events in ns that report a /scale
// write (each occurrence of an event series counts).
func actionEvents(t *testing.T, ctx context.Context, env *framework.Env, ns string) int {
	t.Helper()
	list, err := env.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.ReportingController != "promscaler-autoscaler" {
			continue
		}
		switch scaletozero.Action(e.Reason) {
		case scaletozero.ActionScaleToZero, scaletozero.ActionActivate, scaletozero.ActionFallback:
			if !strings.Contains(e.Note, "scaled ") {
				continue // a fallback already at its count: reported, not written
			}
			if e.Series != nil {
				n += int(e.Series.Count)
			} else {
				n++
			}
		}
	}
	return n
}

// restartProcess runs a stopped server's command line again and waits
// for readyURL.
func restartProcess(t *testing.T, ctx context.Context, env *framework.Env, name string, args []string, readyURL string) {
	t.Helper()
	logFile, err := os.Create(filepath.Join(env.LogDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done); _ = logFile.Close() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	eventually(t, ctx, time.Minute, name+" ready", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	})
}

// auditWrite is one successful write in the audit log.
type auditWrite struct {
	User, Verb, Resource, Subresource, Namespace, Name string
	At                                                 time.Time
}

func readAudit(t *testing.T, path string) []auditWrite {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	defer f.Close()
	var out []auditWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if ev.Stage != auditv1.StageResponseComplete || ev.ResponseStatus == nil || ev.ResponseStatus.Code < 200 || ev.ResponseStatus.Code > 299 {
			continue
		}
		w := auditWrite{User: ev.User.Username, Verb: ev.Verb, At: ev.RequestReceivedTimestamp.Time}
		if r := ev.ObjectRef; r != nil {
			w.Resource, w.Subresource, w.Namespace, w.Name = r.Resource, r.Subresource, r.Namespace, r.Name
		}
		out = append(out, w)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
