//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// TestDownstreamSampleAdapter serves promscaler beside custom-metrics-
// apiserver's own sample server (hack/tools.sh sample-adapter) on the real
// aggregator (issue 29): the sample server owns the APIServices first, an
// HPA scales on its metric, and every HPA's metrics are read through the
// aggregator once a second while the APIServices are handed over to
// promscaler, whose downstream it becomes, and while one metric name
// (other-external-metric, routed to the sample server) is moved over to
// promscaler by removing its route. Then: the sample server's metrics are
// forwarded unchanged, promscaler's own are promscaler's, and with the
// sample server killed its metrics answer 503 while promscaler's keep
// their values.
func TestDownstreamSampleAdapter(t *testing.T) {
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	if _, err := os.Stat(env.Tool("sample-adapter")); err != nil {
		t.Fatalf("sample-adapter: %v (run hack/tools.sh sample-adapter)", err)
	}
	ctx := ctxFor(t, 6*time.Minute)
	must := fatalOn(t)
	must(x.Set(exporter.Series{Name: "ds_queue", Labels: map[string]string{"queue": "a"}, Value: 5}))
	// promscaler's own other-external-metric: the sample server's value.
	must(x.Set(exporter.Series{Name: "ds_other", Labels: map[string]string{"queue": "a"}, Value: 44}))
	for _, q := range []string{`ds_queue == 5`, `ds_other == 44`} {
		_, err := prom.WaitForQuery(ctx, q, 1, time.Minute)
		must(err)
	}
	sample, port := startSampleAdapter(t, ctx, env)
	must(env.EnsureNamespace(ctx, framework.AdapterNamespace))
	must(env.RegisterAPIServices(ctx, port, []schema.GroupVersion{framework.CustomMetricsV1Beta1, framework.CustomMetricsV1Beta2, framework.ExternalMetricsV1Beta1}))
	forwarded := emV1beta1 + "/namespaces/default/my-external-metric"
	eventually(t, ctx, time.Minute, "the sample server answering through the aggregator", func(ctx context.Context) error {
		return getAnswer(ctx, env, forwarded).err
	})
	env.MustStartControllerManager(t, framework.ControllerManagerConfig{
		Controllers:   []string{framework.HPAController, framework.DeploymentController, framework.ReplicaSetController},
		HPASyncPeriod: 2 * time.Second,
	})
	// other-external-metric is 44 (the sample server's, then promscaler's): 44/11 = 4 replicas.
	createWorkload(t, ctx, env, "ds-forwarded", "fwd", 1, 1, 10, externalSpec("other-external-metric", "11"), nil)
	waitSpecReplicas(t, ctx, env, "ds-forwarded", "fwd", 4, 2*time.Minute)

	reads := startReader(ctx, env, forwarded)
	hpaReads := startHPAReader(ctx, env)
	dsFile, dsConfig := writeDownstreamConfig(t, env, port)
	_, err := env.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(env.RepoRoot, "deploy", "components", "downstream", "rbac.yaml"))
	must(err)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	must(os.WriteFile(rules, []byte("externalQueries:\n- name: ours_queue\n  query: sum(ds_queue)\n- name: other-external-metric\n  query: sum(ds_other)\n"), 0o644))
	env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: rules, PrometheusURL: prom.URL, ExtraArgs: []string{"--downstream-config=" + dsFile}})
	moveByName(t, ctx, env, dsFile, dsConfig)
	// Reads continue across the hand-over and the move, then for 10 s after.
	time.Sleep(10 * time.Second)
	total, failed := reads.stop()
	t.Logf("hand-over: %d reads of %s once a second, %d failed: %v", total, forwarded, len(failed), failed)
	if len(failed) > 0 || total < 5 {
		t.Errorf("hand-over: %d of %d reads failed, want none", len(failed), total)
	}
	total, failed, per := hpaReads.stop()
	t.Logf("hand-over and move: %d reads of every HPA's metrics once a second (%s), %d failed: %v", total, per, len(failed), failed)
	if len(failed) > 0 || total < 10 {
		t.Errorf("hand-over and move: %d of %d HPA metric reads failed, want none", len(failed), total)
	}

	t.Run("forwarded unchanged", func(t *testing.T) { checkForwarded(t, ctx, env, port) })
	t.Run("custom metric forwarded unchanged", func(t *testing.T) { checkCustomForwarded(t, ctx, env, port) })
	t.Run("ours served by promscaler", func(t *testing.T) { checkOurs(t, ctx, env) })
	t.Run("kube-controller-manager scales on both", func(t *testing.T) { checkScaling(t, ctx, env) })
	t.Run("downstream killed", func(t *testing.T) { checkKilled(t, ctx, env, sample) })
}

// moveByName moves other-external-metric, which both serve and the file
// routes to the sample server, over to promscaler by removing its route:
// the sample server answers it through promscaler until the file is
// re-read, promscaler after.
func moveByName(t *testing.T, ctx context.Context, env *framework.Env, dsFile, dsConfig string) {
	t.Helper()
	path := emV1beta1 + "/namespaces/ds-forwarded/other-external-metric"
	eventually(t, ctx, time.Minute, "other-external-metric routed to the sample server", func(ctx context.Context) error {
		return wantServedBy(ctx, env, path, "sample")
	})
	moved := strings.Replace(dsConfig, "  routes: {external: [other-external-metric]}\n", "", 1)
	if moved == dsConfig {
		t.Fatal("the downstream file has no route to remove")
	}
	if err := os.WriteFile(dsFile, []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, time.Minute, "other-external-metric served by promscaler", func(ctx context.Context) error {
		return wantServedBy(ctx, env, path, "promscaler")
	})
	t.Logf("other-external-metric moved from the sample server to promscaler")
}

// startSampleAdapter runs the sample server as its own user (bound to
// cluster-admin: it is a test fixture) on a free port.
func startSampleAdapter(t *testing.T, ctx context.Context, env *framework.Env) (*framework.Process, int) {
	t.Helper()
	must := fatalOn(t)
	user := "system:serviceaccount:sample:sample-adapter"
	kubeconfig, err := env.UserKubeconfig(user, "system:authenticated")
	must(err)
	_, err = env.Kubectl(ctx, "create", "clusterrolebinding", "sample-adapter", "--clusterrole=cluster-admin", "--user="+user)
	must(err)
	port, err := framework.FreePort()
	must(err)
	dir := filepath.Join(env.Dir, "sample-adapter-certs")
	must(os.MkdirAll(dir, 0o700))
	p, err := env.StartCommand("sample-adapter", []string{env.Tool("sample-adapter"),
		"--secure-port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--cert-dir=" + dir,
		"--lister-kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig})
	must(err)
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 2 * time.Second}
	eventually(t, ctx, time.Minute, "sample-adapter /healthz", func(ctx context.Context) error {
		_, code, err := framework.Get(ctx, hc, fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("HTTP %d", code)
		}
		return err
	})
	return p, port
}

// writeDownstreamConfig names the sample server, reached with a client
// certificate of the adapter's ServiceAccount user (signed by the cluster
// CA, which the sample server's delegated authentication trusts).
func writeDownstreamConfig(t *testing.T, env *framework.Env, port int) (string, string) {
	t.Helper()
	user := "system:serviceaccount:" + framework.AdapterNamespace + ":" + framework.AdapterServiceAccount
	kp, err := env.PKI.ClusterCA.IssueClient(env.PKI.Dir, "adapter-downstream", user, "system:serviceaccounts", "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "downstream.yaml")
	cfg := fmt.Sprintf(`refreshInterval: 1s
downstreams:
- name: sample
  url: https://127.0.0.1:%d
  tls: {insecureSkipVerify: true}
  credentials: {clientCertFile: %s, clientKeyFile: %s}
  timeout: 2s
  breaker: {failures: 1, openFor: 1h}
  routes: {external: [other-external-metric]}
`, port, kp.CertFile, kp.KeyFile)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, cfg
}

// reader reads one path through the aggregator once a second.
type reader struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	total  int
	failed []string
}

func startReader(ctx context.Context, env *framework.Env, path string) *reader {
	ctx, cancel := context.WithCancel(ctx)
	r := &reader{cancel: cancel}
	r.wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			a := getAnswer(ctx, env, path)
			r.mu.Lock()
			if ctx.Err() == nil {
				r.total++
				if a.err != nil {
					r.failed = append(r.failed, fmt.Sprintf("%s HTTP %d: %s", time.Now().UTC().Format(time.TimeOnly), a.code, a.body))
				}
			}
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return r
}

func (r *reader) stop() (int, []string) {
	r.cancel()
	r.wg.Wait()
	return r.total, r.failed
}

// checkForwarded: the sample server's metrics through promscaler are what
// the sample server answers when asked directly.
func checkForwarded(t *testing.T, ctx context.Context, env *framework.Env, port int) {
	must := fatalOn(t)
	direct, err := env.UserRESTConfig("sample-e2e-admin", "system:masters")
	must(err)
	direct.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	direct.Insecure, direct.CAData, direct.CAFile = true, nil, ""
	// (other-external-metric was moved to promscaler.)
	for _, path := range []string{emV1beta1 + "/namespaces/default/my-external-metric"} {
		via := getAnswer(ctx, env, path)
		if via.err != nil {
			t.Errorf("%s through promscaler: %v %s", path, via.err, via.body)
			continue
		}
		raw, err := getDirect(ctx, direct, path)
		must(err)
		name := path[strings.LastIndex(path, "/")+1:]
		gotVia, err := externalValues(via, name)
		must(err)
		gotDirect, err := externalValues(apiAnswer{body: raw, code: 200}, name)
		must(err)
		if err := diffValues(gotDirect, gotVia); err != nil {
			t.Errorf("%s: through promscaler vs directly: %v", path, err)
		}
		t.Logf("%s: %v through promscaler, %v directly", path, gotVia, gotDirect)
	}
}

// checkOurs: promscaler's own metric is promscaler's, and the discovery
// document is promscaler's plus the downstream's (whose placeholder is
// left out).
func checkOurs(t *testing.T, ctx context.Context, env *framework.Env) {
	eventually(t, ctx, time.Minute, "ours_queue = 5", func(ctx context.Context) error {
		got, err := externalValues(getAnswer(ctx, env, emV1beta1+"/namespaces/default/ours_queue"), "ours_queue")
		if err != nil {
			return err
		}
		return diffValues(map[string]string{"": "5"}, got)
	})
	a := getAnswer(ctx, env, emV1beta1)
	var list metav1.APIResourceList
	if err := decodeInto(a, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	if !slices.Contains(names, "ours_queue") || slices.Contains(names, "externalmetrics") {
		t.Errorf("external discovery lists %q, want ours_queue and not the sample server's placeholder", names)
	}
}

// checkKilled kills the sample server: its metrics answer 503 naming it,
// promscaler's keep their value, as fast as before.
func checkKilled(t *testing.T, ctx context.Context, env *framework.Env, sample *framework.Process) {
	before := latencies(ctx, env, emV1beta1+"/namespaces/default/ours_queue", 20)
	if err := syscall.Kill(sample.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-sample.Done()
	a := getAnswer(ctx, env, emV1beta1+"/namespaces/default/my-external-metric")
	if err := a.wantError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, `downstream metrics server "sample"`); err != nil {
		t.Errorf("forwarded metric with the sample server killed: %v", err)
	}
	a = getAnswer(ctx, env, emV1beta1+"/namespaces/default/my-external-metric")
	if err := a.wantError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "known down"); err != nil {
		t.Errorf("forwarded metric once the breaker is open: %v", err)
	}
	after := latencies(ctx, env, emV1beta1+"/namespaces/default/ours_queue", 20)
	t.Logf("ours_queue through the aggregator, 20 reads each: median %v before the kill, %v after (max %v, %v)",
		median(before), median(after), slices.Max(before), slices.Max(after))
	got, err := externalValues(getAnswer(ctx, env, emV1beta1+"/namespaces/default/ours_queue"), "ours_queue")
	if err != nil {
		t.Fatal(err)
	}
	if err := diffValues(map[string]string{"": "5"}, got); err != nil {
		t.Errorf("ours_queue with the sample server killed: %v", err)
	}
}

func latencies(ctx context.Context, env *framework.Env, path string, n int) []time.Duration {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		_ = getAnswer(ctx, env, path)
		out = append(out, time.Since(start))
	}
	return out
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// getDirect GETs path from the server at cfg.Host with cfg's credentials.
func getDirect(ctx context.Context, cfg *rest.Config, path string) ([]byte, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	return body, err
}

// decodeInto decodes a successful answer's JSON body.
func decodeInto(a apiAnswer, v any) error {
	if a.err != nil {
		return fmt.Errorf("HTTP %d: %v: %s", a.code, a.err, a.body)
	}
	return json.Unmarshal(a.body, v)
}

// checkScaling: kube-controller-manager's HPA controller scales one
// Deployment on a forwarded metric (my-external-metric, 42 + 43 from the
// sample server: 85/20 = 5 replicas) and one on promscaler's (ours_queue,
// 5: 5/1 = 5 replicas), both created after the hand-over, through the
// aggregator.
func checkScaling(t *testing.T, ctx context.Context, env *framework.Env) {
	createWorkload(t, ctx, env, "ds-sample", "sample", 1, 1, 10, externalSpec("my-external-metric", "20"), nil)
	createWorkload(t, ctx, env, "ds-ours", "ours", 1, 1, 10, externalSpec("ours_queue", "1"), nil)
	waitSpecReplicas(t, ctx, env, "ds-sample", "sample", 5, 2*time.Minute)
	waitSpecReplicas(t, ctx, env, "ds-ours", "ours", 5, 2*time.Minute)
}

func externalSpec(name, target string) autoscalingv2.MetricSpec {
	q := resource.MustParse(target)
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q},
	}}
}

// checkCustomForwarded writes a custom metric into the sample server (its
// write endpoint, fixed on :8080) and reads it through promscaler and
// directly: the same item, timestamp included.
func checkCustomForwarded(t *testing.T, ctx context.Context, env *framework.Env, port int) {
	must := fatalOn(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:8080/write-metrics/namespaces/default/services/svc1/ds_custom", strings.NewReader(`"300m"`))
	must(err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	must(err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("writing ds_custom into the sample server: HTTP %d", resp.StatusCode)
	}
	path := cmV1beta2 + "/namespaces/default/services/svc1/ds_custom"
	var via, direct cmv1beta2.MetricValueList
	must(decodeInto(getAnswer(ctx, env, path), &via))
	cfg, err := env.UserRESTConfig("sample-e2e-admin", "system:masters")
	must(err)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	cfg.Insecure, cfg.CAData, cfg.CAFile = true, nil, ""
	raw, err := getDirect(ctx, cfg, path)
	must(err)
	must(json.Unmarshal(raw, &direct))
	if diff := cmp.Diff(direct.Items, via.Items); diff != "" || len(via.Items) != 1 || via.Items[0].Value.String() != "300m" {
		t.Errorf("ds_custom through promscaler vs directly (-direct +via):\n%s\nvia: %+v", diff, via.Items)
	}
}
