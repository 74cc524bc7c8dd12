package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/pkg/tenancy"
)

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

// checkConfigFlags are the options of "adapter check-config".
type checkConfigFlags struct {
	config, team, downstreamDiscovery []string
	strict                            bool
	series, kubeconfig                string
	backends, downstream              string
	namespaceLabel                    string
}

func (f *checkConfigFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.config, "config", nil, "Configuration file, or directory of *.yaml files, to check (required; may be given several times, as to the adapter).")
	fs.BoolVar(&f.strict, "strict", false, "Fail (exit 1) on warnings too, not only on errors: for CI.")
	fs.StringVar(&f.series, "series", "", "A saved Prometheus /api/v1/series response (or its data array): print what discovery would serve from it.")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Resolve resources with this cluster's API discovery instead of the built-in list of standard resources.")
	fs.StringVar(&f.backends, "backends-config", "", "The adapter's --backends-config: check it, and that every backend: key names one of its backends (without it, a backend: key other than default is a warning in --config files, an error in team rules).")
	fs.StringArrayVar(&f.team, "team-configmap", nil, "A manifest of team rules ConfigMaps to check as --team-rules loads them: strictly, confined to each ConfigMap's namespace (may be given several times; --config is then optional).")
	fs.StringVar(&f.namespaceLabel, "team-rules-namespace-label", tenancy.DefaultLabel, "The adapter's --team-rules-namespace-label, for --team-configmap.")
	fs.StringVar(&f.downstream, "downstream-config", "", "The adapter's --downstream-config: check it (every error with its line).")
	fs.StringArrayVar(&f.downstreamDiscovery, "downstream-discovery", nil, "NAME=FILE: a saved discovery document of downstream NAME (kubectl get --raw /apis/external.metrics.k8s.io/v1beta1 against it); with it, every metric both serve is listed with who answers it (may be given several times).")
}

// runCheckConfig implements "adapter check-config": validate a
// configuration offline, and with --series print what discovery would serve
// from a saved /api/v1/series answer, one JSON object per line.
func runCheckConfig(args []string, stdout, stderr io.Writer) int {
	t := toolIO{stdout: stdout, stderr: stderr}
	var f checkConfigFlags
	fs := pflag.NewFlagSet("check-config", pflag.ContinueOnError)
	f.addFlags(fs)
	fs.Usage = func() {
		t.errorf("usage: adapter check-config --config FILE|DIR [--config ...] [--team-configmap FILE ...] [--strict] [--backends-config FILE] [--downstream-config FILE [--downstream-discovery NAME=FILE ...]] [--series SERIES.json] [--kubeconfig FILE]\n\n%s", fs.FlagUsages())
	}
	if code, ok := parseToolFlags(fs, args, t); !ok {
		return code
	}
	if len(f.config) == 0 && (len(f.team) == 0 || f.series != "") {
		t.errorf("check-config: --config is required (without it, --team-configmap and no --series)")
		return exitUsage
	}
	if _, err := tenancy.New(f.namespaceLabel, "probe"); err != nil {
		t.errorf("check-config: --team-rules-namespace-label: %v", err)
		return exitUsage
	}
	mapper, err := newMapper(f.kubeconfig)
	if err != nil {
		t.errorf("check-config: %v", err)
		return exitFail
	}
	loaded, ok := checkSources(f, mapper, t)
	if !ok {
		return exitFail
	}
	// The adapter loads a file with a query Prometheus rejects, but such a
	// rule does not work; --strict fails on warnings as well.
	failed := loaded.queryErrors > 0 || f.strict && loaded.warnings > 0
	if f.series == "" {
		if loaded.set != nil {
			for _, line := range summarizeConfig(loaded.configs, loaded.set) {
				fmt.Fprintln(stdout, line)
			}
		}
	} else {
		conflicts, ok := checkSeries(loaded.set, f.series, mapper, t)
		if !ok {
			return exitFail
		}
		failed = failed || f.strict && conflicts > 0
	}
	if failed {
		return exitFail
	}
	return exitOK
}

// checkSources checks every source the flags name: the rules files, the
// backends file and the rules' backend: keys, the team rules ConfigMaps
// and the downstream configuration. It prints every problem; ok is false
// when one is an error.
func checkSources(f checkConfigFlags, mapper meta.RESTMapper, t toolIO) (*loadedRules, bool) {
	loaded, ok := &loadedRules{}, true
	if len(f.config) > 0 {
		if loaded, ok = loadRules(f.config, mapper, t); !ok {
			return nil, false
		}
	}
	backends, ok := checkBackends(loaded, f.backends, t)
	if !ok {
		return nil, false
	}
	teamWarnings, ok := checkTeamConfigMaps(f.team, mapper, f.namespaceLabel, backends, t)
	if !ok {
		return nil, false
	}
	if !checkDownstream(f.downstream, f.downstreamDiscovery, loaded.set, f.series, mapper, t) {
		return nil, false
	}
	loaded.warnings += teamWarnings
	return loaded, true
}

// checkSeries prints, one JSON object per line, what discovery would serve
// from the saved series answer at path, then notes on the rules that serve
// nothing and the conflicts, which it counts; ok is false on an error.
func checkSeries(rs *rules.RuleSet, path string, mapper meta.RESTMapper, t toolIO) (int, bool) {
	series, err := readSeries(path)
	if err != nil {
		t.errorf("check-config: %v", err)
		return 0, false
	}
	in, err := discovery.MatchSeries(rs, series)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			t.errorf("%s", line)
		}
		return 0, false
	}
	idx := discovery.BuildIndex(in, discovery.IndexOptions{Scoper: discovery.MapperScoper{Mapper: mapper}})
	enc := json.NewEncoder(t.stdout)
	for _, line := range discoveredLines(idx) {
		if err := enc.Encode(line); err != nil {
			t.errorf("check-config: writing output: %v", err)
			return 0, false
		}
	}
	for _, r := range in {
		if len(r.Series) == 0 {
			t.errorf("note: %s: no series matched seriesQuery %s", r.Rule.Path(), r.Rule.SeriesQuery())
		} else if n := idx.RuleMetrics(r.Rule.Path()); n == 0 {
			t.errorf("note: %s: %d series matched seriesQuery but none became a metric (filtered out, or no label maps to a resource); try adapter explain", r.Rule.Path(), len(r.Series))
		}
	}
	conflicts := idx.Conflicts()
	for _, c := range conflicts {
		t.errorf("warning: %s", c)
	}
	t.errorf("%d series: %d custom metrics, %d external metrics", len(series), len(idx.CustomMetrics()), len(idx.ExternalMetrics()))
	return len(conflicts), true
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
