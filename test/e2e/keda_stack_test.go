//go:build e2e && keda

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// KEDA's names, as its manifests give them (config/ in its module).
const (
	kedaNS             = "keda"
	kedaMetricsService = "keda-metrics-apiserver"
	kedaOperatorSvc    = "keda-operator"
	kedaCertSecret     = "kedaorg-certs"
	externalAPIService = "v1beta1.external.metrics.k8s.io"
)

var apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// kedaStack is KEDA's operator and metrics server (hack/tools.sh keda) run
// as processes against the test kube-apiserver, as their Deployments run
// them in a cluster: the operator with --enable-cert-rotation generates
// KEDA's CA and certificate into the Secret kedaorg-certs; both mount it
// (here: the test writes it into certDir, as the kubelet would); the
// metrics server serves external.metrics.k8s.io with that certificate and
// asks the operator's gRPC metrics service (mutual TLS with the same CA).
type kedaStack struct {
	env      *framework.Env
	certDir  string
	port     int // the metrics server's secure port
	grpcPort int // the operator's gRPC metrics service
	operator *framework.Process
	metrics  *framework.Process
	opConfig string // the operator's kubeconfig
	msConfig string // the metrics server's kubeconfig
}

// startKEDA applies KEDA's CRDs, runs the operator until its certificates
// exist, then the operator again (patching the external metrics APIService
// with its CA, its default) and the metrics server, and waits until the
// aggregator serves external metrics from KEDA.
func startKEDA(t *testing.T, ctx context.Context, env *framework.Env) *kedaStack {
	t.Helper()
	must := fatalOn(t)
	for _, b := range []string{"keda-operator", "keda-adapter"} {
		if _, err := os.Stat(env.Tool(b)); err != nil {
			t.Fatalf("%s: %v (run hack/tools.sh keda, or make e2e-keda)", b, err)
		}
	}
	applyKEDACRDs(t, ctx, env)
	must(env.EnsureNamespace(ctx, kedaNS))
	k := &kedaStack{env: env, certDir: filepath.Join(env.Dir, "keda-certs")}
	must(os.MkdirAll(k.certDir, 0o700))
	var err error
	// Test fixtures: both run as their ServiceAccounts' users, bound to cluster-admin.
	opUser, msUser := "system:serviceaccount:keda:keda-operator", "system:serviceaccount:keda:keda-metrics-server"
	k.opConfig, err = env.UserKubeconfig(opUser, "system:serviceaccounts", "system:authenticated")
	must(err)
	k.msConfig, err = env.UserKubeconfig(msUser, "system:serviceaccounts", "system:authenticated")
	must(err)
	_, err = env.Kubectl(ctx, "create", "clusterrolebinding", "keda-e2e", "--clusterrole=cluster-admin", "--user="+opUser, "--user="+msUser)
	must(err)
	k.port, err = framework.FreePort()
	must(err)
	k.grpcPort, err = framework.FreePort()
	must(err)
	must(externalNameService(ctx, env, kedaNS, kedaMetricsService, k.port))
	must(pointExternalAPIService(ctx, env, kedaNS, kedaMetricsService, k.port, nil))

	k.firstOperatorRun(t, ctx)
	k.operator = k.startOperator(t, ctx, true)
	k.startMetricsServer(t, ctx)
	eventually(t, ctx, 2*time.Minute, "KEDA's CA in the APIService and the APIService Available", func(ctx context.Context) error {
		ca, err := apiServiceCABundle(ctx, env)
		if err != nil || string(ca) != k.file(t, "ca.crt") {
			return fmt.Errorf("caBundle %.40q (err %v), want KEDA's CA", ca, err)
		}
		if ok, err := env.APIServiceAvailable(ctx, framework.ExternalMetricsV1Beta1); !ok {
			return fmt.Errorf("not Available (err %v)", err)
		}
		return nil
	})
	return k
}

// firstOperatorRun: a first start finds the Secret empty, fills it and
// exits so that its pod restarts with the Secret mounted. The test then
// mounts it: it writes the Secret's files into certDir.
func (k *kedaStack) firstOperatorRun(t *testing.T, ctx context.Context) {
	t.Helper()
	p := k.startOperator(t, ctx, true)
	var secret *corev1.Secret
	eventually(t, ctx, 2*time.Minute, "the Secret kedaorg-certs filled by the operator", func(ctx context.Context) error {
		s, err := k.env.Client.CoreV1().Secrets(kedaNS).Get(ctx, kedaCertSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, f := range []string{"ca.crt", "tls.crt", "tls.key"} {
			if len(s.Data[f]) == 0 {
				return fmt.Errorf("no %s yet", f)
			}
		}
		secret = s
		return nil
	})
	select {
	case <-p.Done():
		t.Logf("KEDA operator exited after writing its certificates, as it does for its pod to restart")
	case <-time.After(30 * time.Second):
		p.Stop(5 * time.Second)
	}
	for f, data := range secret.Data {
		if err := os.WriteFile(filepath.Join(k.certDir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// startOperator starts KEDA's operator; patchAPIService is its
// --enable-apiservice-patching.
func (k *kedaStack) startOperator(t *testing.T, ctx context.Context, patchAPIService bool) *framework.Process {
	t.Helper()
	must := fatalOn(t)
	metricsPort, err := framework.FreePort()
	must(err)
	probePort, err := framework.FreePort()
	must(err)
	argv := append(kedaEnv(k.opConfig), k.env.Tool("keda-operator"),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metricsPort),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probePort),
		"--metrics-service-bind-address=127.0.0.1:"+strconv.Itoa(k.grpcPort),
		"--cert-dir="+k.certDir,
		"--enable-cert-rotation=true",
		"--enable-webhook-patching=false", // no admission webhooks here
		"--enable-apiservice-patching="+strconv.FormatBool(patchAPIService),
		"--zap-log-level=info")
	p, err := k.env.StartCommand("keda-operator", argv)
	must(err)
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	return p
}

// restartOperator stops the operator and starts it again with
// --enable-apiservice-patching=patchAPIService, then waits until KEDA
// answers through the aggregator again (path, a KEDA metric).
func (k *kedaStack) restartOperator(t *testing.T, ctx context.Context, patchAPIService bool, path string) {
	t.Helper()
	k.operator.Stop(10 * time.Second)
	k.operator = k.startOperator(t, ctx, patchAPIService)
	eventually(t, ctx, 2*time.Minute, "KEDA answering after the operator's restart", func(ctx context.Context) error {
		return getAnswer(ctx, k.env, path).err
	})
}

// startMetricsServer starts KEDA's metrics server with the flags of its
// Deployment (config/metrics-server/deployment.yaml): serving certificate
// and client CA from the Secret, the operator's gRPC service by address.
func (k *kedaStack) startMetricsServer(t *testing.T, ctx context.Context) {
	t.Helper()
	must := fatalOn(t)
	httpPort, err := framework.FreePort()
	must(err)
	argv := append(kedaEnv(k.msConfig), k.env.Tool("keda-adapter"),
		"--secure-port="+strconv.Itoa(k.port), "--bind-address=127.0.0.1",
		"--cert-dir="+k.certDir,
		"--tls-cert-file="+filepath.Join(k.certDir, "tls.crt"),
		"--tls-private-key-file="+filepath.Join(k.certDir, "tls.key"),
		"--client-ca-file="+filepath.Join(k.certDir, "ca.crt"),
		"--metrics-service-address=127.0.0.1:"+strconv.Itoa(k.grpcPort),
		"--metrics-service-grpc-authority="+kedaOperatorSvc+"."+kedaNS+".svc",
		"--port="+strconv.Itoa(httpPort),
		"--lister-kubeconfig="+k.msConfig, "--authentication-kubeconfig="+k.msConfig, "--authorization-kubeconfig="+k.msConfig,
		"--zap-log-level=info")
	k.metrics, err = k.env.StartCommand("keda-metrics-server", argv)
	must(err)
	t.Cleanup(func() { k.metrics.Stop(5 * time.Second) })
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 2 * time.Second}
	eventually(t, ctx, 2*time.Minute, "KEDA metrics server /healthz", func(ctx context.Context) error {
		if exited, err := k.metrics.Exited(); exited {
			return fmt.Errorf("exited: %v: %s", err, k.metrics.Tail(20))
		}
		_, code, err := framework.Get(ctx, hc, fmt.Sprintf("https://127.0.0.1:%d/healthz", k.port))
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("HTTP %d", code)
		}
		return err
	})
}

// kedaEnv is the environment KEDA's Deployments give its containers, run
// through env(1) so that the process is KEDA's own.
func kedaEnv(kubeconfig string) []string {
	return []string{"/usr/bin/env", "WATCH_NAMESPACE=", "POD_NAMESPACE=" + kedaNS, "KEDA_CLUSTER_OBJECT_NAMESPACE=" + kedaNS, "KUBECONFIG=" + kubeconfig}
}

func (k *kedaStack) file(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(k.certDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// applyKEDACRDs applies config/crd/bases of the KEDA module the tools
// module pins (from the module cache), and waits until they are served.
func applyKEDACRDs(t *testing.T, ctx context.Context, env *framework.Env) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/kedacore/keda/v2")
	cmd.Dir = filepath.Join(env.RepoRoot, "hack", "tools", "keda")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("finding KEDA's module (hack/tools.sh keda downloads it): %v", err)
	}
	crds := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases")
	if _, err := env.Kubectl(ctx, "apply", "--server-side", "-f", crds); err != nil {
		t.Fatal(err)
	}
	// kubectl wait fails at once on a CRD that has no status.conditions yet.
	eventually(t, ctx, time.Minute, "KEDA's CRDs Established", func(ctx context.Context) error {
		_, err := env.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=10s", "crd/scaledobjects.keda.sh", "crd/triggerauthentications.keda.sh")
		return err
	})
}

// externalNameService creates or updates ns/name as an ExternalName
// Service to localhost:port (Endpoints refuse loopback addresses).
func externalNameService(ctx context.Context, env *framework.Env, ns, name string, port int) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(port), TargetPort: intstr.FromInt32(int32(port))}},
		},
	}
	svcs := env.Client.CoreV1().Services(ns)
	old, err := svcs.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		svc.ResourceVersion = old.ResourceVersion
		_, err = svcs.Update(ctx, svc, metav1.UpdateOptions{})
	case apierrors.IsNotFound(err):
		_, err = svcs.Create(ctx, svc, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("Service %s/%s: %w", ns, name, err)
	}
	return nil
}

// pointExternalAPIService points v1beta1.external.metrics.k8s.io at the
// Service ns/name:port with caBundle (none: left to whoever injects it),
// as `kubectl apply` of a manifest would; the hand-over's one switch.
func pointExternalAPIService(ctx context.Context, env *framework.Env, ns, name string, port int, caBundle []byte) error {
	spec := map[string]any{
		"group": "external.metrics.k8s.io", "version": "v1beta1",
		"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
		"service": map[string]any{"namespace": ns, "name": name, "port": int64(port)},
	}
	if caBundle != nil {
		spec["caBundle"] = base64.StdEncoding.EncodeToString(caBundle)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": externalAPIService},
		"spec":     spec,
	}}
	_, err := env.Dynamic.Resource(apiServicesGVR).Apply(ctx, externalAPIService, obj, metav1.ApplyOptions{FieldManager: "e2e-handover", Force: true})
	if err != nil {
		return fmt.Errorf("pointing %s at %s/%s:%d: %w", externalAPIService, ns, name, port, err)
	}
	return nil
}

// apiServiceCABundle is the external metrics APIService's caBundle.
func apiServiceCABundle(ctx context.Context, env *framework.Env) ([]byte, error) {
	obj, err := env.Dynamic.Resource(apiServicesGVR).Get(ctx, externalAPIService, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	s, _, err := unstructured.NestedString(obj.Object, "spec", "caBundle")
	if err != nil || s == "" {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("caBundle: %w", err)
	}
	return b, nil
}
