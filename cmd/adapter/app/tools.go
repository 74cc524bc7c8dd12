package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/discovery/explain"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/pkg/tenancy"
)

// Exit codes of the tools.
const (
	exitOK    = 0
	exitFail  = 1 // invalid configuration, metric not served, Prometheus error
	exitUsage = 2 // bad flags
)

// maxSeriesFile bounds what --series reads.
const maxSeriesFile = 1 << 30

// toolIO carries a tool's output streams.
type toolIO struct {
	stdout, stderr io.Writer
}

func (t toolIO) errorf(format string, args ...any) {
	fmt.Fprintf(t.stderr, format+"\n", args...)
}

// parseToolFlags parses args, reporting problems on stderr. It returns
// false (and the exit code) when the tool must stop.
func parseToolFlags(fs *pflag.FlagSet, args []string, t toolIO) (int, bool) {
	fs.SetOutput(t.stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		t.errorf("%s: unexpected arguments: %s", fs.Name(), strings.Join(fs.Args(), " "))
		return exitUsage, false
	}
	return 0, true
}

// newMapper returns the built-in RESTMapper, or the cluster's (API
// discovery) when kubeconfig is set.
func newMapper(kubeconfig string) (meta.RESTMapper, error) {
	if kubeconfig == "" {
		return kubemapper.New(), nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.Timeout = 30 * time.Second
	dc, err := kdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: discovering the cluster's resources: %w", err)
	}
	return restmapper.NewDiscoveryRESTMapper(groups), nil
}

// loadedRules is what loadRules found.
type loadedRules struct {
	configs []*config.Config
	set     *rules.RuleSet
	// warnings and queryErrors count what was printed.
	warnings, queryErrors int
}

// loadRules loads, validates and compiles the configuration sources (files
// and directories, as the adapter's --config), printing every error and
// warning on stderr, each naming its file, line and rule. ok is false when
// the configuration is invalid. A query Prometheus would reject is printed
// as an error but does not make ok false (the adapter loads such a file).
func loadRules(sources []string, mapper meta.RESTMapper, t toolIO) (*loadedRules, bool) {
	files, err := rules.Read(sources)
	if err != nil {
		t.errorf("%v", err)
		return nil, false
	}
	// The backend keys are checked against --backends-config by
	// checkBackends, which says which file it read.
	loaded, err := rules.Load(files, rules.Options{Mapper: mapper, AnyBackend: true})
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			t.errorf("%s", line)
		}
		return nil, false
	}
	out := &loadedRules{configs: loaded.Configs, set: loaded.Set}
	for _, w := range loaded.Warnings {
		t.errorf("warning: %s", w)
		out.warnings++
	}
	for _, e := range loaded.QueryErrors {
		t.errorf("error: %s", e)
		out.queryErrors++
	}
	return out, true
}

// readSeries reads a saved Prometheus /api/v1/series answer: the whole
// response body or its "data" array.
func readSeries(path string) ([]model.LabelSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--series: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSeriesFile+1))
	if err != nil {
		return nil, fmt.Errorf("--series %s: %w", path, err)
	}
	if len(data) > maxSeriesFile {
		return nil, fmt.Errorf("--series %s: larger than %d bytes", path, maxSeriesFile)
	}
	return parseSeries(data, path)
}

func parseSeries(data []byte, path string) ([]model.LabelSet, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("--series %s: empty file (want a /api/v1/series response or its data array)", path)
	}
	var sets []model.LabelSet
	switch trimmed[0] {
	case '[':
		if err := json.Unmarshal(trimmed, &sets); err != nil {
			return nil, fmt.Errorf("--series %s: %w", path, describeJSONError(trimmed, err))
		}
	case '{':
		var body struct {
			Status string            `json:"status"`
			Error  string            `json:"error"`
			Data   *[]model.LabelSet `json:"data"`
		}
		if err := json.Unmarshal(trimmed, &body); err != nil {
			return nil, fmt.Errorf("--series %s: %w", path, describeJSONError(trimmed, err))
		}
		if body.Status == "error" {
			return nil, fmt.Errorf("--series %s: the saved response is a Prometheus error: %s", path, body.Error)
		}
		if body.Data == nil {
			return nil, fmt.Errorf("--series %s: no \"data\" array (want a /api/v1/series response or its data array)", path)
		}
		sets = *body.Data
	default:
		return nil, fmt.Errorf("--series %s: not JSON (want a /api/v1/series response or its data array)", path)
	}
	for i, ls := range sets {
		if _, ok := ls[model.MetricNameLabel]; !ok {
			return nil, fmt.Errorf("--series %s: series %d (%s) has no __name__ label", path, i, ls)
		}
	}
	return sets, nil
}

// describeJSONError adds the line of a JSON syntax error.
func describeJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("line %d: %w", line, err)
	}
	return err
}

// checkBackends checks the rules' backend: keys against the backends file
// (its own errors first), printing every problem; it returns the file's
// backend names, and false when a problem is an error. Without a file, each
// key naming a backend other than the default is a warning: it cannot be
// checked.
func checkBackends(loaded *loadedRules, path string, t toolIO) ([]string, bool) {
	var names []string
	if path != "" {
		bs, err := promclient.LoadBackends(path, promclient.Backend{})
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				t.errorf("%s", line)
			}
			return nil, false
		}
		for _, b := range bs {
			names = append(names, b.Name)
		}
	}
	ok := true
	for _, cfg := range loaded.configs {
		for _, e := range cfg.UnknownBackends(names) {
			if path != "" {
				t.errorf("%s", e)
				ok = false
				continue
			}
			w := *e
			w.Msg, w.Hint = "names a backend other than default, not checked", "pass the adapter's --backends-config to check-config"
			t.errorf("warning: %s", &w)
			loaded.warnings++
		}
	}
	return names, ok
}

// runCheckConfig implements "adapter check-config": validate a
// configuration offline, and with --series print what discovery would serve
// from a saved /api/v1/series answer, one JSON object per line.
func runCheckConfig(args []string, stdout, stderr io.Writer) int {
	t := toolIO{stdout: stdout, stderr: stderr}
	fs := pflag.NewFlagSet("check-config", pflag.ContinueOnError)
	configPaths := fs.StringArray("config", nil, "Configuration file, or directory of *.yaml files, to check (required; may be given several times, as to the adapter).")
	strict := fs.Bool("strict", false, "Fail (exit 1) on warnings too, not only on errors: for CI.")
	seriesPath := fs.String("series", "", "A saved Prometheus /api/v1/series response (or its data array): print what discovery would serve from it.")
	kubeconfig := fs.String("kubeconfig", "", "Resolve resources with this cluster's API discovery instead of the built-in list of standard resources.")
	backendsPath := fs.String("backends-config", "", "The adapter's --backends-config: check it, and that every backend: key names one of its backends (without it, a backend: key other than default is a warning in --config files, an error in team rules).")
	teamPaths := fs.StringArray("team-configmap", nil, "A manifest of team rules ConfigMaps to check as --team-rules loads them: strictly, confined to each ConfigMap's namespace (may be given several times; --config is then optional).")
	namespaceLabel := fs.String("team-rules-namespace-label", tenancy.DefaultLabel, "The adapter's --team-rules-namespace-label, for --team-configmap.")
	downstreamPath := fs.String("downstream-config", "", "The adapter's --downstream-config: check it (every error with its line).")
	downstreamDiscovery := fs.StringArray("downstream-discovery", nil, "NAME=FILE: a saved discovery document of downstream NAME (kubectl get --raw /apis/external.metrics.k8s.io/v1beta1 against it); with it, every metric both serve is listed with who answers it (may be given several times).")
	fs.Usage = func() {
		t.errorf("usage: adapter check-config --config FILE|DIR [--config ...] [--team-configmap FILE ...] [--strict] [--backends-config FILE] [--downstream-config FILE [--downstream-discovery NAME=FILE ...]] [--series SERIES.json] [--kubeconfig FILE]\n\n%s", fs.FlagUsages())
	}
	if code, ok := parseToolFlags(fs, args, t); !ok {
		return code
	}
	if len(*configPaths) == 0 && (len(*teamPaths) == 0 || *seriesPath != "") {
		t.errorf("check-config: --config is required (without it, --team-configmap and no --series)")
		return exitUsage
	}
	if _, err := tenancy.New(*namespaceLabel, "probe"); err != nil {
		t.errorf("check-config: --team-rules-namespace-label: %v", err)
		return exitUsage
	}
	mapper, err := newMapper(*kubeconfig)
	if err != nil {
		t.errorf("check-config: %v", err)
		return exitFail
	}
	loaded, ok := &loadedRules{}, true
	if len(*configPaths) > 0 {
		if loaded, ok = loadRules(*configPaths, mapper, t); !ok {
			return exitFail
		}
	}
	backends, ok := checkBackends(loaded, *backendsPath, t)
	if !ok {
		return exitFail
	}
	teamWarnings, ok := checkTeamConfigMaps(*teamPaths, mapper, *namespaceLabel, backends, t)
	if !ok {
		return exitFail
	}
	if !checkDownstream(*downstreamPath, *downstreamDiscovery, loaded.set, *seriesPath, mapper, t) {
		return exitFail
	}
	loaded.warnings += teamWarnings
	rs := loaded.set
	// The adapter loads a file with a query Prometheus rejects, but such a
	// rule does not work; --strict fails on warnings as well.
	failed := loaded.queryErrors > 0 || *strict && loaded.warnings > 0
	if *seriesPath == "" {
		if rs != nil {
			for _, line := range summarizeConfig(loaded.configs, rs) {
				fmt.Fprintln(stdout, line)
			}
		}
		if failed {
			return exitFail
		}
		return exitOK
	}
	series, err := readSeries(*seriesPath)
	if err != nil {
		t.errorf("check-config: %v", err)
		return exitFail
	}
	in, err := discovery.MatchSeries(rs, series)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			t.errorf("%s", line)
		}
		return exitFail
	}
	idx := discovery.BuildIndex(in, discovery.IndexOptions{Scoper: discovery.MapperScoper{Mapper: mapper}})
	enc := json.NewEncoder(stdout)
	for _, line := range discoveredLines(idx) {
		if err := enc.Encode(line); err != nil {
			t.errorf("check-config: writing output: %v", err)
			return exitFail
		}
	}
	for _, r := range in {
		if len(r.Series) == 0 {
			t.errorf("note: %s: no series matched seriesQuery %s", r.Rule.Path(), r.Rule.SeriesQuery())
		} else if n := idx.RuleMetrics(r.Rule.Path()); n == 0 {
			t.errorf("note: %s: %d series matched seriesQuery but none became a metric (filtered out, or no label maps to a resource); try adapter explain", r.Rule.Path(), len(r.Series))
		}
	}
	for _, c := range idx.Conflicts() {
		t.errorf("warning: %s", c)
		failed = failed || *strict
	}
	t.errorf("%d series: %d custom metrics, %d external metrics", len(series), len(idx.CustomMetrics()), len(idx.ExternalMetrics()))
	return exitOK
}

// discoveredMetric is one line of check-config --series.
type discoveredMetric struct {
	API        string `json:"api"`
	Group      string `json:"group"`
	Resource   string `json:"resource"`
	Namespaced bool   `json:"namespaced"`
	Metric     string `json:"metric"`
	SeriesName string `json:"seriesName"`
	Rule       string `json:"rule"`
}

// discoveredLines lists what the index serves: per custom metric and
// resource, each (rule, series) that wins in at least one namespace; per
// external metric, likewise.
func discoveredLines(idx *discovery.Index) []discoveredMetric {
	var out []discoveredMetric
	for _, info := range idx.CustomMetrics() {
		for _, c := range winners(idx.CustomCandidates(info.GroupResource, info.Namespaced, info.Metric)) {
			out = append(out, discoveredMetric{
				API: rules.CustomMetricsAPI, Group: info.GroupResource.Group, Resource: info.GroupResource.Resource,
				Namespaced: info.Namespaced, Metric: info.Metric, SeriesName: c.SeriesName, Rule: c.Rule.Path(),
			})
		}
	}
	for _, info := range idx.ExternalMetrics() {
		for _, c := range winners(idx.ExternalCandidates(info.Metric)) {
			out = append(out, discoveredMetric{
				API: rules.ExternalMetricsAPI, Namespaced: c.Rule.Namespaced(), Metric: info.Metric,
				SeriesName: c.SeriesName, Rule: c.Rule.Path(),
			})
		}
	}
	return out
}

// winners returns the candidates (in winner order) that serve somewhere:
// the first cluster-wide one ends the list; a namespaced one serves when
// it has a namespace no earlier candidate has.
func winners(cs []discovery.Candidate) []discovery.Candidate {
	var out []discovery.Candidate
	taken := map[string]bool{}
	for _, c := range cs {
		if c.Namespaces == nil {
			return append(out, c)
		}
		serves := false
		for _, ns := range c.Namespaces {
			if !taken[ns] {
				taken[ns] = true
				serves = true
			}
		}
		if serves {
			out = append(out, c)
		}
	}
	return out
}

// summarizeConfig returns one line per rule, external query and resource
// rule.
func summarizeConfig(cfgs []*config.Config, rs *rules.RuleSet) []string {
	var out []string
	for _, r := range rs.Rules() {
		res := r.Resources()
		var mapping []string
		ov := res.Overrides()
		for _, l := range sortedKeys(ov) {
			mapping = append(mapping, l+"->"+ov[l].String())
		}
		if res.HasTemplate() {
			rc := ruleConfig(cfgs, r)
			mapping = append(mapping, "template "+strconvQuote(rc.Resources.Template))
		}
		if len(mapping) == 0 {
			mapping = append(mapping, "none")
		}
		rc := ruleConfig(cfgs, r)
		name := "series name"
		switch {
		case rc.Name.Matches != "" && rc.Name.As != "":
			name = fmt.Sprintf("matches %s as %s", strconvQuote(rc.Name.Matches), strconvQuote(rc.Name.As))
		case rc.Name.Matches != "":
			name = "matches " + strconvQuote(rc.Name.Matches)
		case rc.Name.As != "":
			name = "as " + strconvQuote(rc.Name.As)
		}
		scope := ""
		if r.Kind() == rules.KindExternal && !r.Namespaced() {
			scope = "; not namespaced"
		}
		out = append(out, fmt.Sprintf("%s: ok: %s metrics from seriesQuery %s; %d series filters; name: %s; resources: %s%s",
			r.Path(), r.Kind(), r.SeriesQuery(), len(rc.SeriesFilters), name, strings.Join(mapping, ", "), scope))
	}
	for _, q := range rs.ExternalQueries() {
		scope := "not namespaced"
		if q.Namespaced() {
			scope = "namespaced"
		}
		out = append(out, fmt.Sprintf("%s: ok: external metric %q from a fixed query; %s", q.Path(), q.Name(), scope))
	}
	if rs.ResourceRules() != nil {
		out = append(out, "resourceRules: ok: cpu and memory (metrics.k8s.io)")
	}
	out = append(out, notShared(rs)...)
	if len(out) == 0 {
		out = append(out, "ok: the configuration has no rules")
	}
	return out
}

// notShared lists the custom rules whose requests cannot be answered from a
// shared evaluation (pkg/provider SharedConfig), with the reason, for
// each namespaced resource their overrides name (pods for a template).
func notShared(rs *rules.RuleSet) []string {
	var out []string
	for _, r := range rs.CustomRules() {
		res := r.Resources()
		targets := map[string]schema.GroupResource{}
		for _, gr := range res.Overrides() {
			if gr != rules.NamespaceResource {
				targets[gr.String()] = gr
			}
		}
		if res.HasTemplate() {
			targets["pods"] = schema.GroupResource{Resource: "pods"}
		}
		for _, k := range sortedKeys(targets) {
			err := r.Sharing(rules.SharedRequest{Series: "series", Resource: targets[k]})
			if err == nil || !errors.Is(err, rules.ErrNotShareable) {
				continue
			}
			out = append(out, fmt.Sprintf("%s: not shared for %s: answered per request (%v)", r.Path(), k, strings.TrimPrefix(err.Error(), r.Path()+": ")))
		}
	}
	return out
}

// ruleConfig returns the configuration of a compiled rule, from its file.
func ruleConfig(cfgs []*config.Config, r *rules.Rule) config.DiscoveryRule {
	cfg := cfgs[0]
	for _, c := range cfgs {
		if c.Source != nil && c.Source.File == r.File() {
			cfg = c
		}
	}
	if r.Kind() == rules.KindExternal {
		return cfg.ExternalRules[r.Index()]
	}
	return cfg.Rules[r.Index()]
}

func sortedKeys[V any](m map[string]V) []string {
	out := slices.Sorted(maps.Keys(m))
	return out
}

func strconvQuote(s string) string { return strconv.Quote(s) }

// explainFlags are the options of "adapter explain".
type explainFlags struct {
	config                     []string
	series, kubeconfig         string
	metric, resource           string
	namespace, names, selector string
	external, run              bool
	maxAge                     time.Duration
	prom                       *promclient.Options
}

// runExplain implements "adapter explain": print the PromQL a request would
// send (stdout) and which rule and series produced it, or why nothing
// serves the request (stderr).
func runExplain(args []string, stdout, stderr io.Writer) int {
	t := toolIO{stdout: stdout, stderr: stderr}
	f := explainFlags{prom: promclient.NewOptions()}
	fs := pflag.NewFlagSet("explain", pflag.ContinueOnError)
	fs.StringArrayVar(&f.config, "config", nil, "Configuration file, or directory of *.yaml files (required; may be given several times, as to the adapter).")
	fs.StringVar(&f.series, "series", "", "A saved Prometheus /api/v1/series response (or its data array). Give this or --prometheus-url.")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Resolve resources with this cluster's API discovery instead of the built-in list of standard resources.")
	fs.StringVar(&f.metric, "metric", "", "Metric name, as requested from the API (required).")
	fs.StringVar(&f.resource, "resource", "", `Resource of the objects, e.g. pods, deployments.apps (required for custom metrics).`)
	fs.StringVar(&f.namespace, "namespace", "", "Namespace of the objects (custom) or of the request (external); empty for cluster-scoped objects.")
	fs.StringVar(&f.names, "names", "", `Object names, comma-separated; none or "*" means every object.`)
	fs.StringVar(&f.selector, "metric-selector", "", "Metric label selector, e.g. 'queue=orders,env!=dev'.")
	fs.BoolVar(&f.external, "external", false, "Explain an external metric (external.metrics.k8s.io).")
	fs.BoolVar(&f.run, "run", false, "Run the rendered query against --prometheus-url and print its values.")
	fs.DurationVar(&f.maxAge, "metrics-max-age", time.Minute, "With --prometheus-url: how far back series are looked for, as the adapter's --metrics-max-age.")
	f.prom.AddFlags(fs)
	fs.Usage = func() {
		t.errorf("usage: adapter explain --config FILE (--series SERIES.json | --prometheus-url URL) --metric NAME\n"+
			"       (--resource RESOURCE | --external) [--namespace NS] [--names a,b] [--metric-selector SEL] [--run]\n\n%s", fs.FlagUsages())
	}
	if code, ok := parseToolFlags(fs, args, t); !ok {
		return code
	}
	live := fs.Changed("prometheus-url")
	var usage []string
	if len(f.config) == 0 {
		usage = append(usage, "--config is required")
	}
	if f.metric == "" {
		usage = append(usage, "--metric is required")
	}
	if !f.external && f.resource == "" {
		usage = append(usage, "--resource is required for a custom metric (or give --external)")
	}
	if f.external && (f.resource != "" || f.names != "") {
		usage = append(usage, "--resource and --names do not apply to external metrics")
	}
	if (f.series == "") == !live {
		usage = append(usage, "give exactly one of --series and --prometheus-url")
	}
	if f.run && !live {
		usage = append(usage, "--run needs --prometheus-url")
	}
	if f.maxAge <= 0 {
		usage = append(usage, "--metrics-max-age must be positive")
	}
	if live {
		for _, err := range f.prom.Validate() {
			usage = append(usage, err.Error())
		}
	}
	if len(usage) > 0 {
		for _, u := range usage {
			t.errorf("explain: %s", u)
		}
		return exitUsage
	}

	mapper, err := newMapper(f.kubeconfig)
	if err != nil {
		t.errorf("explain: %v", err)
		return exitFail
	}
	req, err := explainRequest(f, mapper)
	if err != nil {
		t.errorf("explain: %v", err)
		return exitUsage
	}
	loaded, ok := loadRules(f.config, mapper, t)
	if !ok {
		return exitFail
	}
	rs := loaded.set
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	in := explain.Input{Rules: rs, Scoper: discovery.MapperScoper{Mapper: mapper}}
	var client *promclient.Client
	if live {
		if client, err = f.prom.NewClient(metrics.New()); err != nil {
			t.errorf("explain: %v", err)
			return exitFail
		}
		in.Series, err = liveSeries(ctx, client, rs, f.maxAge)
		if err != nil {
			t.errorf("explain: %v", err)
			return exitFail
		}
	} else {
		all, err := readSeries(f.series)
		if err != nil {
			t.errorf("explain: %v", err)
			return exitFail
		}
		in.All = all
		if in.Series, err = discovery.MatchSeries(rs, all); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				t.errorf("%s: %s", f.config, line)
			}
			return exitFail
		}
	}
	res, err := explain.Explain(in, req)
	if err != nil {
		t.errorf("%v", err)
		return exitFail
	}
	fmt.Fprintln(stdout, res.Query.Expr)
	if client != nil && res.Query.MaxSampleAge == 0 && client.MaxSampleAge() > 0 {
		res.Notes = append(res.Notes, explain.SampleAgeNote("backend "+client.Backend()+", --prometheus-max-sample-age", client.MaxSampleAge()))
	}
	for _, n := range res.Notes {
		t.errorf("%s", n)
	}
	if !f.run {
		return exitOK
	}
	smps, err := client.QuerySamples(promclient.WithMaxSampleAge(ctx, res.Query.MaxSampleAge), res.Query.Expr, time.Time{})
	if err != nil {
		t.errorf("explain: running the query: %v", err)
		return exitFail
	}
	printValues(stdout, smps.Vector(), res.Query)
	if len(smps) == 0 {
		t.errorf("the query returned no series: the API answers \"not found\" (or the rule's defaultValue)")
	}
	return exitOK
}

// explainRequest builds the request from the flags, resolving --resource
// through the mapper.
func explainRequest(f explainFlags, mapper meta.RESTMapper) (explain.Request, error) {
	req := explain.Request{External: f.external, Metric: f.metric, Namespace: f.namespace}
	if f.selector != "" {
		sel, err := labels.Parse(f.selector)
		if err != nil {
			return req, fmt.Errorf("--metric-selector %q: %w", f.selector, err)
		}
		req.MetricSelector = sel
	}
	if f.external {
		return req, nil
	}
	gr := schema.ParseGroupResource(strings.ToLower(strings.TrimSpace(f.resource)))
	gvr, err := mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		if f.kubeconfig == "" {
			return req, fmt.Errorf("--resource %q: not a resource the built-in list of standard resources knows (give --kubeconfig to use the cluster's): %w", f.resource, err)
		}
		return req, fmt.Errorf("--resource %q: not a resource of the cluster: %w", f.resource, err)
	}
	req.Resource = gvr.GroupResource()
	for _, n := range strings.Split(f.names, ",") {
		if n = strings.TrimSpace(n); n != "" && n != "*" {
			req.Names = append(req.Names, n)
		}
	}
	return req, nil
}

// liveSeries lists, for each distinct seriesQuery, the series Prometheus
// has over the last maxAge, as the series discovery strategy does.
func liveSeries(ctx context.Context, client *promclient.Client, rs *rules.RuleSet, maxAge time.Duration) ([]discovery.RuleSeries, error) {
	now := time.Now()
	cache := map[string][]rules.Series{}
	var out []discovery.RuleSeries
	for _, r := range rs.Rules() {
		series, ok := cache[r.SeriesQuery()]
		if !ok {
			sets, err := client.Series(ctx, []string{r.SeriesQuery()}, now.Add(-maxAge), now)
			if err != nil {
				return nil, fmt.Errorf("%s: listing series: %w", r.Path(), err)
			}
			series = make([]rules.Series, len(sets))
			for i, ls := range sets {
				series[i] = rules.SeriesFromLabelSet(ls)
			}
			cache[r.SeriesQuery()] = series
		}
		out = append(out, discovery.RuleSeries{Rule: r, Series: series})
	}
	return out, nil
}

// printValues writes one line per sample: the object (resource label) or
// labels, the value and the sample time.
func printValues(w io.Writer, vec model.Vector, q rules.Query) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	lines := make([]string, 0, len(vec))
	for _, s := range vec {
		who := s.Metric.String()
		if q.ResourceLabel != "" {
			if v, ok := s.Metric[model.LabelName(q.ResourceLabel)]; ok {
				who = fmt.Sprintf("%s=%q", q.ResourceLabel, string(v))
				if ns, ok := s.Metric[model.LabelName(q.NamespaceLabel)]; ok && q.NamespaceLabel != "" {
					who = fmt.Sprintf("%s=%q %s", q.NamespaceLabel, string(ns), who)
				}
			}
		}
		lines = append(lines, fmt.Sprintf("%s\t%s\t@%s", who, s.Value, s.Timestamp.Time().UTC().Format(time.RFC3339)))
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(bw, l)
	}
}
