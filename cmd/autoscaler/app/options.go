package app

import (
	goflag "flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/controller"
)

// componentName names the controller in events, leases, user agents and logs.
const componentName = "promscaler-autoscaler"

// Feature gates --feature-gates accepts: the kube-controller-manager gates
// that change the HPA algorithm.
const (
	gateScaleToZero       = "HPAScaleToZero"
	gatePodLevelResources = "PodLevelResources"
	gateGeneration        = "HPAGeneration"
	gateStaleConsistency  = "StaleControllerConsistencyHPA"
)

var knownGates = []string{gateGeneration, gateScaleToZero, gatePodLevelResources, gateStaleConsistency}

// Options are the controller's command-line options. The HPA flags carry
// kube-controller-manager's names, defaults and meanings.
type Options struct {
	// Kubeconfig is the kubeconfig file; empty means $KUBECONFIG, then the
	// in-cluster service account.
	Kubeconfig string
	// KubeAPIQPS and KubeAPIBurst limit requests to the API server.
	KubeAPIQPS   float32
	KubeAPIBurst int

	// Mode is "coexist" (beside kube-controller-manager's HPA controller,
	// the default) or "full".
	Mode string
	// HPASelector (a label selector) and Namespaces choose the HPAs this
	// controller owns; empty: all.
	HPASelector string
	Namespaces  []string

	SyncPeriod time.Duration
	Workers    int
	// AlgorithmOptions are the flags that change the HPA algorithm itself
	// (shared with "autoscaler explain").
	AlgorithmOptions

	// RequestTimeout bounds each API request of a reconcile.
	RequestTimeout time.Duration
	// DryRun decides and records without writing /scale or HPA status.
	DryRun bool
	// DryRunAnnotate, with DryRun, records each changed decision in the
	// HPA annotation promscaler.io/dry-run-decision.
	DryRunAnnotate bool

	// MetricsBindAddress serves /metrics, /healthz and /readyz; "0"
	// disables the endpoint.
	MetricsBindAddress string

	LeaderElect                  bool
	LeaderElectLeaseDuration     time.Duration
	LeaderElectRenewDeadline     time.Duration
	LeaderElectRetryPeriod       time.Duration
	LeaderElectFenceMargin       time.Duration
	LeaderElectResourceName      string
	LeaderElectResourceNamespace string
}

// NewOptions returns the options with kube-controller-manager's defaults.
func NewOptions() *Options {
	return &Options{
		KubeAPIQPS:                   20,
		KubeAPIBurst:                 30,
		Mode:                         string(controller.ModeCoexist),
		SyncPeriod:                   15 * time.Second,
		Workers:                      5,
		AlgorithmOptions:             NewAlgorithmOptions(),
		RequestTimeout:               controller.DefaultRequestTimeout,
		MetricsBindAddress:           ":8080",
		LeaderElect:                  true,
		LeaderElectLeaseDuration:     15 * time.Second,
		LeaderElectRenewDeadline:     10 * time.Second,
		LeaderElectRetryPeriod:       2 * time.Second,
		LeaderElectFenceMargin:       2 * time.Second,
		LeaderElectResourceName:      componentName,
		LeaderElectResourceNamespace: "kube-system",
	}
}

// Flags returns every flag, klog's included, in the named sections --help
// prints.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("Kubernetes API")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to a kubeconfig file. Empty: $KUBECONFIG, then the in-cluster service account.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "QPS to use while talking with the Kubernetes API server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst to use while talking with the Kubernetes API server.")

	fs = fss.FlagSet("controller")
	fs.StringVar(&o.Mode, "mode", o.Mode,
		"coexist: run beside kube-controller-manager's HPA controller and act only on HPAs with promscaler.io annotations (scale to zero and back, fallback replicas). "+
			"full: be the HPA controller, for clusters without kube-controller-manager's (see docs/autoscaler.md).")
	fs.StringVar(&o.HPASelector, "hpa-selector", o.HPASelector,
		"Label selector choosing the HPAs this controller owns (e.g. promscaler.io/controller=promscaler); empty: every HPA.")
	fs.StringSliceVar(&o.Namespaces, "namespaces", o.Namespaces,
		"Comma-separated namespaces whose HPAs this controller owns; empty: all namespaces.")
	fs.DurationVar(&o.SyncPeriod, "horizontal-pod-autoscaler-sync-period", o.SyncPeriod,
		"The period for syncing the number of pods in horizontal pod autoscaler.")
	fs.IntVar(&o.Workers, "concurrent-horizontal-pod-autoscaler-syncs", o.Workers,
		"The number of horizontal pod autoscaler objects that are allowed to sync concurrently.")
	o.AlgorithmOptions.AddFlags(fss.FlagSet("algorithm (kube-controller-manager's)"))
	fs.DurationVar(&o.RequestTimeout, "api-request-timeout", o.RequestTimeout,
		"Timeout of each API request of a reconcile (scale, metrics APIs, status).")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun,
		"Decide and record (events, /metrics) but never update /scale or HPA status; safe beside the built-in HPA controller.")
	fs.BoolVar(&o.DryRunAnnotate, "dry-run-annotate", o.DryRunAnnotate,
		"With --dry-run, also write each changed decision to the HPA annotation promscaler.io/dry-run-decision. A built-in HPA controller's status write racing it fails with a conflict; see docs/autoscaler.md.")

	fs = fss.FlagSet("serving")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		"Address serving /metrics, /healthz and /readyz (host:port); 0 disables it.")

	fs = fss.FlagSet("leader election")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Start a leader election client and gain leadership (a Lease) before reconciling; for running several replicas.")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", o.LeaderElectLeaseDuration,
		"How long non-leader candidates wait after observing a renewal before trying to take the lease.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", o.LeaderElectRenewDeadline,
		"How long the leader keeps retrying to renew before it gives up leadership. Must be less than the lease duration.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", o.LeaderElectRetryPeriod,
		"How long clients wait between attempts to acquire or renew the lease.")
	fs.DurationVar(&o.LeaderElectFenceMargin, "leader-elect-fence-margin", o.LeaderElectFenceMargin,
		"Writes (/scale, HPA status and annotations, events) are made only until the lease duration less this margin after the last successful lease renewal; past it the workers stop and the process exits. Must be less than the lease duration.")
	fs.StringVar(&o.LeaderElectResourceName, "leader-elect-resource-name", o.LeaderElectResourceName,
		"Name of the Lease object used for leader election.")
	fs.StringVar(&o.LeaderElectResourceNamespace, "leader-elect-resource-namespace", o.LeaderElectResourceNamespace,
		"Namespace of the Lease object used for leader election.")

	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fss.FlagSet("logging").AddGoFlagSet(klogFlags)
	return fss
}

// AddFlags registers the flags of every section on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	addSections(fs, o.Flags())
}

// addSections adds the flags of every section to fs.
func addSections(fs *pflag.FlagSet, fss cliflag.NamedFlagSets) {
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
}

// Validate checks every option and returns all the problems found, each
// naming its flag.
func (o *Options) Validate() []error {
	var errs []error
	positive := func(flag string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s %v: must be positive", flag, d))
		}
	}
	if o.Kubeconfig != "" {
		if _, err := os.Stat(o.Kubeconfig); err != nil {
			errs = append(errs, fmt.Errorf("--kubeconfig: %w", err))
		}
	}
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps %v: must be positive", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst %d: must be at least 1", o.KubeAPIBurst))
	}
	switch controller.Mode(o.Mode) {
	case controller.ModeCoexist:
		if o.DryRun {
			errs = append(errs, fmt.Errorf("--dry-run: needs --mode=full (it shadows the full HPA controller)"))
		}
	case controller.ModeFull:
	default:
		errs = append(errs, fmt.Errorf("--mode %q: want coexist or full", o.Mode))
	}
	if _, err := labels.Parse(o.HPASelector); err != nil {
		errs = append(errs, fmt.Errorf("--hpa-selector %q: %w", o.HPASelector, err))
	}
	for _, ns := range o.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--namespaces: %q: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	positive("horizontal-pod-autoscaler-sync-period", o.SyncPeriod)
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--concurrent-horizontal-pod-autoscaler-syncs %d: must be greater than 0", o.Workers))
	}
	errs = append(errs, o.AlgorithmOptions.Validate()...)
	positive("api-request-timeout", o.RequestTimeout)
	if o.DryRunAnnotate && !o.DryRun {
		errs = append(errs, fmt.Errorf("--dry-run-annotate: needs --dry-run"))
	}
	if o.MetricsBindAddress != "0" {
		if _, _, err := net.SplitHostPort(o.MetricsBindAddress); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-bind-address %q: %w (want host:port, or 0 to disable)", o.MetricsBindAddress, err))
		}
	}
	if o.LeaderElect {
		positive("leader-elect-lease-duration", o.LeaderElectLeaseDuration)
		positive("leader-elect-renew-deadline", o.LeaderElectRenewDeadline)
		positive("leader-elect-retry-period", o.LeaderElectRetryPeriod)
		positive("leader-elect-fence-margin", o.LeaderElectFenceMargin)
		if o.LeaderElectFenceMargin > 0 && o.LeaderElectFenceMargin >= o.LeaderElectLeaseDuration {
			errs = append(errs, fmt.Errorf("--leader-elect-fence-margin %v: must be less than --leader-elect-lease-duration %v",
				o.LeaderElectFenceMargin, o.LeaderElectLeaseDuration))
		}
		if o.LeaderElectRenewDeadline > 0 && o.LeaderElectLeaseDuration <= o.LeaderElectRenewDeadline {
			errs = append(errs, fmt.Errorf("--leader-elect-lease-duration %v: must be greater than --leader-elect-renew-deadline %v",
				o.LeaderElectLeaseDuration, o.LeaderElectRenewDeadline))
		}
		if o.LeaderElectRetryPeriod > 0 && o.LeaderElectRenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(o.LeaderElectRetryPeriod)) {
			errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline %v: must be greater than %v × --leader-elect-retry-period %v",
				o.LeaderElectRenewDeadline, leaderelection.JitterFactor, o.LeaderElectRetryPeriod))
		}
		if o.LeaderElectResourceName == "" {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-name: required with --leader-elect"))
		}
		if o.LeaderElectResourceNamespace == "" {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-namespace: required with --leader-elect"))
		}
	}
	return errs
}

// Config turns valid options into the plain configuration Complete wires.
func (o *Options) Config() (*Config, error) {
	if errs := o.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid options: %v", errs)
	}
	core, err := o.AlgorithmOptions.Config()
	if err != nil {
		return nil, err
	}
	selector, err := labels.Parse(o.HPASelector)
	if err != nil {
		return nil, fmt.Errorf("--hpa-selector: %w", err)
	}
	if selector.Empty() {
		selector = nil
	}
	c := &Config{
		Mode:               controller.Mode(o.Mode),
		Selector:           selector,
		Namespaces:         o.Namespaces,
		Kubeconfig:         o.Kubeconfig,
		QPS:                o.KubeAPIQPS,
		Burst:              o.KubeAPIBurst,
		Autoscaler:         core,
		SyncPeriod:         o.SyncPeriod,
		Workers:            o.Workers,
		RequestTimeout:     o.RequestTimeout,
		DryRun:             o.DryRun,
		DryRunAnnotate:     o.DryRunAnnotate,
		MetricsBindAddress: o.MetricsBindAddress,
		StaleReadCheck:     true,
	}
	if on, ok := o.FeatureGates[gateStaleConsistency]; ok {
		c.StaleReadCheck = on
	}
	if o.MetricsBindAddress == "0" {
		c.MetricsBindAddress = ""
	}
	if o.LeaderElect {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("leader election identity: %w", err)
		}
		c.LeaderElection = &LeaderElectionConfig{
			Name:          o.LeaderElectResourceName,
			Namespace:     o.LeaderElectResourceNamespace,
			Identity:      host + "_" + string(uuid.NewUUID()),
			LeaseDuration: o.LeaderElectLeaseDuration,
			RenewDeadline: o.LeaderElectRenewDeadline,
			RetryPeriod:   o.LeaderElectRetryPeriod,
			FenceMargin:   o.LeaderElectFenceMargin,
		}
	}
	return c, nil
}

// AlgorithmOptions are the kube-controller-manager flags and feature gates
// that change the HPA algorithm, with its names, defaults and meanings.
type AlgorithmOptions struct {
	DownscaleStabilization  time.Duration
	Tolerance               float64
	CPUInitializationPeriod time.Duration
	InitialReadinessDelay   time.Duration
	// FeatureGates overrides the HPA feature gates (all default to on, as
	// in Kubernetes 1.37).
	FeatureGates map[string]bool
}

// NewAlgorithmOptions returns kube-controller-manager's defaults.
func NewAlgorithmOptions() AlgorithmOptions {
	def := autoscaler.DefaultConfig()
	return AlgorithmOptions{
		DownscaleStabilization:  def.DownscaleStabilizationWindow,
		Tolerance:               def.Tolerance,
		CPUInitializationPeriod: def.CPUInitializationPeriod,
		InitialReadinessDelay:   def.InitialReadinessDelay,
		FeatureGates:            map[string]bool{},
	}
}

// AddFlags registers the algorithm flags on fs.
func (o *AlgorithmOptions) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.DownscaleStabilization, "horizontal-pod-autoscaler-downscale-stabilization", o.DownscaleStabilization,
		"The period for which autoscaler will look backwards and not scale down below any recommendation it made during that period.")
	fs.Float64Var(&o.Tolerance, "horizontal-pod-autoscaler-tolerance", o.Tolerance,
		"The minimum change (from 1.0) in the desired-to-actual metrics ratio for the horizontal pod autoscaler to consider scaling.")
	fs.DurationVar(&o.CPUInitializationPeriod, "horizontal-pod-autoscaler-cpu-initialization-period", o.CPUInitializationPeriod,
		"The period after pod start when CPU samples might be skipped.")
	fs.DurationVar(&o.InitialReadinessDelay, "horizontal-pod-autoscaler-initial-readiness-delay", o.InitialReadinessDelay,
		"The period after pod start during which readiness changes will be treated as initial readiness.")
	fs.Var(cliflag.NewMapStringBool(&o.FeatureGates), "feature-gates",
		"Comma-separated key=true|false pairs overriding the HPA feature gates of Kubernetes 1.37 (all on by default): "+strings.Join(knownGates, ", ")+".")
}

// Validate reports every invalid algorithm flag, each naming its flag.
func (o *AlgorithmOptions) Validate() []error {
	var errs []error
	notNegative := func(flag string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("--%s %v: must not be negative", flag, d))
		}
	}
	notNegative("horizontal-pod-autoscaler-downscale-stabilization", o.DownscaleStabilization)
	if o.Tolerance < 0 || o.Tolerance != o.Tolerance {
		errs = append(errs, fmt.Errorf("--horizontal-pod-autoscaler-tolerance %v: must not be negative", o.Tolerance))
	}
	notNegative("horizontal-pod-autoscaler-cpu-initialization-period", o.CPUInitializationPeriod)
	notNegative("horizontal-pod-autoscaler-initial-readiness-delay", o.InitialReadinessDelay)
	for gate := range o.FeatureGates {
		if !slices.Contains(knownGates, gate) {
			errs = append(errs, fmt.Errorf("--feature-gates: unknown gate %q (known: %s)", gate, strings.Join(knownGates, ", ")))
		}
	}
	return errs
}

// Config returns the decision core's settings the flags give.
func (o *AlgorithmOptions) Config() (autoscaler.Config, error) {
	core := autoscaler.DefaultConfig()
	core.Tolerance = o.Tolerance
	core.DownscaleStabilizationWindow = o.DownscaleStabilization
	core.CPUInitializationPeriod = o.CPUInitializationPeriod
	core.InitialReadinessDelay = o.InitialReadinessDelay
	for gate, on := range o.FeatureGates {
		switch gate {
		case gateScaleToZero:
			core.Features.ScaleToZero = on
		case gatePodLevelResources:
			core.Features.PodLevelResources = on
		case gateGeneration:
			core.Features.ObservedGeneration = on
		}
	}
	if errs := core.Validate(); len(errs) > 0 {
		return core, fmt.Errorf("invalid HPA settings: %v", errs)
	}
	return core, nil
}
