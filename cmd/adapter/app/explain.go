package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/discovery/explain"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
)

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

func (f *explainFlags) addFlags(fs *pflag.FlagSet) {
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
}

// usageErrors lists every misuse of the flags; live is whether
// --prometheus-url was given.
func (f *explainFlags) usageErrors(live bool) []string {
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
	return usage
}

// runExplain implements "adapter explain": print the PromQL a request would
// send (stdout) and which rule and series produced it, or why nothing
// serves the request (stderr).
func runExplain(args []string, stdout, stderr io.Writer) int {
	t := toolIO{stdout: stdout, stderr: stderr}
	f := explainFlags{prom: promclient.NewOptions()}
	fs := pflag.NewFlagSet("explain", pflag.ContinueOnError)
	f.addFlags(fs)
	fs.Usage = func() {
		t.errorf("usage: adapter explain --config FILE (--series SERIES.json | --prometheus-url URL) --metric NAME\n"+
			"       (--resource RESOURCE | --external) [--namespace NS] [--names a,b] [--metric-selector SEL] [--run]\n\n%s", fs.FlagUsages())
	}
	if code, ok := parseToolFlags(fs, args, t); !ok {
		return code
	}
	live := fs.Changed("prometheus-url")
	if usage := f.usageErrors(live); len(usage) > 0 {
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	in := explain.Input{Rules: loaded.set, Scoper: discovery.MapperScoper{Mapper: mapper}}
	var client *promclient.Client
	if live {
		client, ok = explainLive(ctx, f, &in, t)
	} else {
		ok = explainSaved(f, &in, t)
	}
	if !ok {
		return exitFail
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
	if f.run && !runExplained(ctx, client, res.Query, t) {
		return exitFail
	}
	return exitOK
}

// explainLive fills in.Series from Prometheus (--prometheus-url) and
// returns its client; ok is false on an error, which it prints.
func explainLive(ctx context.Context, f explainFlags, in *explain.Input, t toolIO) (*promclient.Client, bool) {
	client, err := f.prom.NewClient(metrics.New())
	if err != nil {
		t.errorf("explain: %v", err)
		return nil, false
	}
	if in.Series, err = liveSeries(ctx, client, in.Rules, f.maxAge); err != nil {
		t.errorf("explain: %v", err)
		return nil, false
	}
	return client, true
}

// explainSaved fills in.All and in.Series from the saved series answer
// (--series); ok is false on an error, which it prints.
func explainSaved(f explainFlags, in *explain.Input, t toolIO) bool {
	all, err := readSeries(f.series)
	if err != nil {
		t.errorf("explain: %v", err)
		return false
	}
	in.All = all
	if in.Series, err = discovery.MatchSeries(in.Rules, all); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			t.errorf("%s: %s", f.config, line)
		}
		return false
	}
	return true
}

// runExplained runs the explained query (--run) and prints its values.
func runExplained(ctx context.Context, client *promclient.Client, q rules.Query, t toolIO) bool {
	smps, err := client.QuerySamples(promclient.WithMaxSampleAge(ctx, q.MaxSampleAge), q.Expr, time.Time{})
	if err != nil {
		t.errorf("explain: running the query: %v", err)
		return false
	}
	printValues(t.stdout, smps.Vector(), q)
	if len(smps) == 0 {
		t.errorf("the query returned no series: the API answers \"not found\" (or the rule's defaultValue)")
	}
	return true
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
