package framework

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Controller names of kube-controller-manager's --controllers flag.
const (
	HPAController        = "horizontal-pod-autoscaler-controller"
	DeploymentController = "deployment-controller"
	ReplicaSetController = "replicaset-controller"
)

// ControllerManagerConfig configures StartControllerManager.
type ControllerManagerConfig struct {
	// Controllers to run (default: the HPA controller only).
	Controllers []string
	// HPASyncPeriod is --horizontal-pod-autoscaler-sync-period (default 2s).
	HPASyncPeriod time.Duration
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
}

// StartControllerManager starts the upstream kube-controller-manager with
// only the given controllers and waits for its /healthz. Its controllers use
// their own ServiceAccounts (--use-service-account-credentials), so the HPA
// controller reads metrics with exactly the permissions it has in a cluster.
func (e *Env) StartControllerManager(ctx context.Context, cfg ControllerManagerConfig) (*Process, error) {
	return retryPortClash(func() (*Process, error) { return e.startControllerManager(ctx, cfg) })
}

func (e *Env) startControllerManager(ctx context.Context, cfg ControllerManagerConfig) (*Process, error) {
	if len(cfg.Controllers) == 0 {
		cfg.Controllers = []string{HPAController}
	}
	if cfg.HPASyncPeriod <= 0 {
		cfg.HPASyncPeriod = 2 * time.Second
	}
	if err := e.EnsureNamespace(ctx, "kube-system"); err != nil {
		return nil, err
	}
	kubeconfig, err := e.UserKubeconfig("system:kube-controller-manager")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(cfg.Controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--horizontal-pod-autoscaler-sync-period=" + cfg.HPASyncPeriod.String(),
		"--cert-dir=" + e.Dir + "/kcm-certs",
		"--profiling=false",
	}
	args = append(args, cfg.ExtraArgs...)
	p, err := e.start("kube-controller-manager", e.Tool("kube-controller-manager"), args)
	if err != nil {
		return nil, err
	}
	hc := insecureClient()
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	if err := e.waitFor(ctx, p, "kube-controller-manager /healthz", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, code, err := httpGet(ctx, hc, url)
		return err == nil && code == http.StatusOK, nil
	}); err != nil {
		return nil, err
	}
	return p, nil
}
