package framework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The names the adapter runs under, the same as in deploy/base.
const (
	AdapterNamespace      = "promscaler"
	AdapterServiceAccount = "promscaler-adapter"
	AdapterService        = "promscaler-adapter"
	// MetricsReaderClusterRole is the documented ClusterRole that lets a
	// subject read every metrics API the adapter serves (deploy/base/rbac.yaml).
	MetricsReaderClusterRole = "promscaler:metrics-reader"
)

// APIService group/versions the adapter can serve.
var (
	CustomMetricsV1Beta1   = schema.GroupVersion{Group: "custom.metrics.k8s.io", Version: "v1beta1"}
	CustomMetricsV1Beta2   = schema.GroupVersion{Group: "custom.metrics.k8s.io", Version: "v1beta2"}
	ExternalMetricsV1Beta1 = schema.GroupVersion{Group: "external.metrics.k8s.io", Version: "v1beta1"}
	ResourceMetricsV1Beta1 = schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
)

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// AdapterConfig configures StartAdapter.
type AdapterConfig struct {
	// ConfigFile is the rules file (prometheus-adapter format). Required.
	ConfigFile string
	// PrometheusURL is the Prometheus the adapter queries. Required.
	PrometheusURL string
	// RelistInterval is --metrics-relist-interval (default 2s, so tests see
	// new series quickly).
	RelistInterval time.Duration
	// ResourceMetrics also registers v1beta1.metrics.k8s.io (only when the
	// config has resourceRules; an unavailable APIService breaks discovery).
	ResourceMetrics bool
	// Binary defaults to <bin dir>/adapter.
	Binary string
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// RBACManifest is applied before the adapter starts (default
	// <repo>/deploy/base/rbac.yaml), so the adapter runs with the
	// permissions the deployment grants it.
	RBACManifest string
}

// Adapter is the project's adapter run by the environment.
type Adapter struct {
	// Process is the adapter process.
	Process *Process
	// URL is https://127.0.0.1:<port>, the adapter's own serving endpoint.
	URL string
	// Port is the secure port.
	Port int
	// GroupVersions lists the APIServices registered for it.
	GroupVersions []schema.GroupVersion
	// Kubeconfig is the adapter's identity (the promscaler-adapter ServiceAccount's user).
	Kubeconfig string
}

// StartAdapter applies the adapter's RBAC, starts the adapter on 127.0.0.1,
// registers it with the aggregator through real APIService objects (an
// ExternalName Service pointing at localhost) and waits until every
// APIService is Available. If the adapter exits saying it is not
// implemented, the error wraps ErrNotImplemented.
func (e *Env) StartAdapter(ctx context.Context, cfg AdapterConfig) (*Adapter, error) {
	return retryPortClash(func() (*Adapter, error) { return e.startAdapter(ctx, cfg) })
}

func (e *Env) startAdapter(ctx context.Context, cfg AdapterConfig) (*Adapter, error) {
	if cfg.ConfigFile == "" || cfg.PrometheusURL == "" {
		return nil, errors.New("StartAdapter: ConfigFile and PrometheusURL are required")
	}
	if cfg.RelistInterval <= 0 {
		cfg.RelistInterval = 2 * time.Second
	}
	bin := firstNonEmpty(cfg.Binary, e.Bin("adapter"))
	rbac := firstNonEmpty(cfg.RBACManifest, filepath.Join(e.RepoRoot, "deploy", "base", "rbac.yaml"))
	if err := e.EnsureNamespace(ctx, AdapterNamespace); err != nil {
		return nil, err
	}
	if _, err := e.Kubectl(ctx, "apply", "--server-side", "-f", rbac); err != nil {
		return nil, fmt.Errorf("applying adapter RBAC: %w", err)
	}
	// A client certificate whose user is the ServiceAccount's: RBAC bindings
	// to the ServiceAccount then apply to the adapter as they would in a cluster.
	saUser := "system:serviceaccount:" + AdapterNamespace + ":" + AdapterServiceAccount
	kubeconfig, err := e.UserKubeconfig(saUser, "system:serviceaccounts", "system:serviceaccounts:"+AdapterNamespace, "system:authenticated")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args, err := e.AdapterArgs(port, kubeconfig, cfg.PrometheusURL, cfg.ConfigFile)
	if err != nil {
		return nil, err
	}
	args = append(args, "--metrics-relist-interval="+cfg.RelistInterval.String())
	args = append(args, cfg.ExtraArgs...)
	a := &Adapter{URL: fmt.Sprintf("https://127.0.0.1:%d", port), Port: port, Kubeconfig: kubeconfig}
	if a.Process, err = e.start("adapter", bin, args); err != nil {
		return nil, err
	}
	if err := e.waitHealthy(ctx, a); err != nil {
		if a.Process.logMentions("not implemented") {
			return nil, fmt.Errorf("adapter: %w", ErrNotImplemented)
		}
		return nil, err
	}
	a.GroupVersions = []schema.GroupVersion{CustomMetricsV1Beta1, CustomMetricsV1Beta2, ExternalMetricsV1Beta1}
	if cfg.ResourceMetrics {
		a.GroupVersions = append(a.GroupVersions, ResourceMetricsV1Beta1)
	}
	if err := e.RegisterAPIServices(ctx, port, a.GroupVersions); err != nil {
		return nil, err
	}
	if err := e.waitFor(ctx, a.Process, "adapter APIServices Available", 60*time.Second, func(ctx context.Context) (bool, error) {
		for _, gv := range a.GroupVersions {
			ok, err := e.APIServiceAvailable(ctx, gv)
			if err != nil || !ok {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	return a, nil
}

// AdapterArgs are the flags an adapter on 127.0.0.1:port needs in this
// environment: its serving certificate directory (created), the kubeconfig
// it lists, authenticates and authorizes with, Prometheus and the rules.
func (e *Env) AdapterArgs(port int, kubeconfig, promURL, rules string) ([]string, error) {
	certDir := filepath.Join(e.Dir, "adapter-certs-"+strconv.Itoa(port))
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating adapter cert dir: %w", err)
	}
	return []string{
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--cert-dir=" + certDir,
		"--lister-kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--prometheus-url=" + promURL,
		"--config=" + rules,
	}, nil
}

// RegisterAPIServices points the aggregator's APIServices for gvs at an
// adapter listening on localhost:port (v1beta2 of custom metrics preferred):
// Endpoints refuse loopback addresses, an ExternalName Service does not.
func (e *Env) RegisterAPIServices(ctx context.Context, port int, gvs []schema.GroupVersion) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: AdapterService, Namespace: AdapterNamespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(port), TargetPort: intstr.FromInt32(int32(port))}},
		},
	}
	svcs := e.Client.CoreV1().Services(AdapterNamespace)
	if old, err := svcs.Get(ctx, svc.Name, metav1.GetOptions{}); err == nil {
		svc.ResourceVersion = old.ResourceVersion
		if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating adapter Service: %w", err)
		}
	} else if apierrors.IsNotFound(err) {
		if _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating adapter Service: %w", err)
		}
	} else {
		return fmt.Errorf("reading adapter Service: %w", err)
	}
	for _, gv := range gvs {
		priority := int64(100)
		if gv == CustomMetricsV1Beta2 {
			priority = 200
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1",
			"kind":       "APIService",
			"metadata":   map[string]any{"name": gv.Version + "." + gv.Group},
			"spec": map[string]any{
				"group":                 gv.Group,
				"version":               gv.Version,
				"insecureSkipTLSVerify": true,
				"groupPriorityMinimum":  int64(100),
				"versionPriority":       priority,
				"service":               map[string]any{"namespace": AdapterNamespace, "name": AdapterService, "port": int64(port)},
			},
		}}
		data, err := obj.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encoding APIService %s: %w", obj.GetName(), err)
		}
		force := true
		if _, err := e.Dynamic.Resource(apiServiceGVR).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "promscaler-e2e", Force: force}); err != nil {
			return fmt.Errorf("applying APIService %s (%s): %w", obj.GetName(), data, err)
		}
	}
	return nil
}

// APIServiceAvailable reports whether the APIService of gv has its
// Available condition True.
func (e *Env) APIServiceAvailable(ctx context.Context, gv schema.GroupVersion) (bool, error) {
	obj, err := e.Dynamic.Resource(apiServiceGVR).Get(ctx, gv.Version+"."+gv.Group, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" {
			return m["status"] == "True", nil
		}
	}
	return false, nil
}

// UnregisterAdapter deletes the adapter's APIServices (so discovery stays
// clean once the adapter stops).
func (e *Env) UnregisterAdapter(ctx context.Context, a *Adapter) error {
	var errs []error
	for _, gv := range a.GroupVersions {
		err := e.Dynamic.Resource(apiServiceGVR).Delete(ctx, gv.Version+"."+gv.Group, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting APIService %s: %w", gv, err))
		}
	}
	return errors.Join(errs...)
}

// Stop stops the adapter process.
func (a *Adapter) Stop() { a.Process.Stop(10 * time.Second) }

// AdapterImplemented runs `adapter --help` from the bin dir and reports
// whether its server is implemented (false when the binary says "not
// implemented"). Tests use it to skip, visibly, what cannot run yet.
func (e *Env) AdapterImplemented(ctx context.Context) (bool, string) {
	return AdapterImplemented(ctx, e.Bin("adapter"))
}

// AdapterImplemented is the same check for a given binary. It starts the
// server with an invalid port and reads what it says.
func AdapterImplemented(ctx context.Context, bin string) (bool, string) {
	out, _ := runCapture(ctx, bin, "--help")
	if strings.Contains(out, "not implemented") {
		return false, strings.TrimSpace(out)
	}
	out, _ = runCapture(ctx, bin, "--secure-port=-1")
	if strings.Contains(out, "not implemented") {
		return false, strings.TrimSpace(out)
	}
	return true, ""
}

// StartAdapterArgs starts the adapter binary with exactly args (a manifest's
// argv, rewritten by the caller where its paths must map to this machine)
// and waits for /healthz on 127.0.0.1:port, which args must make it serve.
// It registers no APIService: the caller applies its own.
func (e *Env) StartAdapterArgs(ctx context.Context, port int, args []string) (*Adapter, error) {
	a := &Adapter{URL: fmt.Sprintf("https://127.0.0.1:%d", port), Port: port}
	var err error
	if a.Process, err = e.start("adapter", e.Bin("adapter"), args); err != nil {
		return nil, err
	}
	if err := e.waitHealthy(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

// waitHealthy waits until the adapter's /healthz answers 200 and its
// readiness check front-proxy-ca passes (or it exits): before, the
// aggregator's requests are not authenticated, and APIServices pointed at
// the adapter are marked unavailable (503 to every reader until the
// aggregator checks again), as a kubelet's readiness probe keeps a new
// replica out of its Service until then. The other readiness checks are
// not waited for (a test may start the adapter with Prometheus down); a
// build without the check (an older one in an A/B) is not waited for
// either.
func (e *Env) waitHealthy(ctx context.Context, a *Adapter) error {
	hc := insecureClient()
	return e.waitFor(ctx, a.Process, "adapter /healthz and front proxy CA", 60*time.Second, func(ctx context.Context) (bool, error) {
		if _, code, err := httpGet(ctx, hc, a.URL+"/healthz"); err != nil || code != http.StatusOK {
			return false, nil
		}
		body, _, err := httpGet(ctx, hc, a.URL+"/readyz?verbose")
		if err != nil {
			return false, nil
		}
		return strings.Contains(body, "[+]front-proxy-ca ok") || !strings.Contains(body, "front-proxy-ca"), nil
	})
}
