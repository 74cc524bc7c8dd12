//go:build e2e && keda

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// promscalerSide is promscaler as TestDownstreamKEDA runs it: KEDA as its
// downstream, a serving certificate the APIService's caBundle names, the
// converted ScaledObjects among its rules.
type promscalerSide struct {
	adapter  *framework.Adapter
	port     int
	ca       []byte // the CA of promscaler's serving certificate
	dsFile   string // the downstream file, rewritten to remove and add KEDA
	dsConfig string // its content with KEDA
	hpaFiles map[string]string
	soFiles  map[string]string
	token    string // the adapter's ServiceAccount token file
}

// startPromscalerBesideKEDA converts the ScaledObjects (`autoscaler
// convert-keda`), then starts promscaler with their externalQueries, its
// own ours_queue and KEDA's metrics server as a downstream, reached with
// the adapter's ServiceAccount token (the default credentials; KEDA's
// metrics server authenticates it with a TokenReview) and checked against
// KEDA's CA. No APIService is pointed at it yet.
func startPromscalerBesideKEDA(t *testing.T, ctx context.Context, env *framework.Env, k *kedaStack, promURL, dir string, soFiles map[string]string) *promscalerSide {
	t.Helper()
	must := fatalOn(t)
	ps := &promscalerSide{soFiles: soFiles, hpaFiles: map[string]string{}, dsFile: filepath.Join(dir, "downstream.yaml")}
	rules := filepath.Join(dir, "rules.yaml")
	must(os.WriteFile(rules, []byte("externalQueries:\n- name: ours_queue\n  query: sum(ours_queue)\n"), 0o644))
	var extra []string
	for _, w := range kedaWorkloads {
		queries := filepath.Join(dir, "queries-"+w+".yaml")
		ps.hpaFiles[w] = convertKEDA(t, ctx, env, soFiles[w], queries)
		extra = append(extra, "--config="+queries)
	}
	serving := filepath.Join(dir, "promscaler-serving")
	must(framework.WriteServingSet(serving, framework.AdapterService+"."+framework.AdapterNamespace+".svc"))
	var err error
	ps.ca, err = os.ReadFile(filepath.Join(serving, "ca.crt"))
	must(err)

	must(env.EnsureNamespace(ctx, framework.AdapterNamespace))
	for _, f := range []string{"deploy/base/rbac.yaml", "deploy/components/downstream/rbac.yaml"} {
		_, err := env.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(env.RepoRoot, f))
		must(err)
	}
	token, err := env.Kubectl(ctx, "create", "token", framework.AdapterServiceAccount, "-n", framework.AdapterNamespace, "--duration=2h")
	must(err)
	ps.token = filepath.Join(dir, "token")
	must(os.WriteFile(ps.token, []byte(strings.TrimSpace(token)), 0o600))
	ps.dsConfig = fmt.Sprintf(`refreshInterval: 1s
downstreams:
- name: keda
  url: https://127.0.0.1:%d
  apis: [external]
  tls: {caFile: %s, serverName: %s.%s.svc}
  credentials: {tokenFile: %s}
  timeout: 5s
  breaker: {failures: 3, openFor: 5s}
`, k.port, filepath.Join(k.certDir, "ca.crt"), kedaMetricsService, kedaNS, ps.token)
	must(os.WriteFile(ps.dsFile, []byte(ps.dsConfig), 0o644))

	saUser := "system:serviceaccount:" + framework.AdapterNamespace + ":" + framework.AdapterServiceAccount
	kubeconfig, err := env.UserKubeconfig(saUser, "system:serviceaccounts", "system:serviceaccounts:"+framework.AdapterNamespace, "system:authenticated")
	must(err)
	ps.port, err = framework.FreePort()
	must(err)
	args, err := env.AdapterArgs(ps.port, kubeconfig, promURL, rules)
	must(err)
	args = append(args, extra...)
	args = append(args, "--metrics-relist-interval=2s", "--downstream-config="+ps.dsFile,
		"--tls-cert-file="+filepath.Join(serving, "tls.crt"), "--tls-private-key-file="+filepath.Join(serving, "tls.key"))
	ps.adapter, err = env.StartAdapterArgs(ctx, ps.port, args)
	must(err)
	t.Cleanup(ps.adapter.Stop)
	must(externalNameService(ctx, env, framework.AdapterNamespace, framework.AdapterService, ps.port))
	eventually(t, ctx, time.Minute, "promscaler ready, KEDA up in /readyz?verbose", ps.downstreamUp)
	eventually(t, ctx, time.Minute, "promscaler authenticating the aggregator's requests", func(ctx context.Context) error {
		return ps.authenticatesAggregator(ctx, env)
	})
	return ps
}

// authenticatesAggregator sends what the aggregator sends (its front-proxy
// client certificate, the caller in X-Remote-User/Group) straight to
// promscaler. /readyz passes before this does: in the first run of
// TestDownstreamKEDA the aggregator's requests 45-65 ms after /readyz
// passed were refused as system:anonymous (403), until the delegated
// authentication's informers of kube-system/extension-apiserver-
// authentication had synced, 100 ms after promscaler started serving.
func (ps *promscalerSide) authenticatesAggregator(ctx context.Context, env *framework.Env) error {
	cert, err := tls.LoadX509KeyPair(env.PKI.FrontProxyClient.CertFile, env.PKI.FrontProxyClient.KeyFile)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(ps.port)+"/apis/external.metrics.k8s.io/v1beta1", nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Remote-User", "e2e-admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// convertKEDA runs `autoscaler convert-keda` on one ScaledObject; the
// externalQueries go to queries, the HPA to the returned file.
func convertKEDA(t *testing.T, ctx context.Context, env *framework.Env, so, queries string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, env.Bin("autoscaler"), "convert-keda", "-f", so, "--queries-out", queries)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("autoscaler convert-keda -f %s: %v: %s", so, err, stderr.String())
	}
	t.Logf("convert-keda %s notes:\n%s", filepath.Base(so), stderr.String())
	hpa := strings.TrimSuffix(so, ".yaml") + "-hpa.yaml"
	if err := os.WriteFile(hpa, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return hpa
}

// downstreamUp: promscaler is ready and says KEDA is up, with its
// discovery done.
func (ps *promscalerSide) downstreamUp(ctx context.Context) error {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 2 * time.Second}
	body, code, err := framework.Get(ctx, hc, "https://127.0.0.1:"+strconv.Itoa(ps.port)+"/readyz?verbose")
	if err != nil {
		return err
	}
	s := string(body)
	if code != http.StatusOK || !strings.Contains(s, `downstream "keda": up`) || strings.Contains(s, "never succeeded") || strings.Contains(s, "not refreshed") {
		return fmt.Errorf("/readyz?verbose HTTP %d:\n%s", code, s)
	}
	return nil
}

// checkKEDAForwarded compares `kubectl get --raw` of KEDA's metrics through
// the aggregator (and promscaler) with the same request sent to KEDA's
// metrics server directly (kubectl with the adapter's token, KEDA's CA).
func checkKEDAForwarded(t *testing.T, ctx context.Context, env *framework.Env, k *kedaStack, ps *promscalerSide) {
	must := fatalOn(t)
	token, err := os.ReadFile(ps.token)
	must(err)
	empty := filepath.Join(t.TempDir(), "empty.kubeconfig")
	must(os.WriteFile(empty, nil, 0o600))
	for _, w := range kedaWorkloads {
		path := kedaMetricPath(w)
		metric := "s0-prometheus"
		var via, direct map[string]string
		eventually(t, ctx, time.Minute, "the same answer through promscaler and from KEDA", func(ctx context.Context) error {
			out, err := env.Kubectl(ctx, "get", "--raw", path)
			if err != nil {
				return err
			}
			if via, err = externalValues(apiAnswer{body: []byte(out), code: 200}, metric); err != nil {
				return err
			}
			out, err = env.KubectlAs(ctx, empty, "--server=https://127.0.0.1:"+strconv.Itoa(k.port),
				"--certificate-authority="+filepath.Join(k.certDir, "ca.crt"), "--tls-server-name="+kedaMetricsService+"."+kedaNS+".svc",
				"--token="+string(token), "get", "--raw", path)
			if err != nil {
				return err
			}
			if direct, err = externalValues(apiAnswer{body: []byte(out), code: 200}, metric); err != nil {
				return err
			}
			return diffValues(direct, via)
		})
		t.Logf("%s: %v through promscaler (kubectl get --raw), %v from KEDA directly", path, via, direct)
	}
}
