package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

//go:embed demo-config.yaml
var demoConfig []byte

// options are the flags of both subcommands.
type options struct {
	dir           string
	envFile       string
	prometheusURL string
	adapterConfig string
	noAdapter     bool
	noKCM         bool
	verbose       bool
}

func defaultOptions() *options {
	return &options{
		dir:           "_output/localenv",
		envFile:       "_output/env.sh",
		prometheusURL: os.Getenv("PROMETHEUS_URL"),
		adapterConfig: os.Getenv("ADAPTER_CONFIG"),
	}
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.dir, "dir", o.dir, "working directory (PKI, data, logs); emptied at start")
	fs.StringVar(&o.envFile, "env-file", o.envFile, "sourceable env file to write once everything is ready")
	fs.StringVar(&o.prometheusURL, "prometheus-url", o.prometheusURL, "use this Prometheus instead of starting one (env PROMETHEUS_URL)")
	fs.StringVar(&o.adapterConfig, "adapter-config", o.adapterConfig, "adapter rules file (env ADAPTER_CONFIG; default deploy/base/config.yaml, the demo's own for demo)")
	fs.BoolVar(&o.noAdapter, "no-adapter", false, "do not start the adapter")
	fs.BoolVar(&o.noKCM, "no-controller-manager", false, "do not start kube-controller-manager")
	fs.BoolVar(&o.verbose, "v", false, "log each step")
}

func (o *options) validate() []error {
	var errs []error
	if o.dir == "" {
		errs = append(errs, errors.New("--dir: must not be empty"))
	}
	if o.adapterConfig != "" {
		if _, err := os.Stat(o.adapterConfig); err != nil {
			errs = append(errs, fmt.Errorf("--adapter-config (ADAPTER_CONFIG): %w", err))
		}
	}
	if o.prometheusURL != "" && !strings.HasPrefix(o.prometheusURL, "http://") && !strings.HasPrefix(o.prometheusURL, "https://") {
		errs = append(errs, fmt.Errorf("--prometheus-url (PROMETHEUS_URL) %q: want an http:// or https:// URL", o.prometheusURL))
	}
	return errs
}

// stack is what up and demo start.
type stack struct {
	env           *framework.Env
	exporter      *exporter.Exporter
	exporterURL   string
	prometheusURL string
	adapter       *framework.Adapter
	adapterErr    error
}

func logf(format string, args ...any) {
	fmt.Printf(">> [%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// startStack starts the control plane, the exporter and Prometheus (unless
// an external one is given), the adapter and kube-controller-manager (HPA,
// deployment and replicaset controllers) plus a pod readier standing in for
// kubelets. defaultConfig is the rules file used when none is given.
func startStack(ctx context.Context, o *options, defaultConfig string) (*stack, error) {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return nil, fmt.Errorf("--dir: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("emptying %s: %w", dir, err)
	}
	cfg := framework.Config{Dir: dir}
	if o.verbose {
		cfg.Logf = logf
	}
	t0 := time.Now()
	logf("starting etcd and kube-apiserver in %s", dir)
	env, err := framework.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &stack{env: env}
	ok := false
	defer func() {
		if !ok {
			env.Close()
		}
	}()

	if err := s.startMetrics(ctx, o); err != nil {
		return nil, err
	}
	if !o.noAdapter {
		if err := s.startAdapter(ctx, o, defaultConfig); err != nil {
			return nil, err
		}
	}
	if !o.noKCM {
		logf("starting kube-controller-manager (HPA, deployment, replicaset controllers)")
		if _, err := env.StartControllerManager(ctx, framework.ControllerManagerConfig{
			Controllers: []string{framework.HPAController, framework.DeploymentController, framework.ReplicaSetController},
		}); err != nil {
			return nil, err
		}
		// No kubelet: pods become Running, and Ready 2s after creation.
		env.RunPodReadier(ctx, "", labels.Everything(), 2*time.Second)
		env.RunServiceAccountCreator(ctx)
	}
	logf("environment ready in %s", time.Since(t0).Round(100*time.Millisecond))
	ok = true
	return s, nil
}

// startMetrics starts the test exporter and Prometheus scraping it, or
// uses the external Prometheus given.
func (s *stack) startMetrics(ctx context.Context, o *options) error {
	s.exporter = exporter.New(nil)
	addr, stop, err := s.exporter.Serve()
	if err != nil {
		return err
	}
	s.env.OnClose(stop)
	s.exporterURL = "http://" + addr

	s.prometheusURL = o.prometheusURL
	if s.prometheusURL != "" {
		logf("using Prometheus at %s", s.prometheusURL)
		return nil
	}
	logf("starting Prometheus (scraping the test exporter at %s every 1s)", s.exporterURL)
	prom, err := s.env.StartPrometheus(ctx, framework.PrometheusConfig{
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addr}, HonorLabels: true}},
	})
	if err != nil {
		return err
	}
	s.prometheusURL = prom.URL
	return nil
}

// startAdapter starts the adapter with the rules file given, or
// defaultConfig; an adapter not implemented yet is a warning.
func (s *stack) startAdapter(ctx context.Context, o *options, defaultConfig string) error {
	config := o.adapterConfig
	if config == "" {
		config = defaultConfig
	}
	config, err := filepath.Abs(config)
	if err != nil {
		return err
	}
	logf("starting the adapter with %s", config)
	s.adapter, s.adapterErr = s.env.StartAdapter(ctx, framework.AdapterConfig{
		ConfigFile: config, PrometheusURL: s.prometheusURL, ResourceMetrics: hasResourceRules(config),
	})
	if s.adapterErr != nil && !errors.Is(s.adapterErr, framework.ErrNotImplemented) {
		return s.adapterErr
	}
	if s.adapterErr != nil {
		logf("WARNING: the adapter is not implemented yet; continuing without it")
	}
	return nil
}

// hasResourceRules reports whether a rules file configures resource metrics
// (then v1beta1.metrics.k8s.io is registered too).
func hasResourceRules(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.Trim(line, `"' `), "resourceRules") {
			return true
		}
	}
	return false
}

// writeEnvFile writes the sourceable env file (atomically: up.sh waits for it).
func (s *stack) writeEnvFile(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	var b strings.Builder
	q := func(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }
	fmt.Fprintf(&b, "# promscaler local environment (make up); source this file.\n")
	fmt.Fprintf(&b, "export KUBECONFIG=%s\n", q(s.env.Kubeconfig))
	fmt.Fprintf(&b, "export PROMETHEUS_URL=%s\n", q(s.prometheusURL))
	fmt.Fprintf(&b, "export KUBECTL=%s\n", q(s.env.Tool("kubectl")))
	fmt.Fprintf(&b, "export EXPORTER_URL=%s\n", q(s.exporterURL))
	fmt.Fprintf(&b, "export PROMSCALER_ENV_DIR=%s\n", q(s.env.Dir))
	fmt.Fprintf(&b, "export PROMSCALER_APISERVER=%s\n", q(s.env.APIServerURL))
	if s.adapter != nil {
		fmt.Fprintf(&b, "export PROMSCALER_ADAPTER_URL=%s\n", q(s.adapter.URL))
	}
	fmt.Fprintf(&b, "alias kubectl=\"$KUBECTL\"\n")
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", abs, err)
	}
	tmp := abs + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", abs, err)
	}
	if err := os.Rename(tmp, abs); err != nil {
		return fmt.Errorf("writing %s: %w", abs, err)
	}
	return nil
}

func runUp(ctx context.Context, o *options) error {
	s, err := startStack(ctx, o, "deploy/base/config.yaml")
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping every process")
		s.env.Close()
		_ = os.Remove(o.envFile)
		logf("stopped")
	}()
	if err := s.writeEnvFile(o.envFile); err != nil {
		return err
	}
	logf("env file %s written; running until SIGTERM (make down)", o.envFile)
	// Exit (and stop everything) if a component dies.
	for _, p := range s.env.Processes() {
		go func() {
			select {
			case <-p.Done():
				logf("%s exited unexpectedly; last log lines:\n%s", p.Name, p.Tail(20))
			case <-ctx.Done():
			}
		}()
	}
	<-ctx.Done()
	return nil
}
