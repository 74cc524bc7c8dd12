//go:build e2e && bench

package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// hpaUser is kube-controller-manager's HPA controller identity (with
// --use-service-account-credentials, as kubeadm runs it): the bootstrap
// RBAC role system:controller:horizontal-pod-autoscaler lets it read
// custom metrics, and the adapter reviews it with a SubjectAccessReview.
const hpaUser = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"

// hpaRules is the benchmark's one rule, as hpaProvider compiles it.
const hpaRules = `rules:
- seriesQuery: '{__name__="` + hpaMetric + `",namespace!="",pod!=""}'
  resources:
    template: <<.Resource>>
  name:
    matches: ^(.*)_total$
    as: ${1}_per_second
  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)
`

// hpaCluster is the real stack of the adapter target: the adapter binary
// behind kube-apiserver's aggregator, n namespaces of hpaPodsEach pods, and
// the HPA controller's client.
type hpaCluster struct {
	s            *stack
	apiserverPID int
	// hpa talks to kube-apiserver as hpaUser (HTTP/2, one connection, no
	// client-side rate limit).
	hpa *http.Client
}

// startHPACluster creates the namespaces and pods of maxN HPAs, the
// adapter's RBAC and identity, the HPA controller's client, and the rules.
func startHPACluster(ctx context.Context, env *framework.Env, prom *framework.Prometheus, maxN int) (*hpaCluster, error) {
	c := &hpaCluster{s: &stack{env: env, prom: prom}}
	for _, p := range env.Processes() {
		if p.Name == "kube-apiserver" {
			c.apiserverPID = p.Pid()
		}
	}
	if c.apiserverPID == 0 {
		return nil, fmt.Errorf("no kube-apiserver process in the environment")
	}
	if err := createHPAPods(ctx, env, maxN); err != nil {
		return nil, err
	}
	c.s.rules = filepath.Join(env.Dir, "hpa-rules.yaml")
	if err := os.WriteFile(c.s.rules, []byte(hpaRules), 0o644); err != nil {
		return nil, err
	}
	if err := env.EnsureNamespace(ctx, framework.AdapterNamespace); err != nil {
		return nil, err
	}
	if _, err := env.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(env.RepoRoot, "deploy", "base", "rbac.yaml")); err != nil {
		return nil, fmt.Errorf("applying adapter RBAC: %w", err)
	}
	saUser := "system:serviceaccount:" + framework.AdapterNamespace + ":" + framework.AdapterServiceAccount
	var err error
	if c.s.adapterKubeconfig, err = env.UserKubeconfig(saUser, "system:serviceaccounts", "system:serviceaccounts:"+framework.AdapterNamespace, "system:authenticated"); err != nil {
		return nil, err
	}
	if c.s.admin, err = adminClient(env.PKI.Admin); err != nil {
		return nil, err
	}
	kp, err := env.PKI.ClusterCA.IssueClient(env.PKI.Dir, "hpa-controller", hpaUser,
		"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
	if err != nil {
		return nil, err
	}
	tr, err := adminTransport(kp)
	if err != nil {
		return nil, err
	}
	c.hpa = &http.Client{Transport: tr, Timeout: time.Minute}
	return c, nil
}

// createHPAPods creates n namespaces of hpaPodsEach pods labelled
// app=bench (16 creators, no client-side rate limit).
func createHPAPods(ctx context.Context, env *framework.Env, n int) error {
	rc := *env.RESTConfig
	rc.QPS, rc.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(&rc)
	if err != nil {
		return fmt.Errorf("pod creator client: %w", err)
	}
	t0 := time.Now()
	tmpl := framework.PodTemplate(map[string]string{"app": "bench"})
	jobs := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hpaNamespace(i)}}
				if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					fail(fmt.Errorf("creating namespace %s: %w", ns.Name, err))
					continue
				}
				// No serviceaccount controller runs: pods need the default one.
				sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
				if _, err := cs.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					fail(fmt.Errorf("creating the default ServiceAccount of %s: %w", ns.Name, err))
					continue
				}
				for j := range hpaPodsEach {
					pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
					pod.Name, pod.Namespace = fmt.Sprintf("pod-%d", j), ns.Name
					if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
						fail(fmt.Errorf("creating pod %s/%s: %w", ns.Name, pod.Name, err))
					}
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	progress("created %d namespaces of %d pods in %s", n, hpaPodsEach, time.Since(t0).Round(time.Second))
	return nil
}

// hpaAdapter is one leg's adapter: the binary with default flags (sharing
// off with --shared-evaluation-max-age=0), registered as
// custom.metrics.k8s.io/v1beta2 and answering through the aggregator.
type hpaAdapter struct {
	c *hpaCluster
	a *adapterProc
}

var _ hpaTarget = (*hpaAdapter)(nil)

func (c *hpaCluster) startAdapter(ctx context.Context, name string, shared bool) (*hpaAdapter, error) {
	extra := strings.Fields(os.Getenv(EnvHPAAdapterArgs))
	if !shared {
		extra = append(extra, "--shared-evaluation-max-age=0")
	}
	a, err := c.s.startAdapter(name, extra...)
	if err != nil {
		return nil, err
	}
	h := &hpaAdapter{c: c, a: a}
	if _, err := a.waitListed(ctx, c.s.admin, "pods/bench_hpa_requests_per_second", 3*time.Minute); err != nil {
		a.stop()
		return nil, err
	}
	if err := c.s.registerAggregated(ctx, a); err != nil {
		a.stop()
		return nil, err
	}
	// Answering through the aggregator, as the HPA controller.
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := h.get(ctx, 0)
		if err == nil && n == hpaPodsEach {
			return h, nil
		}
		if time.Now().After(deadline) {
			a.stop()
			return nil, fmt.Errorf("pods/* through the aggregator as %s: %d items (err %v), want %d", hpaUser, n, err, hpaPodsEach)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// get sends HPA i's request through kube-apiserver and returns the number
// of pods answered.
func (h *hpaAdapter) get(ctx context.Context, i int) (int, error) {
	u := h.c.s.env.RESTConfig.Host + "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + hpaNamespace(i) +
		"/pods/*/bench_hpa_requests_per_second?labelSelector=app%3Dbench"
	return hpaItems(ctx, h.c.hpa, u)
}

// snapshot reads the CPU of Prometheus, the adapter and kube-apiserver
// (/proc) and the adapter's counters: Prometheus queries sent and
// SubjectAccessReviews sent (apiserver_delegated_authz_request_total).
func (h *hpaAdapter) snapshot(ctx context.Context) (hpaSnapshot, error) {
	var s hpaSnapshot
	var err error
	if s.promCPU, err = cpuSeconds(h.c.s.prom.Process.Pid()); err != nil {
		return s, err
	}
	if s.adapterCPU, err = cpuSeconds(h.a.pid()); err != nil {
		return s, err
	}
	if s.apiserverCPU, err = cpuSeconds(h.c.apiserverPID); err != nil {
		return s, err
	}
	text, err := metricsText(ctx, h.c.s.admin, h.a.url+"/metrics")
	if err != nil {
		return s, err
	}
	s.queries = counters(text, "promscaler_prometheus_request_duration_seconds_count", "endpoint")["query"]
	s.reviews = counters(text, "apiserver_delegated_authz_request_total", "")[""]
	return s, nil
}

// apiserverReviews is kube-apiserver's count of SubjectAccessReviews
// served (apiserver_request_total): read at a leg's ends only, outside the
// CPU it measures, to check the adapter's count.
func (h *hpaAdapter) apiserverReviews(ctx context.Context) float64 {
	text, err := h.c.s.apiserverMetrics(ctx)
	if err != nil {
		progress("%v", err)
		return 0
	}
	return counters(text, "apiserver_request_total", "resource")["subjectaccessreviews"]
}

func (h *hpaAdapter) close(ctx context.Context) {
	h.a.stop()
	if err := h.c.s.env.UnregisterAdapter(ctx, &framework.Adapter{GroupVersions: []schema.GroupVersion{framework.CustomMetricsV1Beta2}}); err != nil {
		progress("%v", err)
	}
}
