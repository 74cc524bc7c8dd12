//go:build e2e && chaos

package chaos

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

const replicaFaultName = "adapter-replica-killed"

// endpointReaction stands in for what a cluster does when a pod's process
// dies: the kubelet sees the container exit and marks the pod not ready,
// the EndpointSlice controller marks its endpoint not ready. Until then the
// aggregator still picks the dead replica.
const endpointReaction = 5 * time.Second

// replicaFault runs two adapter replicas behind one Service and its
// APIServices, on a second control plane whose kube-apiserver routes to
// Service endpoints (--enable-aggregator-routing=true), kills one with
// SIGKILL, marks its endpoint not ready endpointReaction later (the suite
// plays kubelet and EndpointSlice controller), then restarts it and marks
// it ready again.
//
// Endpoints and EndpointSlices of type IPv4 refuse loopback addresses
// (ValidateEndpointIP: "may not be in the loopback range"), and every
// process here listens on 127.0.0.1; an EndpointSlice of addressType FQDN
// accepts "127.0.0.1" as a name (two DNS labels or more), and the
// aggregator's endpoint resolver (RandomEndpoint) dials
// endpoints[0].addresses[0] with the slice's port. Each replica gets its
// own slice (its own port), so the aggregator picks between them at random
// per request, skipping endpoints whose Ready condition is false: the
// aggregator's real routing, without kube-proxy or a kubelet.
func replicaFault(t *testing.T, main *stack, sc *scoreboard) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := framework.New(t, framework.Config{APIServerArgs: []string{"--enable-aggregator-routing=true"}})
	s := &stack{t: t, env: env, x: main.x, rules: main.rules}
	prom, err := env.StartPrometheus(ctx, framework.PrometheusConfig{Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{main.exporterAddr}, HonorLabels: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.EnsureNamespace(ctx, truthNamespace); err != nil {
		t.Fatal(err)
	}
	for i := range truthPods {
		if err := s.createPod(ctx, truthNamespace, truthPod(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := prom.WaitForQuery(ctx, truthMetric, truthPods, time.Minute); err != nil {
		t.Fatal(err)
	}
	a, argsA := startReplica(t, ctx, env, prom.URL, main.rules)
	b, _ := startReplica(t, ctx, env, prom.URL, main.rules)
	if err := routeToReplicas(ctx, env, a.Port, b.Port); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.RESTConfig)
	cfg.Timeout = 30 * time.Second
	if s.api, err = rest.HTTPClientFor(cfg); err != nil {
		t.Fatal(err)
	}
	if s.direct, err = adminClient(env.PKI.Admin); err != nil {
		t.Fatal(err)
	}
	s.adapter = b // the survivor: its footprint and probes
	if err := s.waitCorrect(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	probe := startProber(func() string { return b.URL })
	defer probe.close()
	load := s.startLoad(sc.rate, 0)
	defer load.close()
	time.Sleep(5 * time.Second)
	sc.run(t, s, load, probe, fault{name: replicaFaultName,
		does: fmt.Sprintf("Two adapter replicas behind one Service (aggregator routing to its EndpointSlices); one is killed with SIGKILL; %v later its endpoint is marked not ready (what kubelet and the EndpointSlice controller would do), then it is started again and marked ready.", endpointReaction),
		inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
			_ = syscall.Kill(-a.Process.Pid(), syscall.SIGKILL)
			<-a.Process.Done()
			killed := time.Now()
			time.Sleep(endpointReaction)
			if err := setReady(fx.ctx, env, "a", false); err != nil {
				t.Error(err)
			}
			end := time.Now()
			w := load.window(killed, end)
			// The replica comes back (a new pod, or the kubelet's restart).
			startProc(t, env, "adapter-a-restarted", argsA)
			if err := waitHTTP(fx.ctx, insecureHTTP(), a.URL+"/readyz", 2*time.Minute); err != nil {
				t.Error(err)
			}
			if err := setReady(fx.ctx, env, "a", true); err != nil {
				t.Error(err)
			}
			avail, _ := env.APIServiceAvailable(fx.ctx, framework.CustomMetricsV1Beta2)
			return end, fmt.Sprintf("before the endpoint was marked not ready: %d requests, %d ok, errors %s; APIService v1beta2 Available after the restart: %v",
				w.total, w.ok, w.errorText(), avail)
		}})
}

// startReplica starts one adapter on 127.0.0.1 as the framework does
// (RBAC, the ServiceAccount's identity) and returns it with its argv.
func startReplica(t *testing.T, ctx context.Context, env *framework.Env, promURL, rules string) (*framework.Adapter, []string) {
	t.Helper()
	if err := env.EnsureNamespace(ctx, framework.AdapterNamespace); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(env.RepoRoot, "deploy", "base", "rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	saUser := "system:serviceaccount:" + framework.AdapterNamespace + ":" + framework.AdapterServiceAccount
	kubeconfig, err := env.UserKubeconfig(saUser, "system:serviceaccounts", "system:serviceaccounts:"+framework.AdapterNamespace, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args, err := env.AdapterArgs(port, kubeconfig, promURL, rules)
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "--metrics-relist-interval=2s")
	a, err := env.StartAdapterArgs(ctx, port, args)
	if err != nil {
		t.Fatal(err)
	}
	return a, append([]string{env.Bin("adapter")}, args...)
}

// routeToReplicas registers the APIServices on a ClusterIP Service
// (selector-less) with one FQDN EndpointSlice per replica.
func routeToReplicas(ctx context.Context, env *framework.Env, portA, portB int) error {
	gvs := []schema.GroupVersion{framework.CustomMetricsV1Beta1, framework.CustomMetricsV1Beta2, framework.ExternalMetricsV1Beta1}
	// The framework's registration (an ExternalName Service), then the
	// Service replaced by a ClusterIP one: with aggregator routing on, the
	// aggregator refuses ExternalName Services.
	if err := env.RegisterAPIServices(ctx, 443, gvs); err != nil {
		return err
	}
	svcs := env.Client.CoreV1().Services(framework.AdapterNamespace)
	if err := svcs.Delete(ctx, framework.AdapterService, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the ExternalName Service: %w", err)
	}
	if _, err := svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: framework.AdapterService, Namespace: framework.AdapterNamespace},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromString("https")}}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the ClusterIP Service: %w", err)
	}
	for name, port := range map[string]int{"a": portA, "b": portB} {
		if _, err := env.Client.DiscoveryV1().EndpointSlices(framework.AdapterNamespace).Create(ctx, endpointSlice(name, port, true), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating EndpointSlice %s: %w", name, err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ok := true
		for _, gv := range gvs {
			if avail, err := env.APIServiceAvailable(ctx, gv); err != nil || !avail {
				ok = false
			}
		}
		if ok {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("APIServices not Available through the replicas' EndpointSlices within a minute")
}

func endpointSlice(name string, port int, ready bool) *discoveryv1.EndpointSlice {
	p, portName := int32(port), "https"
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: framework.AdapterService + "-" + name, Namespace: framework.AdapterNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: framework.AdapterService,
			discoveryv1.LabelManagedBy:   "chaos.promscaler.io",
		}},
		AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &p}},
	}
}

func setReady(ctx context.Context, env *framework.Env, name string, ready bool) error {
	slices := env.Client.DiscoveryV1().EndpointSlices(framework.AdapterNamespace)
	es, err := slices.Get(ctx, framework.AdapterService+"-"+name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	es.Endpoints[0].Conditions.Ready = &ready
	_, err = slices.Update(ctx, es, metav1.UpdateOptions{})
	return err
}

func insecureHTTP() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback adapter, self-signed
	}}
}
