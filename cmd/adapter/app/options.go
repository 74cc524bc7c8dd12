package app

import (
	goflag "flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/types"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"
	cmoptions "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd/options"

	"github.com/promscaler/promscaler/internal/certauth"
	"github.com/promscaler/promscaler/internal/turns"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/provider"
	"github.com/promscaler/promscaler/pkg/reload"
	"github.com/promscaler/promscaler/pkg/resourcemetrics"
	"github.com/promscaler/promscaler/pkg/server"
	"github.com/promscaler/promscaler/pkg/teamrules"
	"github.com/promscaler/promscaler/pkg/tenancy"
)

// serverName names the API server in logs and its OpenAPI document.
const serverName = "promscaler-adapter"

// ServerOptions are the adapter server's command-line options:
// custom-metrics-apiserver's (serving, delegated authentication and
// authorization, audit, features, --lister-kubeconfig...), the Prometheus
// client's, and the discovery and configuration flags. Names and meanings
// follow prometheus-adapter, so a deployment swaps the image and keeps its
// args.
type ServerOptions struct {
	// Base is the custom-metrics-apiserver adapter; it owns the API server
	// options and the Kubernetes clients.
	Base *basecmd.AdapterBase
	// Prometheus configures the Prometheus client.
	Prometheus *promclient.Options

	// ConfigFiles are the rules files and directories of rules files
	// (prometheus-adapter's format), in order: --config, repeatable.
	ConfigFiles []string
	// Strict refuses to start when a rules file has a query Prometheus
	// would reject (loaded with an error logged otherwise, as
	// prometheus-adapter does).
	Strict bool
	// Discovery's Interval (--metrics-relist-interval), MaxAge
	// (--metrics-max-age) and Strategy (--discovery-strategy) are set by
	// the flags; the server fills in the rest.
	Discovery discovery.Options
	// Shared configures shared evaluation: MaxAge is
	// --shared-evaluation-max-age (0 disables sharing).
	Shared provider.SharedConfig
	// ConfigReloadInterval is how often the rules file is checked for
	// changes; zero disables hot reload.
	ConfigReloadInterval time.Duration
	// AllowEmptyRulesReload lets a reload take the rules from some to none.
	AllowEmptyRulesReload bool
	// DisableHTTP2 serves HTTP/1.1 only (prometheus-adapter's mitigation for
	// HTTP/2 rapid reset, CVE-2023-44487).
	DisableHTTP2 bool
	// ClientCertCacheTTL is how long a client certificate chain that
	// verified is trusted without verifying it again (certauth); zero
	// verifies on every request, as the library does.
	ClientCertCacheTTL time.Duration
	// MaxConcurrentAnswers is --max-concurrent-answers
	// (server.Config.MaxConcurrentAnswers; 0: no bound).
	MaxConcurrentAnswers int
	// TeamRules serves the rules of ConfigMaps labelled
	// promscaler.io/rules=true, each confined to its namespace.
	TeamRules bool
	// TeamRulesNamespaces limits TeamRules to these namespaces (all when
	// empty).
	TeamRulesNamespaces []string
	// TeamRulesNamespaceLabel is the series label every selector of a
	// team's queries is confined on.
	TeamRulesNamespaceLabel string
	// TeamRulesBackends are namespace:backend pairs: the named backends a
	// namespace's team rules may use (default: the default backend only).
	TeamRulesBackends []string
	// TeamRulesMaxRules and TeamRulesMaxConfigMaps bound a ConfigMap's
	// rules and the ConfigMaps in service.
	TeamRulesMaxRules, TeamRulesMaxConfigMaps int
	// TeamRulesMaxWaiting is --team-rules-max-waiting, every backend's
	// GuardConfig.MaxWaitingPerTeam: the requests of one namespace's team
	// rules waiting on its answers. 0: no bound per team; nil (the flag
	// not given): a quarter of each backend's own waiting bound.
	TeamRulesMaxWaiting *int
	// TeamRulesMaxInFlight is --team-rules-max-in-flight, every backend's
	// GuardConfig.MaxConcurrentPerTeam: one namespace's team rule requests
	// in flight to it at once. 0: no bound per team.
	TeamRulesMaxInFlight int
	// SchedulesFile is --schedules-config (schedules.go).
	SchedulesFile string
	// DownstreamConfig is the file of the downstream metrics servers
	// (--downstream-config), empty for none.
	DownstreamConfig string

	// flags is the flag set AddFlags registered on: klog's and
	// component-base's logging flags keep their values there.
	flags *pflag.FlagSet
}

// DefaultAuthorizationAllowCacheTTL is the default of
// --authorization-webhook-cache-authorized-ttl: an allowed
// SubjectAccessReview answer is reused for 3 minutes (12 HPA periods), so
// a revoked permission keeps working for at most that long; denials keep
// the library's 10 s (--authorization-webhook-cache-unauthorized-ttl), so
// a granted permission takes effect within 10 s.
const DefaultAuthorizationAllowCacheTTL = 3 * time.Minute

// NewServerOptions returns the options with their defaults.
func NewServerOptions() *ServerOptions {
	base := &basecmd.AdapterBase{
		CustomMetricsAdapterServerOptions: cmoptions.NewCustomMetricsAdapterServerOptions(),
		Name:                              serverName,
		DiscoveryInterval:                 10 * time.Minute,
	}
	// One SubjectAccessReview per HPA request cost kube-apiserver more than
	// the query costs Prometheus: the library's 10 s authorized TTL is
	// shorter than the HPA's 15 s sync period, so every request missed the
	// cache. See docs/adapter.md, "Authorization cache".
	base.Authorization.AllowCacheTTL = DefaultAuthorizationAllowCacheTTL
	return &ServerOptions{
		Base:                 base,
		Prometheus:           promclient.NewOptions(),
		Discovery:            discovery.Options{Interval: time.Minute, Strategy: discovery.StrategyLabels, MaxTeamRuleMetrics: discovery.DefaultMaxTeamRuleMetrics},
		Shared:               provider.SharedConfig{MaxAge: provider.DefaultSharedMaxAge},
		ConfigReloadInterval: reload.DefaultInterval,
		ClientCertCacheTTL:   certauth.DefaultTTL,
		MaxConcurrentAnswers: turns.Default(),

		TeamRulesNamespaceLabel: tenancy.DefaultLabel,
		TeamRulesMaxRules:       teamrules.DefaultMaxRulesPerConfigMap,
		TeamRulesMaxConfigMaps:  teamrules.DefaultMaxConfigMaps,
		TeamRulesMaxInFlight:    promclient.DefaultMaxConcurrentPerTeam,
	}
}

// Sections of --help, in order.
const (
	sectionPrometheus = "Prometheus"
	sectionDiscovery  = "discovery"
	sectionRules      = "rules and team rules"
	sectionServing    = "serving"
	sectionAuth       = "authentication and authorization"
	sectionAudit      = "audit"
	sectionAPIServer  = "generic API server"
	sectionKube       = "Kubernetes clients"
	sectionLogging    = "logging"
)

// Flags returns every server flag, klog's included, in the named sections
// --help prints.
func (o *ServerOptions) Flags() cliflag.NamedFlagSets {
	fss := cliflag.NamedFlagSets{NormalizeNameFunc: cliflag.WordSepNormalizeFunc}
	for _, name := range []string{sectionPrometheus, sectionDiscovery, sectionRules, sectionDownstream, sectionServing, sectionAuth,
		sectionAudit, sectionAPIServer, sectionKube, sectionLogging} {
		fss.FlagSet(name)
	}
	o.Prometheus.AddFlags(fss.FlagSet(sectionPrometheus))
	o.addDiscoveryFlags(fss.FlagSet(sectionDiscovery))
	o.addRulesFlags(fss.FlagSet(sectionRules))
	o.addScheduleFlags(fss.FlagSet(sectionRules))
	o.addDownstreamFlags(fss.FlagSet(sectionDownstream))
	o.addLibraryFlags(&fss)

	serving := fss.FlagSet(sectionServing)
	serving.BoolVar(&o.DisableHTTP2, "disable-http2", o.DisableHTTP2,
		"Serve HTTP/1.1 only (mitigates HTTP/2 rapid reset, CVE-2023-44487); prometheus-adapter's name for --disable-http2-serving.")
	// --gc-heap-floor set a floor under the garbage collector's heap goal
	// (128 MiB by default), which cost more memory than it saved CPU; the
	// flag is accepted and ignored so that existing manifests still start.
	serving.String("gc-heap-floor", "0", "Ignored; the Go runtime's GOGC and GOMEMLIMIT environment variables tune the garbage collector.")
	_ = serving.MarkDeprecated("gc-heap-floor", "it is ignored; use GOGC or GOMEMLIMIT")
	serving.IntVar(&o.MaxConcurrentAnswers, "max-concurrent-answers", o.MaxConcurrentAnswers,
		"The most requests building and encoding their answers at once, once their data is in hand; more wait their turn (within their deadline). A request waiting on Prometheus or writing to its client holds no turn. "+
			"It keeps a burst's requests from waiting seconds to be taken in behind hundreds of answers being built, which also let them miss the query they could have shared. Default: twice GOMAXPROCS. 0: no bound.")
	fss.FlagSet(sectionAuth).DurationVar(&o.ClientCertCacheTTL, "client-cert-verify-cache-ttl", o.ClientCertCacheTTL,
		"How long a client certificate chain (the aggregator's front-proxy certificate, a client's) that verified against the current CA bundle is trusted on later requests without verifying its signatures again; "+
			"never beyond a certificate's validity, and a CA bundle change verifies again. 0 verifies on every request.")

	// klog's flags, every one prometheus-adapter's manifests pass
	// (--logtostderr, --v, --vmodule, --log-dir...), then
	// component-base's --log-flush-frequency. Names are matched with "_" or
	// "-" alike (--log_dir, --log-dir).
	logging := fss.FlagSet(sectionLogging)
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	logging.AddGoFlagSet(klogFlags)
	logs.AddFlags(logging)
	return fss
}

// addDiscoveryFlags registers the discovery flags, bound to o.Discovery.
func (o *ServerOptions) addDiscoveryFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.Discovery.Interval, "metrics-relist-interval", o.Discovery.Interval,
		"Interval at which to re-discover the available metrics from Prometheus.")
	fs.DurationVar(&o.Discovery.MaxAge, "metrics-max-age", o.Discovery.MaxAge,
		"How far back discovery looks for series; 0 means the relist interval. Must not be less than the relist interval.")
	fs.Var(&o.Discovery.Strategy, "discovery-strategy",
		"How discovery asks Prometheus: labels (index-only label endpoints with match[], cheapest; block-granular over --metrics-max-age like series), "+
			"grouped (one last_over_time query per seriesQuery, sample-precise but Prometheus reads every series' samples) or series (/api/v1/series, as prometheus-adapter).")
	fs.DurationVar(&o.Shared.MaxAge, "shared-evaluation-max-age", o.Shared.MaxAge,
		"The oldest shared answer served: when HPAs of several namespaces read one rule's metric, one query per rule answers them all, re-run in the background before its answer is this old. "+
			"Keep it at most the HPA sync period (kube-controller-manager's --horizontal-pod-autoscaler-sync-period, 15s by default); at most "+MaxSharedEvaluationMaxAge.String()+". 0 disables shared evaluation: every request sends its own query.")
}

// addRulesFlags registers the rules files' and team rules' flags.
func (o *ServerOptions) addRulesFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.ConfigFiles, "config", o.ConfigFiles,
		"Rules file describing how Prometheus series become custom, external and resource metrics (prometheus-adapter's format), or a directory of such files (every *.yaml in it). "+
			"May be given several times; rules of a later file come after those of an earlier one (the last rule producing a metric serves it). Each file reloads on its own.")
	fs.BoolVar(&o.Strict, "strict", o.Strict,
		"Refuse to start when a rules file has a query Prometheus would reject; without it such a file loads with an error logged, as prometheus-adapter loads it. A reload never swaps such a file in.")
	fs.DurationVar(&o.ConfigReloadInterval, "config-reload-interval", o.ConfigReloadInterval,
		"How often the --config files are checked for changes (a ConfigMap update included); a valid new version replaces the rules without a restart. 0 disables reloading.")
	fs.BoolVar(&o.AllowEmptyRulesReload, "allow-empty-rules-reload", o.AllowEmptyRulesReload,
		"Let a reload take the configuration from some rules to none (a truncated or comment-only file, an emptied directory or ConfigMap key); without it such a reload is refused and the rules in service stay. "+
			"Either way it is a warning in the log, a RulesEmptied Event and promscaler_config_rules_emptied_total. An empty configuration at startup is always valid.")
	fs.BoolVar(&o.TeamRules, "team-rules", o.TeamRules,
		"Also serve the rules of ConfigMaps labelled "+teamrules.Selector+" (each .yaml data key a rules file), each confined to its namespace: "+
			"its metrics are served for that namespace only and every query it renders selects that namespace's series only. Needs list/watch on ConfigMaps and create on events.")
	fs.StringSliceVar(&o.TeamRulesNamespaces, "team-rules-namespaces", o.TeamRulesNamespaces,
		"With --team-rules, the namespaces whose ConfigMaps are watched (comma-separated; default all).")
	fs.StringVar(&o.TeamRulesNamespaceLabel, "team-rules-namespace-label", o.TeamRulesNamespaceLabel,
		"With --team-rules, the series label holding the namespace: every selector of a team's queries gets label=\"<its namespace>\", and its rules must map this label to namespaces.")
	fs.StringSliceVar(&o.TeamRulesBackends, "team-rules-backends", o.TeamRulesBackends,
		"With --team-rules, namespace:backend pairs (comma-separated, e.g. team-a:thanos,team-b:thanos): the --backends-config backends a namespace's team rules may name. Default: none, a team rule gets the default backend only.")
	fs.IntVar(&o.TeamRulesMaxRules, "team-rules-max-rules-per-configmap", o.TeamRulesMaxRules,
		"With --team-rules, the most rules (custom and external) one team ConfigMap may have; more is refused with a RulesRejected event.")
	fs.IntVar(&o.TeamRulesMaxConfigMaps, "team-rules-max-configmaps", o.TeamRulesMaxConfigMaps,
		"With --team-rules, the most team ConfigMaps in service; one more is refused with a RulesRejected event.")
	fs.IntVar(&o.Discovery.MaxTeamRuleMetrics, "team-rules-max-metrics-per-rule", o.Discovery.MaxTeamRuleMetrics,
		"With --team-rules, the most distinct metrics one team rule may produce: a rule discovering more serves none and its ConfigMap gets a RulesRejected event naming the rule, its count and this limit.")
	fs.Var(optionalInt{&o.TeamRulesMaxWaiting}, "team-rules-max-waiting",
		"With --team-rules, the most requests of one namespace's team rules waiting on one backend's answers: one more waits 1s at most, then is answered 503 naming the namespace, so that one team's slow queries leave the rest of the backend's bound to the cluster's rules and the other teams. "+
			"Default: a quarter of each backend's bound (--prometheus-max-waiting or its max_waiting; 10 of the default 40). 0: no bound per team.")
	fs.IntVar(&o.TeamRulesMaxInFlight, "team-rules-max-in-flight", o.TeamRulesMaxInFlight,
		"With --team-rules, the most queries of one namespace's team rules a backend evaluates at once; more wait (within their deadline and --team-rules-max-waiting) for one of them to finish, so that one team's heavy queries take a bounded share of the backend. "+
			"0: no bound per team.")
}

// addLibraryFlags registers custom-metrics-apiserver's flags (the adapter
// base installs them all on one set) in their sections: serving,
// authentication and authorization, audit, the generic API server's
// features, and the Kubernetes clients (--lister-kubeconfig, --client-qps,
// the rest).
func (o *ServerOptions) addLibraryFlags(fss *cliflag.NamedFlagSets) {
	all := pflag.NewFlagSet("custom-metrics-apiserver", pflag.ContinueOnError)
	// Never the process-wide pflag.CommandLine.
	o.Base.FlagSet = all
	o.Base.InstallFlags()
	// Which options registered which flag, from a throwaway set of them.
	probe := cmoptions.NewCustomMetricsAdapterServerOptions()
	section := map[string]string{}
	for name, add := range map[string]func(*pflag.FlagSet){
		sectionServing:   probe.SecureServing.AddFlags,
		sectionAuth:      func(fs *pflag.FlagSet) { probe.Authentication.AddFlags(fs); probe.Authorization.AddFlags(fs) },
		sectionAudit:     probe.Audit.AddFlags,
		sectionAPIServer: probe.Features.AddFlags,
	} {
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		add(fs)
		fs.VisitAll(func(f *pflag.Flag) { section[f.Name] = name })
	}
	all.VisitAll(func(f *pflag.Flag) {
		name, ok := section[f.Name]
		if !ok {
			name = sectionKube
		}
		fss.FlagSet(name).AddFlag(f)
	})
}

// AddFlags registers every server flag of every section on fs.
func (o *ServerOptions) AddFlags(fs *pflag.FlagSet) {
	addSections(fs, o.Flags())
	o.flags = fs
}

// addSections adds the flags of every section to fs, names matched with
// "_" or "-" alike.
func addSections(fs *pflag.FlagSet, fss cliflag.NamedFlagSets) {
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
}

// Validate checks every option and returns all the problems found, each
// naming its flag.
func (o *ServerOptions) Validate() []error {
	var errs []error
	errs = append(errs, o.Base.CustomMetricsAdapterServerOptions.Validate()...)
	errs = append(errs, o.Prometheus.Validate()...)
	if len(o.ConfigFiles) == 0 {
		errs = append(errs, fmt.Errorf("--config: required (a rules file or a directory of rules files)"))
	}
	for _, f := range o.ConfigFiles {
		if _, err := os.Stat(f); err != nil {
			errs = append(errs, fmt.Errorf("--config: %w", err))
		}
	}
	d := o.Discovery
	if d.Interval <= 0 {
		errs = append(errs, fmt.Errorf("--metrics-relist-interval %v: must be positive", d.Interval))
	}
	if d.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("--metrics-max-age %v: must not be negative", d.MaxAge))
	} else if d.MaxAge != 0 && d.Interval > 0 && d.MaxAge < d.Interval {
		errs = append(errs, fmt.Errorf("--metrics-max-age %v: must not be less than --metrics-relist-interval %v", d.MaxAge, d.Interval))
	}
	if a := o.Shared.MaxAge; a < 0 || a > MaxSharedEvaluationMaxAge || (a > 0 && a < time.Second) {
		errs = append(errs, fmt.Errorf("--shared-evaluation-max-age %v: must be 0 (sharing off) or between 1s and %v; keep it at most the HPA sync period (15s by default)", a, MaxSharedEvaluationMaxAge))
	}
	if o.ConfigReloadInterval < 0 {
		errs = append(errs, fmt.Errorf("--config-reload-interval %v: must not be negative (0 disables reloading)", o.ConfigReloadInterval))
	}
	if o.ClientCertCacheTTL < 0 {
		errs = append(errs, fmt.Errorf("--client-cert-verify-cache-ttl %v: must not be negative (0 verifies on every request)", o.ClientCertCacheTTL))
	}
	if o.MaxConcurrentAnswers < 0 {
		errs = append(errs, fmt.Errorf("--max-concurrent-answers %d: must not be negative (0: no bound)", o.MaxConcurrentAnswers))
	}
	errs = append(errs, o.validateTeamRules()...)
	errs = append(errs, o.validateSchedules()...)
	errs = append(errs, o.validateDownstream()...)
	if o.Base.ClientQPS < 0 || o.Base.ClientBurst < 0 {
		errs = append(errs, fmt.Errorf("--client-qps/--client-burst: must not be negative"))
	}
	return errs
}

// Config builds the server's configuration from validated options: the
// generic API server's configuration (this binds the serving port) and
// plain values.
func (o *ServerOptions) Config() (*server.Config, error) {
	base := o.Base
	// The OpenAPI document knows the types of every metrics group the
	// server may install.
	resourcemetrics.SetOpenAPIConfig(base)
	// /metrics is the server's own (the adapter's registry and the
	// Kubernetes component metrics), not the generic server's.
	base.CustomMetricsAdapterServerOptions.EnableMetrics = false
	apiConfig, err := base.Config()
	if err != nil {
		return nil, fmt.Errorf("configuring the API server: %w", err)
	}
	if o.DisableHTTP2 && apiConfig.GenericConfig.SecureServing != nil {
		apiConfig.GenericConfig.SecureServing.DisableHTTP2 = true
	}
	informers, err := base.Informers()
	if err != nil {
		return nil, fmt.Errorf("building the informers: %w", err)
	}
	backends, err := o.backends()
	if err != nil {
		return nil, err
	}
	providers, err := o.scheduleProviders()
	if err != nil {
		return nil, err
	}
	return &server.Config{
		NewProviders:          providers,
		Name:                  base.Name,
		APIServer:             apiConfig,
		Informers:             informers,
		Kube:                  base,
		RulesFiles:            o.ConfigFiles,
		Strict:                o.Strict,
		ConfigReloadInterval:  o.ConfigReloadInterval,
		AllowEmptyRulesReload: o.AllowEmptyRulesReload,
		Backends:              backends,
		BackendsFile:          o.Prometheus.BackendsFile,
		Discovery:             o.Discovery,
		Shared:                o.sharedConfig(),
		ClientCertCacheTTL:    o.ClientCertCacheTTL,
		MaxConcurrentAnswers:  o.MaxConcurrentAnswers,
		TeamRules:             o.teamRules(),
		DownstreamConfig:      o.DownstreamConfig,
		// The downward API's (deploy/base, the chart): Events go to the
		// adapter's own Pod.
		Pod: types.NamespacedName{Namespace: os.Getenv("POD_NAMESPACE"), Name: os.Getenv("POD_NAME")},
	}, nil
}

// MaxSharedEvaluationMaxAge bounds --shared-evaluation-max-age: an HPA
// acting on a value older than a few of its periods reacts late.
const MaxSharedEvaluationMaxAge = time.Minute

// sharedConfig is o.Shared with a zero MaxAge meaning "off".
func (o *ServerOptions) sharedConfig() provider.SharedConfig {
	c := o.Shared
	c.Disabled = c.Disabled || c.MaxAge == 0
	return c
}

func (o *ServerOptions) validateTeamRules() []error {
	var errs []error
	if !o.TeamRules && len(o.TeamRulesNamespaces) > 0 {
		errs = append(errs, fmt.Errorf("--team-rules-namespaces: needs --team-rules"))
	}
	if _, err := tenancy.New(o.TeamRulesNamespaceLabel, "probe"); err != nil {
		errs = append(errs, fmt.Errorf("--team-rules-namespace-label: %w", err))
	}
	for _, ns := range o.TeamRulesNamespaces {
		for _, msg := range validation.ValidateNamespaceName(ns, false) {
			errs = append(errs, fmt.Errorf("--team-rules-namespaces: %q: %s", ns, msg))
		}
	}
	if _, err := namespaceBackends(o.TeamRulesBackends); err != nil {
		errs = append(errs, err)
	}
	if o.TeamRulesMaxRules < 1 {
		errs = append(errs, fmt.Errorf("--team-rules-max-rules-per-configmap %d: must be at least 1", o.TeamRulesMaxRules))
	}
	if o.TeamRulesMaxConfigMaps < 1 {
		errs = append(errs, fmt.Errorf("--team-rules-max-configmaps %d: must be at least 1", o.TeamRulesMaxConfigMaps))
	}
	if o.Discovery.MaxTeamRuleMetrics < 1 {
		errs = append(errs, fmt.Errorf("--team-rules-max-metrics-per-rule %d: must be at least 1", o.Discovery.MaxTeamRuleMetrics))
	}
	if o.TeamRulesMaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("--team-rules-max-in-flight %d: must not be negative (0: no bound per team)", o.TeamRulesMaxInFlight))
	}
	return append(errs, o.validateTeamWaiting()...)
}

// validateTeamWaiting checks --team-rules-max-waiting, when given, against
// the backend's own bound, which it divides.
func (o *ServerOptions) validateTeamWaiting() []error {
	if o.TeamRulesMaxWaiting == nil {
		return nil
	}
	n, bound := *o.TeamRulesMaxWaiting, o.Prometheus.MaxWaiting
	switch {
	case n < 0:
		return []error{fmt.Errorf("--team-rules-max-waiting %d: must not be negative (0: no bound per team; not given: a quarter of --prometheus-max-waiting)", n)}
	case n > 0 && bound == 0:
		return []error{fmt.Errorf("--team-rules-max-waiting %d: needs a --prometheus-max-waiting bound (it is 0: no bound on waiting requests, none per team either)", n)}
	case n > bound && bound > 0:
		return []error{fmt.Errorf("--team-rules-max-waiting %d: must not be more than --prometheus-max-waiting (%d)", n, bound)}
	}
	return nil
}

// backends are the Prometheus backends of the flags, each with the bounds
// of --team-rules-max-in-flight and --team-rules-max-waiting (the backends
// file's entries reloaded later take the default backend's).
func (o *ServerOptions) backends() ([]promclient.Backend, error) {
	backends, err := o.Prometheus.Backends()
	if err != nil {
		return nil, err
	}
	for i := range backends {
		backends[i].Guard = backends[i].Guard.WithTeamLimits(o.TeamRulesMaxInFlight, o.TeamRulesMaxWaiting)
	}
	return backends, nil
}

// namespaceBackends parses --team-rules-backends' namespace:backend pairs.
func namespaceBackends(pairs []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, p := range pairs {
		ns, backend, ok := strings.Cut(p, ":")
		if !ok || backend == "" {
			return nil, fmt.Errorf("--team-rules-backends: %q: want namespace:backend", p)
		}
		if msgs := validation.ValidateNamespaceName(ns, false); len(msgs) > 0 {
			return nil, fmt.Errorf("--team-rules-backends: %q: namespace %s", p, msgs[0])
		}
		out[ns] = append(out[ns], backend)
	}
	return out, nil
}

// teamRules is the team rules configuration, nil when off.
func (o *ServerOptions) teamRules() *teamrules.Options {
	if !o.TeamRules {
		return nil
	}
	backends, _ := namespaceBackends(o.TeamRulesBackends) // checked by Validate
	return &teamrules.Options{Namespaces: o.TeamRulesNamespaces, NamespaceLabel: o.TeamRulesNamespaceLabel,
		NamespaceBackends: backends, MaxRulesPerConfigMap: o.TeamRulesMaxRules, MaxConfigMaps: o.TeamRulesMaxConfigMaps}
}

// optionalInt is an int flag's value that tells the flag not given (nil)
// from every value given, 0 included, so that 0 can mean "no bound" while
// the default stays a derived one. --help shows no default for it (its
// String is empty until set): the usage says what not giving it means.
type optionalInt struct{ p **int }

var _ pflag.Value = optionalInt{}

// String implements pflag.Value.
func (v optionalInt) String() string {
	if v.p == nil || *v.p == nil {
		return ""
	}
	return strconv.Itoa(**v.p)
}

// Set implements pflag.Value, parsing as pflag's int flags do.
func (v optionalInt) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return err
	}
	i := int(n)
	*v.p = &i
	return nil
}

// Type implements pflag.Value.
func (optionalInt) Type() string { return "int" }
