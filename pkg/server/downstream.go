package server

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/dynamic"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/downstream"
)

// ourMetrics answers, from discovery's current index and rules (team
// rules included: they are in both), which metrics promscaler serves
// itself: downstream.Ours and downstream.OurMetrics.
type ourMetrics struct {
	disc   *discovery.Discoverer
	mapper meta.RESTMapper
}

var _ downstream.Ours = ourMetrics{}

// index is the published index, nil before the first complete discovery
// (until then a metric a downstream lists is forwarded to it).
func (o ourMetrics) index() *discovery.Index {
	if !o.disc.Ready() {
		return nil
	}
	return o.disc.Index()
}

// ServesCustom implements downstream.Ours: a rule of the index serves the
// metric for the resource (as the cluster names it) in the namespace.
func (o ourMetrics) ServesCustom(info cmprovider.CustomMetricInfo, namespace string) bool {
	x := o.index()
	if x == nil {
		return false
	}
	gr := info.GroupResource
	if gvr, err := o.mapper.ResourceFor(gr.WithVersion("")); err == nil {
		gr = gvr.GroupResource()
	}
	_, ok := x.Custom(gr, namespace, info.Metric)
	return ok
}

// ServesExternal implements downstream.Ours: an externalQueries entry, or
// a rule of the index serving the metric in the namespace.
func (o ourMetrics) ServesExternal(namespace, metric string) bool {
	if rs := o.disc.Rules(); rs != nil {
		if _, ok := rs.ExternalQuery(metric); ok {
			return true
		}
	}
	x := o.index()
	if x == nil {
		return false
	}
	_, ok := x.External(namespace, metric)
	return ok
}

// list is downstream.OurMetrics: every metric of the index and every
// externalQueries entry.
func (o ourMetrics) list() ([]cmprovider.CustomMetricInfo, []cmprovider.ExternalMetricInfo) {
	var custom []cmprovider.CustomMetricInfo
	var external []cmprovider.ExternalMetricInfo
	if x := o.index(); x != nil {
		custom, external = x.CustomMetrics(), x.ExternalMetrics()
	}
	if rs := o.disc.Rules(); rs != nil {
		for _, q := range rs.ExternalQueries() {
			external = append(external, cmprovider.ExternalMetricInfo{Metric: q.Name()})
		}
	}
	return custom, external
}

// addDownstreams puts the downstream metrics servers of
// c.DownstreamConfig behind the providers, when the file is set and the
// providers say what they serve (Providers.Ours): requests for metrics
// they do not serve go, after authorization, to the downstream listing
// them; the discovery documents are the union. It returns the readiness
// detail lines of the downstreams (nil without any).
func (c *Config) addDownstreams(p *Providers, m *metrics.Metrics) (func() []string, error) {
	if c.DownstreamConfig == "" {
		return nil, nil
	}
	if p.Ours == nil {
		return nil, fmt.Errorf("--downstream-config: the metrics providers do not say which metrics they serve")
	}
	kubeConfig, err := c.Kube.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes client configuration: %w", err)
	}
	dyn, err := dynamic.NewForConfig(kubeConfig)
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes client for APIServices: %w", err)
	}
	set, err := downstream.New(downstream.Options{
		Path: c.DownstreamConfig, Base: kubeConfig, Resolver: downstream.DynamicResolver{Client: dyn},
		Ours: p.Ours, OurMetrics: p.OurMetrics, Registerer: m.Registry,
	})
	if err != nil {
		return nil, err
	}
	p.Custom, p.External = set.WrapCustom(p.Custom), set.WrapExternal(p.External)
	ready := p.Ready
	p.Ready = func() error {
		if err := set.Ready(); err != nil {
			return err
		}
		if ready != nil {
			return ready()
		}
		return nil
	}
	withServedBy(c.APIServer.GenericConfig)
	run := p.Run
	p.Run = func(ctx context.Context) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			set.Run(ctx)
		}()
		if run != nil {
			run(ctx)
		}
		<-done
	}
	return set.Details, nil
}

// withServedBy adds downstream.ServedByHeader to the metrics APIs'
// answers, innermost in the chain (around the API handler).
func withServedBy(gc *genericapiserver.Config) {
	build := gc.BuildHandlerChainFunc
	gc.BuildHandlerChainFunc = func(h http.Handler, gc *genericapiserver.Config) http.Handler {
		return build(downstream.WithServedBy(h), gc)
	}
}

// joinDetails returns the lines of every non-nil function, in order.
func joinDetails(fs ...func() []string) func() []string {
	return func() []string {
		var lines []string
		for _, f := range fs {
			if f != nil {
				lines = append(lines, f()...)
			}
		}
		return lines
	}
}
