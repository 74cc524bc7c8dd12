package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/controller"
	"github.com/promscaler/promscaler/pkg/hpaexplain"
)

const explainUsage = `usage: %[1]s [NAMESPACE/]HPA [-n NAMESPACE] [-o text|json] [flags]

Reads the HPA, its target's /scale, the target's pods and every metric
through the API server as the HPA controller does, and explains step by step
the decision kube-controller-manager would take now: per metric the ready,
unready, missing and ignored pods, the usage ratio against the tolerance and
the proposal; then stabilization, the rate limits and min/max; then what the
controller's in-memory history could still hold back. Give the same HPA
flags kube-controller-manager runs with when they differ from the defaults.
See docs/explain.md.

Exit codes: 0 explained, 1 the HPA could not be read, 2 bad flags.

flags:
`

// explainOptions are the flags of "autoscaler explain".
type explainOptions struct {
	kubeconfig string
	context    string
	namespace  string
	output     string
	timeout    time.Duration
	algorithm  AlgorithmOptions
}

func (o *explainOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig file. Empty: $KUBECONFIG, then ~/.kube/config, then the in-cluster service account.")
	fs.StringVar(&o.context, "context", "", "The kubeconfig context to use.")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "The HPA's namespace when HPA has none (default: the context's namespace).")
	fs.StringVarP(&o.output, "output", "o", "text", "Output format: text or json.")
	fs.DurationVar(&o.timeout, "request-timeout", 30*time.Second, "Timeout of each API request.")
	o.algorithm.AddFlags(fs)
}

func (o *explainOptions) validate(args []string) []error {
	var errs []error
	switch {
	case len(args) == 0:
		errs = append(errs, errors.New("an HPA to explain is required ([NAMESPACE/]HPA)"))
	case len(args) > 1:
		errs = append(errs, fmt.Errorf("one HPA at a time, got %q", args))
	default:
		ns, name, _ := strings.Cut(args[0], "/")
		if !strings.Contains(args[0], "/") {
			ns, name = "", args[0]
		}
		if name == "" || strings.Contains(name, "/") || (strings.Contains(args[0], "/") && ns == "") {
			errs = append(errs, fmt.Errorf("%q: want HPA or NAMESPACE/HPA", args[0]))
		}
		if ns != "" && o.namespace != "" && ns != o.namespace {
			errs = append(errs, fmt.Errorf("%q: namespace %q conflicts with -n %q", args[0], ns, o.namespace))
		}
	}
	if o.output != "text" && o.output != "json" {
		errs = append(errs, fmt.Errorf("-o: must be text or json, got %q", o.output))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout %v: must be positive", o.timeout))
	}
	return append(errs, o.algorithm.Validate()...)
}

// MainExplain runs "autoscaler explain" as the kubectl plugin
// kubectl-hpa_explain ("kubectl hpa-explain") and returns the exit code.
func MainExplain(args []string) int {
	return runExplain("kubectl hpa-explain", args, os.Stdout, os.Stderr, nil)
}

// explainClients builds what an explanation reads through; tests replace it.
type explainClients func(rc *rest.Config, timeout time.Duration) (kubernetes.Interface, clients, error)

// runExplain implements "autoscaler explain" (and the kubectl plugin).
func runExplain(prog string, args []string, stdout, stderr io.Writer, build explainClients) int {
	o := &explainOptions{algorithm: NewAlgorithmOptions()}
	fs := pflag.NewFlagSet(prog, pflag.ContinueOnError)
	o.addFlags(fs)
	if code, ok := parseFlags(fs, args, fmt.Sprintf(explainUsage, prog), stdout, stderr, func() []error { return o.validate(fs.Args()) }); !ok {
		return code
	}
	cfg, err := o.algorithm.Config()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := explain(ctx, o, cfg, fs.Arg(0), stdout, build); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	return 0
}

func explain(ctx context.Context, o *explainOptions, cfg autoscaler.Config, arg string, stdout io.Writer, build explainClients) error {
	loader := clientConfig(o.kubeconfig, o.context)
	rc, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the Kubernetes client configuration: %w", err)
	}
	rc.UserAgent = componentName + "-explain"
	namespace, name, found := strings.Cut(arg, "/")
	if !found {
		name, namespace = arg, o.namespace
		if namespace == "" {
			if namespace, _, err = loader.Namespace(); err != nil {
				return fmt.Errorf("reading the context's namespace: %w", err)
			}
		}
	}
	if build == nil {
		build = newClients
	}
	kube, cl, err := build(rc, o.timeout)
	if err != nil {
		return err
	}
	clk := clock.RealClock{}
	core, err := autoscaler.New(cfg, clk)
	if err != nil {
		return err
	}
	e, err := hpaexplain.New(hpaexplain.Config{
		Autoscaler: core,
		HPAs:       hpaexplain.HPAsFrom(kube),
		Pods:       hpaexplain.PodsFrom(kube),
		Scales:     cl.scales,
		Mapper:     cl.mapper,
		Metrics:    &controller.MetricsReader{Client: cl.metrics, Timeout: o.timeout, Clock: clk},
		Clock:      clk,
		Timeout:    o.timeout,
	})
	if err != nil {
		return err
	}
	x, err := e.Explain(ctx, namespace, name)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return x.WriteJSON(stdout)
	}
	return x.WriteText(stdout)
}
