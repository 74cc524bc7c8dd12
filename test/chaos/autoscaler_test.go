//go:build e2e && chaos

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// The autoscaler faults: two replicas of the autoscaler (--mode=full,
// leader election) scale one Deployment on the external metric
// chaos_queue{queue="scale"}, which the suite flips every flipEvery
// between values asking for 3 and 5 replicas. Replica a runs as the
// component's ServiceAccount, replica b as a second user bound to the same
// roles, so the apiserver's audit log names the writer of every /scale.
const (
	scaleNamespace = "chaos-scale"
	scaleTarget    = "app"
	flipEvery      = 8 * time.Second
	leaseDuration  = 4 * time.Second
	autoscalerA    = "system:serviceaccount:promscaler:promscaler-autoscaler"
	autoscalerB    = framework.SecondAutoscalerUser
)

// autoscalerBRBAC binds the component's roles to the second replica's user,
// and gives both users what --mode=full needs beyond the shipped
// (coexist) ClusterRole: pods (readiness and selectors) and HPA status.
const autoscalerBRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: chaos-autoscaler-full
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]
  verbs: ["get", "list", "watch", "update", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: chaos-autoscaler-full
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: chaos-autoscaler-full}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: promscaler-autoscaler-b}
- {kind: ServiceAccount, name: promscaler-autoscaler, namespace: promscaler}
---
` + framework.SecondAutoscalerRBAC

var autoscalerFlags = []string{
	"--mode=full",
	"--horizontal-pod-autoscaler-sync-period=1s",
	"--leader-elect-resource-namespace=promscaler",
	"--leader-elect-lease-duration=" + leaseDuration.String(),
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=500ms",
	"--leader-elect-fence-margin=1s",
	"--api-request-timeout=5s",
}

// autoscalers is the running pair and the flipping metric.
type autoscalers struct {
	s        *stack
	replicas map[string]*replica // by user
	mu       sync.Mutex
	flips    []time.Time
	n        int
}

type replica struct {
	name, user string
	metricsURL string
	p          *framework.Process
	// gate is in front of kube-apiserver for this replica.
	gate *tcpGate
}

func (s *stack) startAutoscalers(t *testing.T, ctx context.Context) *autoscalers {
	t.Helper()
	if _, err := os.Stat(s.env.Bin("autoscaler")); err != nil {
		t.Fatalf("autoscaler binary: %v (run `make build`)", err)
	}
	if out, err := s.env.Kubectl(ctx, "apply", "-f", filepath.Join(s.env.RepoRoot, "deploy", "components", "autoscaler", "rbac.yaml")); err != nil {
		t.Fatalf("applying the autoscaler's RBAC: %v\n%s", err, out)
	}
	extra := filepath.Join(t.TempDir(), "rbac-b.yaml")
	if err := os.WriteFile(extra, []byte(autoscalerBRBAC), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := s.env.Kubectl(ctx, "apply", "-f", extra); err != nil {
		t.Fatalf("binding the second replica: %v\n%s", err, out)
	}
	if err := s.env.EnsureNamespace(ctx, scaleNamespace); err != nil {
		t.Fatal(err)
	}
	a := &autoscalers{s: s, replicas: map[string]*replica{}}
	a.flip(t)
	podLabels := map[string]string{"app": scaleTarget}
	one := int32(1)
	if _, err := s.env.Client.AppsV1().Deployments(scaleNamespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: scaleTarget},
		Spec:       appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: podLabels}, Template: framework.PodTemplate(podLabels)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ten := resource.MustParse("10")
	zero := int32(0)
	if _, err := s.env.Client.AutoscalingV2().HorizontalPodAutoscalers(scaleNamespace).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: scaleTarget},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: scaleTarget},
			MinReplicas:    &one,
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: truthExternal, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "scale"}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &ten},
			}}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &zero},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.start(t, "autoscaler-a", autoscalerA)
	if _, err := a.waitLeader(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	a.start(t, "autoscaler-b", autoscalerB)
	go func() {
		tick := time.NewTicker(flipEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				a.flip(t)
			}
		}
	}()
	return a
}

// flip switches the metric between 25 (3 replicas) and 45 (5 replicas).
func (a *autoscalers) flip(t *testing.T) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := 25.0
	if a.n%2 == 1 {
		v = 45
	}
	a.n++
	if err := a.s.x.Set(exporter.Series{Name: truthExternal, Labels: map[string]string{"namespace": scaleNamespace, "queue": "scale"}, Value: v}); err != nil {
		t.Error(err)
	}
	a.flips = append(a.flips, time.Now())
}

func (a *autoscalers) start(t *testing.T, name, user string) *replica {
	t.Helper()
	groups := []string{"system:authenticated"}
	if strings.HasPrefix(user, "system:serviceaccount:") {
		groups = append(groups, "system:serviceaccounts", "system:serviceaccounts:promscaler")
	}
	kubeconfig, err := a.s.env.UserKubeconfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, gate := gatedKubeconfig(t, kubeconfig)
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{a.s.env.Bin("autoscaler"), "--kubeconfig=" + kubeconfig, "--metrics-bind-address=127.0.0.1:" + strconv.Itoa(port), "-v=2"}, autoscalerFlags...)
	r := &replica{name: name, user: user, metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", port), p: startProc(t, a.s.env, name, args), gate: gate}
	a.mu.Lock()
	a.replicas[user] = r
	a.mu.Unlock()
	return r
}

func (r *replica) leads(ctx context.Context) bool {
	return framework.AutoscalerLeads(ctx, r.metricsURL)
}

// waitLeader waits until one live replica leads.
func (a *autoscalers) waitLeader(ctx context.Context, timeout time.Duration, not ...*replica) (*replica, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		a.mu.Lock()
		rs := make([]*replica, 0, len(a.replicas))
		for _, r := range a.replicas {
			rs = append(rs, r)
		}
		a.mu.Unlock()
	next:
		for _, r := range rs {
			for _, n := range not {
				if r == n {
					continue next
				}
			}
			if r.leads(ctx) {
				return r, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("no autoscaler replica leads after %v", timeout)
}

// auditEvent is what the suite reads of one kube-apiserver audit event.
type auditEvent struct {
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	ObjectRef struct {
		Resource, Namespace, Name, Subresource string
	} `json:"objectRef"`
	ResponseStatus  struct{ Code int } `json:"responseStatus"`
	RequestReceived time.Time          `json:"requestReceivedTimestamp"`
}

// auditEvents reads the completed requests (stage ResponseComplete) of
// kube-apiserver's audit log that keep says to keep.
func (s *stack) auditEvents(t *testing.T, keep func(auditEvent) bool) []auditEvent {
	t.Helper()
	f, err := os.Open(s.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" || !keep(ev) {
			continue
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the audit log: %v", err)
	}
	return out
}

// scaleWrite is one /scale write from the audit log.
type scaleWrite struct {
	at   time.Time
	user string
}

// scaleWrites lists the successful /scale writes of the scaled namespace.
func (s *stack) scaleWrites(t *testing.T) []scaleWrite {
	t.Helper()
	evs := s.auditEvents(t, func(ev auditEvent) bool {
		return ev.ObjectRef.Namespace == scaleNamespace && ev.ObjectRef.Resource == "deployments" &&
			ev.ObjectRef.Subresource == "scale" && ev.ResponseStatus.Code/100 == 2
	})
	out := make([]scaleWrite, len(evs))
	for i, ev := range evs {
		out[i] = scaleWrite{at: ev.RequestReceived, user: ev.User.Username}
	}
	return out
}

// doubleWrites counts flip periods with more than one /scale write (each
// flip changes the desired replicas once: one write is expected) and the
// writes by stale after since (a replica resumed after losing its lease).
func (a *autoscalers) doubleWrites(t *testing.T, from, to time.Time, stale string, since time.Time) (writes, doubles, staleWrites int) {
	ws := a.s.scaleWrites(t)
	a.mu.Lock()
	flips := append([]time.Time(nil), a.flips...)
	a.mu.Unlock()
	perPeriod := map[int]int{}
	for _, w := range ws {
		if w.at.Before(from) || w.at.After(to) {
			continue
		}
		writes++
		if stale != "" && w.user == stale && !w.at.Before(since) {
			staleWrites++
		}
		k := -1
		for i, f := range flips {
			if !w.at.Before(f) {
				k = i
			}
		}
		perPeriod[k]++
	}
	for _, n := range perPeriod {
		if n > 1 {
			doubles += n - 1
		}
	}
	return writes, doubles, staleWrites
}

func (a *autoscalers) leader(t *testing.T, ctx context.Context) *replica {
	t.Helper()
	r, err := a.waitLeader(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// autoscalerFaults kill and pause the leader.
func autoscalerFaults(as func(t *testing.T, s *stack) *autoscalers) []fault {
	return []fault{
		{name: "autoscaler-leader-killed", does: "Two autoscaler replicas (--mode=full, lease 4 s) scale a Deployment on an external metric that flips every 8 s; the leader is killed with SIGKILL; the other must take over and no /scale write may be doubled (apiserver audit log).",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				a := as(t, fx.s)
				leader := a.leader(t, fx.ctx)
				from := time.Now()
				_ = syscall.Kill(-leader.p.Pid(), syscall.SIGKILL)
				<-leader.p.Done()
				next, err := a.waitLeader(fx.ctx, 30*time.Second, leader)
				if err != nil {
					t.Error(err)
					return time.Now(), err.Error()
				}
				failover := time.Since(from)
				end := time.Now()
				time.Sleep(2 * flipEvery)
				writes, doubles, _ := a.doubleWrites(t, from, time.Now(), "", time.Time{})
				if doubles > 0 {
					t.Errorf("%d double /scale writes", doubles)
				}
				if writes == 0 {
					t.Errorf("no /scale write after the failover: the new leader did not scale (the fault proves nothing)")
				}
				a.start(t, leader.name+"-2", leader.user)
				return end, fmt.Sprintf("failover %v (%s took the lease); /scale writes in the next %v: %d, double writes %d",
					failover.Round(100*time.Millisecond), next.name, (failover + 2*flipEvery).Round(time.Second), writes, doubles)
			}},
		{name: "autoscaler-leader-paused", does: "The autoscaler leader is stopped with SIGSTOP for 3 lease durations (the other replica takes the lease), then resumed with SIGCONT: it must write nothing more, neither /scale (fencing) nor the Lease (no release of a lease it lost), and exit; the live leader must keep leading.",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) { return pausedLeader(t, fx, as(t, fx.s)) }},
	}
}

// autoscalers starts the autoscaler pair and its workload once per stack.
func (s *stack) autoscalers(t *testing.T) *autoscalers {
	t.Helper()
	if s.as == nil {
		ctx, cancel := context.WithCancel(context.Background())
		s.t.Cleanup(cancel)
		s.as = s.startAutoscalers(t, ctx)
	}
	return s.as
}

// pausedLeader pauses the leader past its lease, resumes it once the other
// replica leads, and checks what the stale leader wrote (audit log: /scale
// and the Lease) and that the live leader keeps running and leading.
func pausedLeader(t *testing.T, fx *faultRun, a *autoscalers) (time.Time, string) {
	leader := a.leader(t, fx.ctx)
	from := time.Now()
	_ = syscall.Kill(leader.p.Pid(), syscall.SIGSTOP)
	next, err := a.waitLeader(fx.ctx, 30*time.Second, leader)
	if err != nil {
		_ = syscall.Kill(leader.p.Pid(), syscall.SIGCONT)
		t.Error(err)
		return time.Now(), err.Error()
	}
	failover := time.Since(from)
	if held := time.Since(from); held < 3*leaseDuration {
		time.Sleep(3*leaseDuration - held)
	}
	// The resumed process finds its connection to kube-apiserver silent
	// (a resumed VM's network) for longer than the renew deadline (3 s):
	// the renewal in flight fails without reading the Lease, so client-go's
	// release runs on the record observed before the pause in every run,
	// not only when that race goes so. The release's own read (timeout:
	// the renew deadline, from the renewal's failure or from the fence
	// stopping the workers about 1 s after SIGCONT) gets through at 3.5 s.
	leader.gate.hold()
	resumed := time.Now()
	_ = syscall.Kill(leader.p.Pid(), syscall.SIGCONT)
	time.Sleep(3500 * time.Millisecond)
	leader.gate.release()
	exit := "still running 20 s after SIGCONT"
	select {
	case <-leader.p.Done():
		exit = fmt.Sprintf("exited %v after SIGCONT (code %d)", time.Since(resumed).Round(100*time.Millisecond), exitCode(leader.p))
	case <-time.After(20 * time.Second):
		t.Errorf("the resumed stale leader is still running 20 s after SIGCONT")
	}
	// The live leader renews every retry period: 3 lease durations after
	// the resume cover any conflict the stale leader's writes would cause.
	if wait := 3*leaseDuration - time.Since(resumed); wait > 0 {
		time.Sleep(wait)
	}
	live := "kept leading"
	select {
	case <-next.p.Done():
		live = fmt.Sprintf("EXITED (code %d)", exitCode(next.p))
		t.Errorf("the live leader %s exited after the stale leader resumed (code %d)", next.name, exitCode(next.p))
	default:
		if !next.leads(fx.ctx) {
			live = "running but no longer leading"
			t.Errorf("the live leader %s no longer leads after the stale leader resumed", next.name)
		}
	}
	if wait := flipEvery - time.Since(resumed); wait > 0 {
		time.Sleep(wait)
	}
	writes, doubles, stale := a.doubleWrites(t, from, time.Now(), leader.user, resumed)
	if doubles > 0 || stale > 0 {
		t.Errorf("%d double /scale writes, %d by the resumed stale leader", doubles, stale)
	}
	if writes == 0 {
		t.Errorf("no /scale write during the pause: the new leader did not scale (the fault proves nothing)")
	}
	leaseWrites := fx.s.leaseWrites(t, leader.user, resumed)
	if len(leaseWrites) > 0 {
		t.Errorf("the resumed stale leader wrote the Lease %d times: %s", len(leaseWrites), strings.Join(leaseWrites, ", "))
	}
	if len(fx.s.leaseWrites(t, next.user, resumed)) == 0 {
		t.Errorf("no renewal of the live leader in the audit log: the Lease check proves nothing")
	}
	a.start(t, leader.name+"-2", leader.user)
	return resumed, fmt.Sprintf("failover %v (%s took the lease); paused %v; resumed leader %s; Lease writes by it after resume %d; live leader %s; /scale writes %d, double %d, by the stale leader after resume %d",
		failover.Round(100*time.Millisecond), next.name, resumed.Sub(from).Round(100*time.Millisecond), exit, len(leaseWrites), live, writes, doubles, stale)
}

// leaseWrites lists the autoscaler Lease writes (any verb, any answer) by
// user since a time, from the audit log: "verb code" each.
func (s *stack) leaseWrites(t *testing.T, user string, since time.Time) []string {
	t.Helper()
	evs := s.auditEvents(t, func(ev auditEvent) bool {
		return ev.User.Username == user && ev.ObjectRef.Resource == "leases" &&
			ev.ObjectRef.Name == "promscaler-autoscaler" && !ev.RequestReceived.Before(since)
	})
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = fmt.Sprintf("%s %d", ev.Verb, ev.ResponseStatus.Code)
	}
	return out
}
