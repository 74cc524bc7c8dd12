package app

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/downstream"
	"github.com/promscaler/promscaler/pkg/rules"
)

// sectionDownstream is the --help section of the downstream flags.
const sectionDownstream = "downstream metrics servers"

// addDownstreamFlags registers --downstream-config.
func (o *ServerOptions) addDownstreamFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DownstreamConfig, "downstream-config", o.DownstreamConfig,
		"File of downstream metrics servers (KEDA's metrics server, prometheus-adapter, a vendor's adapter) to serve beside: "+
			"a custom or external metric promscaler does not serve itself is forwarded, after promscaler has authorized the caller, to the downstream that lists it, and the discovery documents are the union. "+
			"Re-read at each of its refreshInterval. See docs/downstream.md.")
}

// validateDownstream checks the downstream file at startup: a server
// with a file it cannot parse does not start.
func (o *ServerOptions) validateDownstream() []error {
	if o.DownstreamConfig == "" {
		return nil
	}
	if _, err := downstream.LoadFile(o.DownstreamConfig); err != nil {
		return []error{fmt.Errorf("--downstream-config: %w", err)}
	}
	return nil
}

// externalAlso is a downstream.Ours that also serves the external metrics
// names says it does (the schedules, served in front of the providers).
type externalAlso struct {
	downstream.Ours
	names func(metric string) bool
}

// ServesExternal implements downstream.Ours.
func (o externalAlso) ServesExternal(namespace, metric string) bool {
	return o.names(metric) || o.Ours.ServesExternal(namespace, metric)
}

// oursAlso returns ours also serving the external metrics names accepts,
// so that the downstream routing never forwards them (nil stays nil: no
// downstreams can be configured).
func oursAlso(ours downstream.Ours, names func(string) bool) downstream.Ours {
	if ours == nil {
		return nil
	}
	return externalAlso{Ours: ours, names: names}
}

// checkDownstream is check-config's --downstream-config: the file checked
// (every error with its line), and with --downstream-discovery the
// overlaps between what the rules serve (from --series when given; the
// externalQueries entries always) and what the downstreams list, each with
// who would answer it. It returns false on an error.
func checkDownstream(path string, discoveries []string, rs *rules.RuleSet, seriesPath string, mapper meta.RESTMapper, t toolIO) bool {
	if path == "" {
		if len(discoveries) > 0 {
			t.errorf("check-config: --downstream-discovery needs --downstream-config")
			return false
		}
		return true
	}
	f, err := downstream.LoadFile(path)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			t.errorf("%s", line)
		}
		return false
	}
	listed := map[string][]*downstream.Discovered{}
	for _, arg := range discoveries {
		name, file, ok := strings.Cut(arg, "=")
		if !ok || !slices.ContainsFunc(f.Downstreams, func(s downstream.Server) bool { return s.Name == name }) {
			t.errorf("check-config: --downstream-discovery %q: want NAME=FILE with NAME a downstream of %s", arg, path)
			return false
		}
		data, err := os.ReadFile(file)
		if err == nil {
			var d *downstream.Discovered
			if d, err = downstream.ParseDiscovery(data); err == nil {
				listed[name] = append(listed[name], d)
			}
		}
		if err != nil {
			t.errorf("check-config: --downstream-discovery %s: %v", file, err)
			return false
		}
	}
	custom, external, ok := ourMetricsOffline(rs, seriesPath, mapper, t)
	if !ok {
		return false
	}
	for _, o := range downstream.OverlapsOf(f, listed, custom, external) {
		t.errorf("overlap: %s metric %s is served by promscaler and listed by downstream %q: answered by %s", o.API, o.Name, o.Downstream, o.ServedBy)
	}
	return true
}

// ourMetricsOffline is what the rules serve: the metrics discovery would
// find in the saved series (none without), and the externalQueries.
func ourMetricsOffline(rs *rules.RuleSet, seriesPath string, mapper meta.RESTMapper, t toolIO) ([]cmprovider.CustomMetricInfo, []cmprovider.ExternalMetricInfo, bool) {
	if rs == nil {
		return nil, nil, true
	}
	var custom []cmprovider.CustomMetricInfo
	var external []cmprovider.ExternalMetricInfo
	if seriesPath != "" {
		series, err := readSeries(seriesPath)
		if err != nil {
			t.errorf("check-config: %v", err)
			return nil, nil, false
		}
		in, err := discovery.MatchSeries(rs, series)
		if err != nil {
			t.errorf("check-config: %v", err)
			return nil, nil, false
		}
		idx := discovery.BuildIndex(in, discovery.IndexOptions{Scoper: discovery.MapperScoper{Mapper: mapper}})
		custom, external = idx.CustomMetrics(), idx.ExternalMetrics()
	}
	for _, q := range rs.ExternalQueries() {
		external = append(external, cmprovider.ExternalMetricInfo{Metric: q.Name()})
	}
	return custom, external, true
}
