//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// The comparison runs the same scenarios twice against the same adapter and
// Prometheus: once with kube-controller-manager's HPA controller, once with
// promscaler's autoscaler (kube-controller-manager then runs only the
// deployment and replicaset controllers). Each scenario steps a gauge-backed
// metric through load levels; both runs must produce the same sequence of
// replica counts and, once each level has settled, the same conditions.

const (
	compareSyncPeriod = 2 * time.Second
	// compareStabilization is given to both controllers so scale-downs fit
	// the test.
	compareStabilization = 10 * time.Second
	// compareHold is how long a level must stay unchanged before its
	// conditions are read: longer than the stabilization window, so both
	// controllers' recommendation histories hold only the steady state.
	compareHold = 12 * time.Second
)

// compareAdapterConfig serves the gauges the scenarios drive: an external
// metric summed over its series, and an object metric of a Service.
const compareAdapterConfig = `rules:
- seriesQuery: '{__name__="service_connections",namespace!="",service!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      service: {resource: service}
  name: {matches: "^(.*)$", as: "${1}"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
` + queueExternalRules

// queueExternalRules serves the external metric queue_messages of a
// namespace, summed over its series (the compare and coexist tests').
const queueExternalRules = `externalRules:
- seriesQuery: '{__name__="queue_messages",namespace!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
  name: {matches: "^(.*)$", as: "${1}"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`

// compareRBAC is the autoscaler's ClusterRole and lease Role from
// docs/autoscaler.md, bound to the user the autoscaler runs as.
const compareRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: promscaler-autoscaler
rules:
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers/status"]
  verbs: ["update"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["patch"]
- apiGroups: ["*"]
  resources: ["*/scale"]
  verbs: ["get", "update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
- apiGroups: ["metrics.k8s.io"]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: ["custom.metrics.k8s.io", "external.metrics.k8s.io"]
  resources: ["*"]
  verbs: ["get", "list"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: promscaler-autoscaler-leader-election
  namespace: kube-system
rules:
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: ["promscaler-autoscaler"]
  verbs: ["get", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: promscaler-autoscaler
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: promscaler-autoscaler}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: promscaler-autoscaler}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: promscaler-autoscaler-leader-election
  namespace: kube-system
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: promscaler-autoscaler-leader-election}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: promscaler-autoscaler}
`

// compareStep is one load level and the replica count it settles at.
type compareStep struct {
	load float64
	want int32
}

// compareScenario is one HPA driven through load levels.
type compareScenario struct {
	name        string
	start       int32 // the Deployment's replicas before the HPA exists
	minReplicas int32
	maxReplicas int32
	metric      autoscalingv2.MetricSpec
	behavior    *autoscalingv2.HorizontalPodAutoscalerBehavior
	// drive sets the metric's gauge in namespace ns.
	drive func(x *exporter.Exporter, ns string, load float64) error
	steps []compareStep
}

// compareResult is what one controller did in one scenario.
type compareResult struct {
	// Replicas is the Deployment's spec.replicas over time, without
	// consecutive repeats.
	Replicas []int32
	// Conditions are, per step once settled, each condition as
	// "type=status reason: message".
	Conditions [][]string
}

func driveQueue(x *exporter.Exporter, ns string, load float64) error {
	return x.Set(exporter.Series{Name: "queue_messages", Labels: map[string]string{"namespace": ns, "queue": "jobs"}, Value: load})
}

func driveConnections(x *exporter.Exporter, ns string, load float64) error {
	return x.Set(exporter.Series{Name: "service_connections", Labels: map[string]string{"namespace": ns, "service": "web"}, Value: load})
}

func compareScenarios() []compareScenario {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	external := func(target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}},
			Target: target,
		}}
	}
	zero := int32(0)
	return []compareScenario{
		{
			// No behavior: the scale-up limit max(2×current, 4), then the
			// downscale stabilization window.
			name: "external-average-value", start: 1, minReplicas: 1, maxReplicas: 10,
			metric: external(autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("10")}),
			drive:  driveQueue,
			steps:  []compareStep{{load: 100, want: 10}, {load: 35, want: 4}, {load: 5, want: 1}},
		},
		{
			// behavior policies: +2 pods per 10s up, -50% per 10s down.
			name: "external-value-behavior", start: 2, minReplicas: 1, maxReplicas: 10,
			metric: external(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("100")}),
			behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero,
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 10}}},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero,
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 50, PeriodSeconds: 10}}},
			},
			drive: driveQueue,
			steps: []compareStep{{load: 450, want: 10}, {load: 20, want: 1}},
		},
		{
			// An Object metric with a Value target: maxReplicas reached
			// (ScalingLimited TooManyReplicas), a level within tolerance,
			// then down.
			name: "object-value", start: 2, minReplicas: 2, maxReplicas: 6,
			metric: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
				DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "web"},
				Metric:          autoscalingv2.MetricIdentifier{Name: "service_connections"},
				Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("50")},
			}},
			drive: driveConnections,
			steps: []compareStep{{load: 150, want: 6}, {load: 52, want: 6}, {load: 10, want: 2}},
		},
		{
			// minReplicas 0 with an External metric (HPAScaleToZero, on in
			// 1.37): to zero and back.
			name: "external-scale-to-zero", start: 1, minReplicas: 0, maxReplicas: 5,
			metric: external(autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("10")}),
			drive:  driveQueue,
			steps:  []compareStep{{load: 20, want: 2}, {load: 0, want: 0}, {load: 30, want: 3}},
		},
	}
}

// TestAutoscalerMatchesKubeControllerManager runs every scenario with
// kube-controller-manager's HPA controller, then with promscaler's
// autoscaler, and compares what they did.
func TestAutoscalerMatchesKubeControllerManager(t *testing.T) {
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	if _, err := os.Stat(env.Bin("autoscaler")); err != nil {
		t.Fatalf("autoscaler binary: %v (run `make build`)", err)
	}
	cfgFile := filepath.Join(t.TempDir(), "compare-config.yaml")
	if err := os.WriteFile(cfgFile, []byte(compareAdapterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: cfgFile, PrometheusURL: prom.URL})
	hpaFlags := []string{
		"--mode=full",
		"--horizontal-pod-autoscaler-sync-period=" + compareSyncPeriod.String(),
		"--horizontal-pod-autoscaler-downscale-stabilization=" + compareStabilization.String(),
	}
	scenarios := compareScenarios()

	kcm := env.MustStartControllerManager(t, framework.ControllerManagerConfig{
		Controllers:   []string{framework.HPAController, framework.DeploymentController, framework.ReplicaSetController},
		HPASyncPeriod: compareSyncPeriod,
		ExtraArgs:     hpaFlags[2:],
	})
	// Beside it, the autoscaler in --dry-run (events and /metrics only; the
	// annotation would race kube-controller-manager's status writes): it
	// must never write /scale or status, and decide what
	// kube-controller-manager decided.
	applyAutoscalerRBAC(t, env)
	dryRun := startAutoscaler(t, env, false, append(hpaFlags, "--dry-run"))
	want := runCompareScenarios(t, env, x, "kcm", scenarios, dryRun.metricsURL)
	checkDryRunWrites(t, dryRun.metricsURL)
	dryRun.stop()
	kcm.Stop(10 * time.Second)
	if t.Failed() {
		t.FailNow()
	}

	env.MustStartControllerManager(t, framework.ControllerManagerConfig{
		Controllers:   []string{framework.DeploymentController, framework.ReplicaSetController},
		HPASyncPeriod: compareSyncPeriod,
	})
	startAutoscaler(t, env, true, append(hpaFlags, "--leader-elect-resource-namespace=kube-system"))
	got := runCompareScenarios(t, env, x, "ours", scenarios, "")
	// The rescales of the second run are the autoscaler's: its events say so.
	requireRescaleEvent(t, env, "ours-"+scenarios[0].name, "promscaler-autoscaler")

	for i, sc := range scenarios {
		if diff := cmp.Diff(want[i], got[i]); diff != "" {
			t.Errorf("%s: promscaler's autoscaler differs from kube-controller-manager (-kcm +ours):\n%s", sc.name, diff)
		} else {
			t.Logf("%s: both controllers went through replicas %v", sc.name, got[i].Replicas)
		}
	}
}

// requireRescaleEvent checks that ns has a SuccessfulRescale event reported
// by controller (events.k8s.io).
func requireRescaleEvent(t *testing.T, env *framework.Env, ns, controller string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	eventually(t, ctx, 20*time.Second, "a SuccessfulRescale event from "+controller+" in "+ns, func(ctx context.Context) error {
		list, err := env.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Reason == "SuccessfulRescale" && e.ReportingController == controller {
				return nil
			}
			seen = append(seen, e.Reason+"/"+e.ReportingController)
		}
		return fmt.Errorf("events: %v", seen)
	})
}

// runCompareScenarios runs every scenario at once, each in its own
// namespace (prefix-<name>), and deletes the HPAs afterwards so the next
// controller does not act on them.
// dryRunMetrics, if set, is the /metrics URL of a dry-run autoscaler whose
// desired replicas must match each settled level.
func runCompareScenarios(t *testing.T, env *framework.Env, x *exporter.Exporter, prefix string, scenarios []compareScenario, dryRunMetrics string) []compareResult {
	t.Helper()
	ctx := ctxFor(t, 10*time.Minute)
	results := make([]compareResult, len(scenarios))
	var wg sync.WaitGroup
	for i := range scenarios {
		wg.Go(func() {
			ns := prefix + "-" + scenarios[i].name
			res, err := runCompareScenario(ctx, env, x, ns, scenarios[i], dryRunMetrics)
			if err != nil {
				t.Errorf("%s (%s): %v", scenarios[i].name, prefix, err)
			}
			results[i] = res
			if err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting HPA %s/web: %v", ns, err)
			}
		})
	}
	wg.Wait()
	return results
}

func runCompareScenario(ctx context.Context, env *framework.Env, x *exporter.Exporter, ns string, sc compareScenario, dryRunMetrics string) (compareResult, error) {
	var res compareResult
	if err := env.EnsureNamespace(ctx, ns); err != nil {
		return res, err
	}
	podLabels := map[string]string{"app": "web"}
	env.RunPodReadier(ctx, ns, labels.SelectorFromSet(podLabels), time.Second)
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: podLabels, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	start := sc.start
	if err := env.CreateDeployment(ctx, ns, "web", start, podLabels); err != nil {
		return res, err
	}
	if err := sc.drive(x, ns, sc.steps[0].load); err != nil {
		return res, err
	}
	// Let Prometheus scrape the first level before the HPA looks.
	time.Sleep(3 * time.Second)

	// Record spec.replicas until the scenario ends.
	recCtx, stopRec := context.WithCancel(ctx)
	var (
		recMu   sync.Mutex
		recDone = make(chan struct{})
	)
	res.Replicas = []int32{start}
	go func() {
		defer close(recDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if d, err := env.Client.AppsV1().Deployments(ns).Get(recCtx, "web", metav1.GetOptions{}); err == nil && d.Spec.Replicas != nil {
				recMu.Lock()
				if last := res.Replicas[len(res.Replicas)-1]; last != *d.Spec.Replicas {
					res.Replicas = append(res.Replicas, *d.Spec.Replicas)
				}
				recMu.Unlock()
			}
			select {
			case <-recCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	minR := sc.minReplicas
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    &minR,
			MaxReplicas:    sc.maxReplicas,
			Metrics:        []autoscalingv2.MetricSpec{sc.metric},
			Behavior:       sc.behavior,
		},
	}
	if _, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		stopRec()
		<-recDone
		return res, fmt.Errorf("creating the HPA: %w", err)
	}
	var stepErr error
	for i, step := range sc.steps {
		if err := sc.drive(x, ns, step.load); err != nil {
			stepErr = err
			break
		}
		conds, err := settle(ctx, env, ns, step.want)
		if err != nil {
			stepErr = fmt.Errorf("step %d (load %v): %w", i, step.load, err)
			break
		}
		if dryRunMetrics != "" {
			if err := checkDryRunDecision(ctx, dryRunMetrics, ns, step.want); err != nil {
				stepErr = fmt.Errorf("step %d (load %v): dry run: %w", i, step.load, err)
				break
			}
		}
		res.Conditions = append(res.Conditions, conds)
	}
	stopRec()
	<-recDone
	recMu.Lock()
	defer recMu.Unlock()
	return res, stepErr
}

// settle waits until the Deployment and the HPA status agree on want and
// stay so for compareHold, then returns the HPA's conditions.
func settle(ctx context.Context, env *framework.Env, ns string, want int32) ([]string, error) {
	deadline := time.Now().Add(3 * time.Minute)
	var (
		since time.Time
		last  string
	)
	for time.Now().Before(deadline) {
		d, derr := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		h, herr := env.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		switch {
		case derr != nil || herr != nil:
			last = fmt.Sprintf("reading: %v %v", derr, herr)
			since = time.Time{}
		case *d.Spec.Replicas != want || h.Status.DesiredReplicas != want || h.Status.CurrentReplicas != want:
			last = fmt.Sprintf("deployment %d, HPA current %d desired %d; conditions %v", *d.Spec.Replicas,
				h.Status.CurrentReplicas, h.Status.DesiredReplicas, conditionLines(h))
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= compareHold:
			return conditionLines(h), nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("not settled at %d replicas: %s", want, last)
}

// checkDryRunDecision waits until the dry-run autoscaler's
// promscaler_autoscaler_desired_replicas of the settled HPA is want.
func checkDryRunDecision(ctx context.Context, metricsURL, ns string, want int32) error {
	line := fmt.Sprintf(`promscaler_autoscaler_desired_replicas{hpa="web",namespace=%q} %d`, ns, want)
	var last string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		body, err := getText(ctx, metricsURL)
		if err != nil {
			return err
		}
		if hasLine(body, line) {
			return nil
		}
		last = grepLines(body, fmt.Sprintf("namespace=%q", ns))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("want %q, the dry run exports:\n%s", line, last)
}

// checkDryRunWrites checks from its /metrics that the dry-run autoscaler
// decided rescales but wrote neither /scale nor any status.
func checkDryRunWrites(t *testing.T, metricsURL string) {
	t.Helper()
	body, err := getText(ctxFor(t, 10*time.Second), metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	if got := grepLines(body, "promscaler_autoscaler_status_updates_total{"); got != "" {
		t.Errorf("the dry run wrote HPA status:\n%s", got)
	}
	if got := grepLines(body, `result="success"`) + grepLines(body, `result="error"`); strings.Contains(got, "scale_operations_total") {
		t.Errorf("the dry run updated /scale:\n%s", got)
	}
	if !strings.Contains(body, `result="dry_run"`) {
		t.Errorf("the dry run decided no rescale at all:\n%s", grepLines(body, "promscaler_autoscaler_"))
	}
}

func getText(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// grepLines returns the non-comment lines of text containing substr.
func grepLines(text, substr string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "#") && strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func conditionLines(h *autoscalingv2.HorizontalPodAutoscaler) []string {
	var out []string
	for _, c := range h.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return out
}

// applyAutoscalerRBAC applies the documented RBAC for the user
// "promscaler-autoscaler".
func applyAutoscalerRBAC(t *testing.T, env *framework.Env) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	rbac := filepath.Join(t.TempDir(), "autoscaler-rbac.yaml")
	if err := os.WriteFile(rbac, []byte(compareRBAC), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(ctx, "apply", "-f", rbac); err != nil {
		t.Fatalf("applying the autoscaler RBAC: %v\n%s", err, out)
	}
}

// runningAutoscaler is an autoscaler process of the test.
type runningAutoscaler struct {
	metricsURL string
	// stop stops it (the test's cleanup does too).
	stop func()
}

// startAutoscaler runs the autoscaler binary as the user
// "promscaler-autoscaler" (see applyAutoscalerRBAC) and waits until it has
// synced (and, with leader election, holds the lease).
func startAutoscaler(t *testing.T, env *framework.Env, leaderElect bool, flags []string) runningAutoscaler {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	kubeconfig, err := env.UserKubeconfig("promscaler-autoscaler")
	if err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	name := "autoscaler"
	if !leaderElect {
		name = "autoscaler-dry-run"
	}
	logPath := filepath.Join(env.LogDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(port),
		"--leader-elect=" + strconv.FormatBool(leaderElect),
		"-v=4",
	}, flags...)
	cmd := exec.Command(env.Bin("autoscaler"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the autoscaler: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
			_ = logFile.Close()
			if t.Failed() {
				if b, err := os.ReadFile(logPath); err == nil {
					tail := b
					if len(tail) > 8000 {
						tail = tail[len(tail)-8000:]
					}
					t.Logf("%s log (tail):\n%s", name, tail)
				}
			}
		})
	}
	t.Cleanup(stop)
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	hc := &http.Client{Timeout: 5 * time.Second}
	eventually(t, ctx, 45*time.Second, name+" synced", func(ctx context.Context) error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("%s exited: %v", name, err)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		// "ok" alone: active with synced caches (a standby says more).
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
			return fmt.Errorf("/readyz: %s %s", resp.Status, body)
		}
		if !leaderElect {
			return nil
		}
		lease, err := env.Client.CoordinationV1().Leases("kube-system").Get(ctx, "promscaler-autoscaler", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return fmt.Errorf("lease not held")
		}
		return nil
	})
	return runningAutoscaler{metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", port), stop: stop}
}
