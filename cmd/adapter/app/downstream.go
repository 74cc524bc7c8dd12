package app

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/promscaler/promscaler/pkg/downstream"
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
