//go:build e2e && keda

package e2e

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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// The KEDA workloads of TestDownstreamKEDA: each a Deployment scaled by a
// ScaledObject with a prometheus trigger on the test Prometheus.
var kedaWorkloads = []string{"keda-stays", "keda-moves"}

// TestDownstreamKEDA runs promscaler beside KEDA v2.21 (operator and
// metrics server built from the Go module proxy by hack/tools.sh keda; run
// with `make e2e-keda`, build tags e2e,keda) on the real aggregator and
// kube-controller-manager (issue 29). KEDA owns the external metrics
// APIService first; then, while every HPA's metrics are read through the
// aggregator once a second, the hand-over of docs/downstream.md runs to
// the end and back: promscaler with KEDA as a downstream, the APIService
// switched, KEDA's workloads moved one at a time to their converted HPAs,
// the downstream removed, then all of it backed out. No read may fail.
// Then, with the APIService on promscaler again: KEDA's answers through
// promscaler equal its own, the HPA controller scales on a forwarded KEDA
// metric and on promscaler's, and with KEDA's metrics server killed only
// its metrics answer 503.
func TestDownstreamKEDA(t *testing.T) {
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	ctx := ctxFor(t, 15*time.Minute)
	must := fatalOn(t)
	for name, v := range map[string]float64{"keda_stays_queue": 30, "keda_moves_queue": 20, "ours_queue": 5} {
		must(x.Set(exporter.Series{Name: name, Labels: map[string]string{"queue": "a"}, Value: v}))
	}
	for _, q := range []string{`ours_queue == 5`, `keda_stays_queue == 30`, `keda_moves_queue == 20`} {
		_, err := prom.WaitForQuery(ctx, q, 1, time.Minute)
		must(err)
	}
	env.MustStartControllerManager(t, framework.ControllerManagerConfig{
		Controllers:   []string{framework.HPAController, framework.DeploymentController, framework.ReplicaSetController},
		HPASyncPeriod: 2 * time.Second,
	})
	k := startKEDA(t, ctx, env)
	dir := t.TempDir()
	soFiles := map[string]string{}
	for _, w := range kedaWorkloads {
		podLabels := map[string]string{"app": w}
		env.RunPodReadier(ctx, "default", labels.SelectorFromSet(podLabels), time.Second)
		must(env.CreateDeployment(ctx, "default", w, 1, podLabels))
		soFiles[w] = writeScaledObject(t, dir, w, prom.URL)
		applyScaledObject(t, ctx, env, soFiles[w])
	}
	stays := kedaMetricPath("keda-stays")
	eventually(t, ctx, 2*time.Minute, "KEDA's metric of keda-stays through the aggregator", func(ctx context.Context) error {
		return wantValue(getAnswer(ctx, env, stays), "s0-prometheus", "30")
	})
	// Before the hand-over (docs/downstream.md): the operator must stop
	// writing its CA into the APIService that is about to point elsewhere.
	restart := startHPAReader(ctx, env)
	k.restartOperator(t, ctx, false, stays)
	time.Sleep(5 * time.Second)
	n, f, _ := restart.stop()
	t.Logf("KEDA alone, operator restarted with --enable-apiservice-patching=false: %d reads of its HPAs' metrics from the restart to 5 s after KEDA answered again, %d failed: %v", n, len(f), f)
	ps := startPromscalerBesideKEDA(t, ctx, env, k, prom.URL, dir, soFiles)

	reads := startHPAReader(ctx, env)
	handOverAndBack(t, ctx, env, k, ps, x)
	time.Sleep(10 * time.Second)
	total, failed, per := reads.stop()
	t.Logf("hand-over and back-out: %d reads of every HPA's metrics once a second (%s), %d failed: %v", total, per, len(failed), failed)
	if len(failed) > 0 || total < 30 {
		t.Errorf("hand-over: %d of %d reads failed, want none", len(failed), total)
	}

	must(pointExternalAPIService(ctx, env, framework.AdapterNamespace, framework.AdapterService, ps.port, ps.ca))
	t.Run("kubectl get --raw equals KEDA's own answer", func(t *testing.T) { checkKEDAForwarded(t, ctx, env, k, ps) })
	t.Run("KEDA's metrics server killed", func(t *testing.T) { checkKEDAKilled(t, ctx, env, k) })
}

// kedaMetricPath is the path KEDA's HPA for the ScaledObject so reads.
func kedaMetricPath(so string) string {
	return emV1beta1 + "/namespaces/default/s0-prometheus" + sel("scaledobject.keda.sh/name="+so)
}

// wantValue checks that a is one item of metric with value v.
func wantValue(a apiAnswer, metric, v string) error {
	got, err := externalValues(a, metric)
	if err != nil {
		return err
	}
	return diffValues(map[string]string{"": v}, got)
}

// handOverAndBack is item 5 of issue 29, run while the HPAs are read.
func handOverAndBack(t *testing.T, ctx context.Context, env *framework.Env, k *kedaStack, ps *promscalerSide, x *exporter.Exporter) {
	must := fatalOn(t)
	t.Logf("hand-over: pointing %s at promscaler", externalAPIService)
	must(pointExternalAPIService(ctx, env, framework.AdapterNamespace, framework.AdapterService, ps.port, ps.ca))
	eventually(t, ctx, time.Minute, "KEDA's metric served through promscaler", func(ctx context.Context) error {
		return wantServedBy(ctx, env, kedaMetricPath("keda-stays"), "keda")
	})
	// kube-controller-manager scales on a forwarded KEDA metric (50 / 10)
	// and on promscaler's own (5 / 1).
	createWorkload(t, ctx, env, "default", "ours", 1, 1, 10, externalSpec("ours_queue", "1"), nil)
	must(x.Set(exporter.Series{Name: "keda_stays_queue", Labels: map[string]string{"queue": "a"}, Value: 50}))
	waitSpecReplicas(t, ctx, env, "default", "keda-stays", 5, 2*time.Minute)
	waitSpecReplicas(t, ctx, env, "default", "ours", 5, 2*time.Minute)
	must(wantServedBy(ctx, env, emV1beta1+"/namespaces/default/ours_queue", "promscaler"))

	for _, w := range kedaWorkloads {
		t.Logf("hand-over: moving %s to its converted HPA", w)
		moveToPromscaler(t, ctx, env, w, ps.hpaFiles[w])
		must(wantServedBy(ctx, env, emV1beta1+"/namespaces/default/default-"+w+"-s0-prometheus", "promscaler"))
	}
	t.Logf("hand-over: removing the downstream")
	must(os.WriteFile(ps.dsFile, []byte("refreshInterval: 1s\ndownstreams: []\n"), 0o644))
	time.Sleep(5 * time.Second)

	t.Logf("back-out: adding the downstream again, moving the workloads back to KEDA")
	must(os.WriteFile(ps.dsFile, []byte(ps.dsConfig), 0o644))
	eventually(t, ctx, time.Minute, "the downstream back in promscaler's /readyz", func(ctx context.Context) error {
		return ps.downstreamUp(ctx)
	})
	for _, w := range kedaWorkloads {
		moveBackToKEDA(t, ctx, env, w, ps.soFiles[w])
	}
	must(env.Client.AutoscalingV2().HorizontalPodAutoscalers("default").Delete(ctx, "ours", metav1.DeleteOptions{}))
	// One HPA sync period (2 s here, 15 s by default) for reads already
	// started to end: KEDA would answer them with its 500.
	time.Sleep(3 * time.Second)
	t.Logf("back-out: pointing %s at KEDA again", externalAPIService)
	must(pointExternalAPIService(ctx, env, kedaNS, kedaMetricsService, k.port, []byte(k.file(t, "ca.crt"))))
}

// moveToPromscaler moves one KEDA workload to its converted HPA without a
// moment where an HPA reads a metric nobody serves: pause the ScaledObject
// (KEDA deletes its HPA and leaves the replicas as they are), apply the
// converted HPA, delete the ScaledObject.
func moveToPromscaler(t *testing.T, ctx context.Context, env *framework.Env, w, hpaFile string) {
	t.Helper()
	must := fatalOn(t)
	_, err := env.Kubectl(ctx, "annotate", "scaledobject", w, "autoscaling.keda.sh/paused=true")
	must(err)
	waitHPAGone(t, ctx, env, "keda-hpa-"+w)
	_, err = env.Kubectl(ctx, "apply", "-f", hpaFile)
	must(err)
	_, err = env.Kubectl(ctx, "delete", "scaledobject", w, "--wait=true")
	must(err)
}

// moveBackToKEDA: delete the converted HPA, apply the ScaledObject again;
// KEDA creates its HPA.
func moveBackToKEDA(t *testing.T, ctx context.Context, env *framework.Env, w, soFile string) {
	t.Helper()
	must := fatalOn(t)
	must(env.Client.AutoscalingV2().HorizontalPodAutoscalers("default").Delete(ctx, w, metav1.DeleteOptions{}))
	applyScaledObject(t, ctx, env, soFile)
	eventually(t, ctx, time.Minute, "KEDA's HPA for "+w, func(ctx context.Context) error {
		_, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "keda-hpa-"+w, metav1.GetOptions{})
		return err
	})
}

func waitHPAGone(t *testing.T, ctx context.Context, env *framework.Env, name string) {
	t.Helper()
	eventually(t, ctx, time.Minute, "HPA "+name+" deleted", func(ctx context.Context) error {
		_, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
}

// writeScaledObject writes the ScaledObject of workload w: one prometheus
// trigger on sum(<w>_queue) (with - as _), threshold 10, 1 to 10 replicas
// (so that kube-controller-manager's HPA controller does all the scaling).
func writeScaledObject(t *testing.T, dir, w, promURL string) string {
	t.Helper()
	so := fmt.Sprintf(`apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: %s
  namespace: default
spec:
  scaleTargetRef:
    name: %s
  pollingInterval: 5
  minReplicaCount: 1
  maxReplicaCount: 10
  triggers:
  - type: prometheus
    metadata:
      serverAddress: %s
      query: sum(%s_queue)
      threshold: "10"
`, w, w, promURL, strings.ReplaceAll(w, "-", "_"))
	path := filepath.Join(dir, "so-"+w+".yaml")
	if err := os.WriteFile(path, []byte(so), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func applyScaledObject(t *testing.T, ctx context.Context, env *framework.Env, path string) {
	t.Helper()
	if _, err := env.Kubectl(ctx, "apply", "-f", path); err != nil {
		t.Fatal(err)
	}
}

// checkKEDAKilled kills KEDA's metrics server: its metrics answer 503
// naming it, promscaler's keep their value.
func checkKEDAKilled(t *testing.T, ctx context.Context, env *framework.Env, k *kedaStack) {
	must := fatalOn(t)
	ours := emV1beta1 + "/namespaces/default/ours_queue"
	eventually(t, ctx, time.Minute, "ours_queue through promscaler", func(ctx context.Context) error {
		return wantValue(getAnswer(ctx, env, ours), "ours_queue", "5")
	})
	must(syscall.Kill(k.metrics.Pid(), syscall.SIGKILL))
	<-k.metrics.Done()
	for _, w := range kedaWorkloads {
		a := getAnswer(ctx, env, kedaMetricPath(w))
		if err := a.wantError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, `downstream metrics server "keda"`); err != nil {
			t.Errorf("KEDA's metric of %s with its metrics server killed: %v", w, err)
		}
	}
	for range 10 {
		if err := wantValue(getAnswer(ctx, env, ours), "ours_queue", "5"); err != nil {
			t.Errorf("ours_queue with KEDA's metrics server killed: %v", err)
		}
	}
}
