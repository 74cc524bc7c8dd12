//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// metricsGroups are the API groups an adapter may register.
var metricsGroups = []string{"custom.metrics.k8s.io", "external.metrics.k8s.io", "metrics.k8s.io"}

// helmTemplate renders charts/promscaler with the tools dir's helm and
// returns the objects.
func helmTemplate(ctx context.Context, t *testing.T, env *framework.Env, release, namespace string, args ...string) ([]*unstructured.Unstructured, []byte) {
	t.Helper()
	helm := env.Tool("helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("helm: %v (run `hack/tools.sh helm`)", err)
	}
	cmdArgs := append([]string{"template", release, filepath.Join(env.RepoRoot, "charts", "promscaler"), "--namespace", namespace}, args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helm, cmdArgs...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(cmdArgs, " "), err, stderr.String())
	}
	objs, err := decodeObjects(stdout.Bytes())
	if err != nil {
		t.Fatalf("decoding helm output: %v", err)
	}
	return objs, stdout.Bytes()
}

// decodeObjects decodes a multi-document YAML stream of objects.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

func findObject(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	t.Fatalf("rendered chart has no %s", kind)
	return nil
}

// adapterContainer returns the adapter container of a rendered Deployment.
func adapterContainer(t *testing.T, deploy *unstructured.Unstructured) map[string]any {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		if m, ok := c.(map[string]any); ok && m["name"] == "adapter" {
			return m
		}
	}
	t.Fatalf("Deployment %s has no adapter container", deploy.GetName())
	return nil
}

func stringList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, s := range l {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// localArgs maps a container's argv to this machine: the paths inside the
// container (serving certificate, cert dir, config file) become local files,
// the Prometheus URL keeps its path but goes to promURL's host, and the secure
// port is the one chosen here. Every other argument stays as rendered. It
// returns the rewritten argv and the rendered values it replaced.
func localArgs(t *testing.T, rendered []string, port int, promURL, configFile, certDir string, files map[string]string) (args []string, replaced map[string]string) {
	t.Helper()
	replaced = map[string]string{}
	pu, err := url.Parse(promURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range rendered {
		name, value, _ := strings.Cut(a, "=")
		local := ""
		switch name {
		case "--secure-port":
			local = strconv.Itoa(port)
		case "--cert-dir":
			local = certDir
		case "--config":
			local = configFile
		case "--tls-cert-file", "--tls-private-key-file":
			local = files[filepath.Base(value)]
		case "--prometheus-url":
			u, err := url.Parse(value)
			if err != nil {
				t.Fatalf("rendered %s: %v", a, err)
			}
			u.Scheme, u.Host = pu.Scheme, pu.Host
			local = u.String()
		default:
			args = append(args, a)
			continue
		}
		replaced[name] = value
		args = append(args, name+"="+local)
	}
	return args, replaced
}

// inClusterArgs are what the pod gets from its ServiceAccount and the pod
// network and a local process must be told: where the API server is, as
// whom, and to listen on loopback only.
func inClusterArgs(kubeconfig string) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--lister-kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
	}
}

// prefixProxy serves target's API under prefix only (a Thanos Query or a
// Prometheus behind a path), answering 404 elsewhere.
func prefixProxy(t *testing.T, prefix, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix(prefix, httputil.NewSingleHostReverseProxy(u)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// presentAPIServices lists the APIServices of the metrics groups.
func presentAPIServices(ctx context.Context, t *testing.T, env *framework.Env) []string {
	t.Helper()
	out, err := env.Kubectl(ctx, "get", "apiservices", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range strings.Fields(out) {
		_, group, _ := strings.Cut(n, ".")
		if slices.Contains(metricsGroups, group) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// TestHelmChart installs charts/promscaler for three values files written for
// the prometheus-community prometheus-adapter chart: `helm template` renders,
// every object passes a server-side dry run and is created (the Service as an
// ExternalName to this machine, the only way the aggregator reaches a local
// process), the adapter runs with the rendered Deployment's argv and config
// (paths and the Prometheus host mapped to this machine), answers through the
// aggregator, and exactly the configured APIServices exist.
func TestHelmChart(t *testing.T) {
	env := framework.New(t, framework.Config{})
	requireAdapter(t, env)
	ctx := ctxFor(t, 8*time.Minute)
	x, addr := serveExporter(t)
	prom := env.MustStartPrometheus(t, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addr}, HonorLabels: true}},
	})
	const ns = "helm-apps"
	if err := x.Set(
		exporter.Series{Name: "queue_depth", Type: exporter.Gauge, Labels: map[string]string{"namespace": ns, "pod": "worker-0", "queue": "jobs"}, Value: 7},
		exporter.Series{Name: "http_requests_total", Type: exporter.Counter, Labels: map[string]string{"namespace": ns, "pod": "web-0"}, Rate: 5},
	); err != nil {
		t.Fatal(err)
	}
	if _, err := prom.WaitForQuery(ctx, `queue_depth or http_requests_total`, 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := env.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		values  string
		promURL string // the Prometheus the rendered URL maps to
		// existing is a ConfigMap the values name in rules.existing.
		existing string
		wantAPIs []string
		// wantCustom are metrics the custom API must list.
		wantCustom []string
		// wantExternal is an external metric path (under the namespace) that
		// must answer.
		wantExternal string
	}{
		{
			values:     "community-defaults.yaml",
			promURL:    prom.URL,
			wantAPIs:   []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io"},
			wantCustom: []string{"pods/queue_depth", "namespaces/queue_depth", "pods/http_requests"},
		},
		{
			values:       "thanos-all-apis.yaml",
			promURL:      prefixProxy(t, "/thanos/query", prom.URL),
			wantAPIs:     []string{"v1beta1.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io", "v1beta1.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io"},
			wantCustom:   []string{"pods/http_requests_per_second"},
			wantExternal: "queue_depth",
		},
		{
			values:  "existing-configmap.yaml",
			promURL: prom.URL,
			existing: `rules:
- seriesQuery: '{__name__="queue_depth",namespace!="",pod!=""}'
  resources: {template: <<.Resource>>}
  name: {as: queue_length}
  metricsQuery: max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
`,
			wantAPIs:   []string{"v1beta1.custom.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io"},
			wantCustom: []string{"pods/queue_length"},
		},
	} {
		t.Run(strings.TrimSuffix(tc.values, ".yaml"), func(t *testing.T) {
			const release, releaseNS = "prometheus-adapter", "monitoring"
			if err := env.EnsureNamespace(ctx, releaseNS); err != nil {
				t.Fatal(err)
			}
			port, err := framework.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			// service.port: the aggregator dials an ExternalName Service's
			// host on the APIService's port, so both are the adapter's port.
			objs, rendered := helmTemplate(ctx, t, env, release, releaseNS,
				"-f", filepath.Join("testdata", "helm", tc.values), "--set", "service.port="+strconv.Itoa(port))
			dir := t.TempDir()
			all := filepath.Join(dir, "rendered.yaml")
			if err := os.WriteFile(all, rendered, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.existing != "" {
				cm := filepath.Join(dir, "existing.yaml")
				name := "adapter-rules"
				doc, err := yaml.Marshal(map[string]any{
					"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{"name": name, "namespace": releaseNS},
					"data":     map[string]any{"config.yaml": tc.existing},
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(cm, doc, 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := env.Kubectl(ctx, "apply", "-f", cm); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
			}
			if out, err := env.Kubectl(ctx, "apply", "--dry-run=server", "-f", all); err != nil {
				t.Fatalf("server-side dry run of the rendered chart: %v\n%s", err, out)
			}

			// Create everything; the Service becomes an ExternalName to localhost.
			var docs [][]byte
			var saName, configMapName string
			for _, o := range objs {
				switch o.GetKind() {
				case "Service":
					o = &unstructured.Unstructured{Object: map[string]any{
						"apiVersion": "v1", "kind": "Service",
						"metadata": map[string]any{"name": o.GetName(), "namespace": o.GetNamespace()},
						"spec": map[string]any{"type": "ExternalName", "externalName": "localhost",
							"ports": []any{map[string]any{"name": "https", "port": int64(port)}}},
					}}
				case "Deployment":
					saName, _, _ = unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
					vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
					for _, v := range vols {
						if m, _ := v.(map[string]any); m["name"] == "config" {
							configMapName, _, _ = unstructured.NestedString(m, "configMap", "name")
						}
					}
				}
				d, err := yaml.Marshal(o.Object)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, d)
			}
			created := filepath.Join(dir, "created.yaml")
			if err := os.WriteFile(created, bytes.Join(docs, []byte("---\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := env.Kubectl(ctx, "apply", "-f", created); err != nil {
				t.Fatalf("creating the rendered chart: %v\n%s", err, out)
			}
			t.Cleanup(func() {
				_, _ = env.Kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=false", "-f", created)
			})

			// The config the pod would mount, read back from the cluster.
			cm, err := env.Client.CoreV1().ConfigMaps(releaseNS).Get(ctx, configMapName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the Deployment's config ConfigMap %q: %v", configMapName, err)
			}
			configFile := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(configFile, []byte(cm.Data["config.yaml"]), 0o644); err != nil {
				t.Fatal(err)
			}
			deploy := findObject(t, objs, "Deployment")
			renderedArgs := stringList(adapterContainer(t, deploy)["args"])
			args, replaced := localArgs(t, renderedArgs, port, tc.promURL, configFile, filepath.Join(dir, "certs"), nil)
			if got := replaced["--config"]; got != "/etc/adapter/config.yaml" {
				t.Errorf("rendered --config=%q, want the mounted /etc/adapter/config.yaml", got)
			}
			kubeconfig, err := env.UserKubeconfig("system:serviceaccount:"+releaseNS+":"+saName,
				"system:serviceaccounts", "system:serviceaccounts:"+releaseNS, "system:authenticated")
			if err != nil {
				t.Fatal(err)
			}
			a, err := env.StartAdapterArgs(ctx, port, append(args, inClusterArgs(kubeconfig)...))
			if err != nil {
				t.Fatalf("adapter with the rendered argv %q: %v", renderedArgs, err)
			}
			t.Cleanup(a.Stop)

			if diff := cmp.Diff(tc.wantAPIs, presentAPIServices(ctx, t, env)); diff != "" {
				t.Errorf("APIServices present (-want +got):\n%s", diff)
			}
			for _, name := range tc.wantAPIs {
				version, group, _ := strings.Cut(name, ".")
				eventually(t, ctx, time.Minute, name+" Available", func(ctx context.Context) error {
					if ok, err := env.APIServiceAvailable(ctx, schema.GroupVersion{Group: group, Version: version}); !ok {
						return fmt.Errorf("not Available (%v)", err)
					}
					return nil
				})
			}
			for _, gv := range []string{"custom.metrics.k8s.io/v1beta1", "custom.metrics.k8s.io/v1beta2"} {
				eventually(t, ctx, time.Minute, gv+" lists "+strings.Join(tc.wantCustom, ", "), func(context.Context) error {
					list, err := env.Client.Discovery().ServerResourcesForGroupVersion(gv)
					if err != nil {
						return err
					}
					var got []string
					for _, r := range list.APIResources {
						got = append(got, r.Name)
					}
					for _, w := range tc.wantCustom {
						if !slices.Contains(got, w) {
							return fmt.Errorf("lists %v", got)
						}
					}
					return nil
				})
			}
			if tc.wantExternal != "" {
				path := "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + ns + "/" + tc.wantExternal
				eventually(t, ctx, time.Minute, "GET "+path+" answers 7", func(ctx context.Context) error {
					a := getAnswer(ctx, env, path)
					if a.err != nil || !bytes.Contains(a.body, []byte(`"value":"7"`)) {
						return fmt.Errorf("HTTP %d %v %s", a.code, a.err, a.body)
					}
					return nil
				})
			}
		})
	}

	testCommunityArgv(ctx, t, env, prom.URL)
}

// communityArgv is the argv the prometheus-community prometheus-adapter
// chart renders (its templates/deployment.yaml) for its default values with
// the given changes: the positional program path first, then the flags in
// its order.
func communityArgv(securePort, relist, logLevel string, tls bool, extra ...string) []string {
	argv := []string{"/adapter", "--secure-port=" + securePort}
	if tls {
		argv = append(argv, "--tls-cert-file=/var/run/serving-cert/tls.crt", "--tls-private-key-file=/var/run/serving-cert/tls.key")
	}
	argv = append(argv, "--cert-dir=/tmp/cert", "--prometheus-url=http://prometheus.default.svc:9090",
		"--metrics-relist-interval="+relist, "--v="+logLevel, "--config=/etc/adapter/config.yaml")
	return append(argv, extra...)
}

// testCommunityArgv renders the chart for each community value that changes
// the argv, checks it is the community chart's argv but for the leading
// program path (the image's entrypoint is the adapter), and starts the
// adapter with the community chart's argv, program path included: a release
// that only swaps the image keeps that argv.
func testCommunityArgv(ctx context.Context, t *testing.T, env *framework.Env, promURL string) {
	// Issue 19 item 1 (the adapter's argv, cmd/adapter) makes the adapter
	// accept the leading program path the community chart passes. Until it
	// lands, the adapter refuses it and these tests say so instead of failing.
	certs := filepath.Join(t.TempDir(), "serving")
	if err := framework.WriteServingSet(certs, "localhost"); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"tls.crt": filepath.Join(certs, "tls.crt"), "tls.key": filepath.Join(certs, "tls.key")}
	extra := []string{"--logtostderr=true", "--metrics-max-age=2m", "--disable-http2"}
	for _, tc := range []struct {
		name string
		set  []string
		want []string
	}{
		{"defaults", nil, communityArgv("6443", "1m", "4", false)},
		{"tls", []string{"tls.enable=true", "tls.ca=x", "tls.key=x", "tls.certificate=x"}, communityArgv("6443", "1m", "4", true)},
		{"certManager", []string{"certManager.enabled=true"}, communityArgv("6443", "1m", "4", true)},
		{"extraArguments", []string{"extraArguments={" + strings.Join(extra, ",") + "}"}, communityArgv("6443", "1m", "4", false, extra...)},
		{"logLevel", []string{"logLevel=7"}, communityArgv("6443", "1m", "7", false)},
		{"metricsRelistInterval", []string{"metricsRelistInterval=30s"}, communityArgv("6443", "30s", "4", false)},
		{"listenPort", []string{"listenPort=8443"}, communityArgv("8443", "1m", "4", false)},
	} {
		t.Run("community-argv/"+tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			objs, _ := helmTemplate(ctx, t, env, "prometheus-adapter", "monitoring", args...)
			got := stringList(adapterContainer(t, findObject(t, objs, "Deployment"))["args"])
			if diff := cmp.Diff(tc.want[1:], got); diff != "" {
				t.Errorf("chart argv differs from the community chart's (-want +got):\n%s", diff)
			}
			cm := findObject(t, objs, "ConfigMap")
			config, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
			dir := t.TempDir()
			configFile := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
			port, err := framework.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			local, _ := localArgs(t, tc.want, port, promURL, configFile, filepath.Join(dir, "certs"), files)
			a, err := env.StartAdapterArgs(ctx, port, append(local, inClusterArgs(env.Kubeconfig)...))
			if err != nil {
				t.Fatalf("adapter with the community chart's argv %q: %v", tc.want, err)
			}
			a.Stop()
		})
	}
}
