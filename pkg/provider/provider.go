// Package provider serves custom.metrics.k8s.io and external.metrics.k8s.io
// from Prometheus: it implements custom-metrics-apiserver's
// CustomMetricsProvider and ExternalMetricsProvider over the discovery
// index, the compiled rules (pkg/rules) and a Prometheus querier.
//
// Per request it looks the metric up in the current index (never waiting
// for discovery), lists the objects of a `*` request from an informer cache
// (never a LIST against the API server), renders one PromQL query whose
// length does not grow with the number of objects beyond a small
// threshold, sends it through the coalescing Prometheus client, and turns
// the samples into API objects with one value conversion shared by both
// APIs (see Quantity). Failures reach the client as typed API errors: 404
// with the reason for metrics that are not served, 503 when Prometheus
// cannot answer, 500 when it rejects a rule's query; never a made-up 0.
package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/apistatus"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/limits"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
)

// DefaultMaxQueryBytes is the default longest query rendered with object
// names: a query naming few objects with long names (or a template that
// repeats .LabelMatchers) that renders longer asks for every object
// instead, so no query grows past proxy and VictoriaMetrics URL limits.
const DefaultMaxQueryBytes = 4096

// MetricIndex is what the provider reads from a discovery result;
// *discovery.Index implements it.
type MetricIndex interface {
	// Custom returns the entry serving metric for objects of gr in
	// namespace ("" for cluster-scoped objects and namespaces).
	Custom(gr schema.GroupResource, namespace, metric string) (discovery.Entry, bool)
	// CustomCandidates returns the entries producing metric for gr in a
	// scope, with the namespaces where they exist; used to explain a 404.
	CustomCandidates(gr schema.GroupResource, namespaced bool, metric string) []discovery.Candidate
	// External returns the entry serving external metric in namespace.
	External(namespace, metric string) (discovery.Entry, bool)
	// ExternalCandidates returns the entries producing external metric.
	ExternalCandidates(metric string) []discovery.Candidate
	// ExternalUnscoped returns the entries of namespaced external rules
	// whose series of metric carry no namespace (serving nothing).
	ExternalUnscoped(metric string) []discovery.Entry
	// CustomMetrics and ExternalMetrics list what the index serves.
	CustomMetrics() []cmprovider.CustomMetricInfo
	ExternalMetrics() []cmprovider.ExternalMetricInfo
}

var _ MetricIndex = (*discovery.Index)(nil)

// IndexSource adapts a function returning the current *discovery.Index
// (nil before the first discovery) to Config.Index, keeping a nil index
// nil (a nil *discovery.Index in a MetricIndex would not compare to nil).
func IndexSource(current func() *discovery.Index) func() MetricIndex {
	return func() MetricIndex {
		if x := current(); x != nil {
			return x
		}
		return nil
	}
}

// Config is what New needs. Index, Backends, Objects and Mapper are required.
type Config struct {
	// Index returns the current discovery index, or nil before the first
	// discovery completed (requests then get a 503).
	Index func() MetricIndex
	// Rules returns the current compiled configuration; it serves the
	// externalQueries section. Nil serves no externalQueries.
	Rules func() *rules.RuleSet
	// Backends look up the querier of the backend a rule or an
	// externalQueries entry names ("" and "default": the default
	// backend): promclient.LookupAs on the adapter's promclient.Backends
	// (its clients coalesce identical queries and enforce the per-query
	// timeout), promclient.Single for one Prometheus. Custom and external
	// metrics are both read with QuerySamples.
	Backends func(name string) (promclient.SampleQuerier, bool)
	// Pending, when set, returns the backends whose discovery has not
	// completed yet (discovery.Discoverer.Pending): a metric the index
	// lacks is then answered 503 (it may be one of theirs), not 404.
	Pending func() []string
	// Objects lists the objects of `*` requests; pass the adapter's *objectcache.Cache.
	Objects ObjectLister
	// Mapper resolves request resources ("pods", "pod", "deployments.apps")
	// to group-version-resources and kinds; pass the cluster's RESTMapper
	// (asked on every request).
	Mapper meta.RESTMapper
	// Clock stamps defaultValue answers, which have no sample timestamp,
	// ages shared answers and times their refresh ahead of expiry. Nil
	// means the real clock.
	Clock clock.WithDelayedExecution
	// MaxNamesInQuery is the largest number of object names put into a
	// query's name matcher; 0 means rules.DefaultMaxNamesInQuery.
	MaxNamesInQuery int
	// MaxQueryBytes is the longest query rendered with a name matcher;
	// 0 means DefaultMaxQueryBytes.
	MaxQueryBytes int
	// Refresh, when set, is called when a request names a metric the
	// index lacks, with a key naming the lookup; when it returns true the
	// metric is looked up again in the then current index. Pass
	// discovery.Discoverer.Refresh, which runs a discovery pass (rate
	// limited per key) and waits for it.
	Refresh func(ctx context.Context, key string) bool
	// RefreshList, when set, is called before every metric is listed
	// (ListAllMetrics, ListAllExternalMetrics: the API's discovery
	// documents), with a context ending after ListRefreshWait; the listing
	// then reads the then current index. Pass
	// discovery.Discoverer.RefreshList, which runs a discovery pass when the
	// latest one is a few seconds old and waits for it.
	RefreshList func(ctx context.Context) bool
	// Shared configures shared evaluation (see SharedConfig); the zero
	// value shares with the defaults.
	Shared SharedConfig
}

// ListRefreshWait bounds how long a listing of every metric waits for
// Config.RefreshList; past it the listing answers from the current index
// (the aggregator gives a discovery request 5 s).
const ListRefreshWait = 2 * time.Second

// Provider serves custom and external metrics from Prometheus. It is safe
// for concurrent use and holds no per-request state.
type Provider struct {
	cfg    Config           // with the defaults filled in
	shared *sharedEvaluator // nil when Shared.Disabled
}

var (
	_ cmprovider.CustomMetricsProvider   = (*Provider)(nil)
	_ cmprovider.ExternalMetricsProvider = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) (*Provider, error) {
	var errs []error
	if cfg.Index == nil {
		errs = append(errs, errors.New("provider: no index source given"))
	}
	if cfg.Backends == nil {
		errs = append(errs, errors.New("provider: no Prometheus querier given"))
	}
	if cfg.Objects == nil {
		errs = append(errs, errors.New("provider: no object lister given"))
	}
	if cfg.Mapper == nil {
		errs = append(errs, errors.New("provider: no RESTMapper given"))
	}
	if cfg.MaxNamesInQuery < 0 {
		errs = append(errs, fmt.Errorf("provider: MaxNamesInQuery %d must not be negative", cfg.MaxNamesInQuery))
	}
	if cfg.MaxQueryBytes < 0 {
		errs = append(errs, fmt.Errorf("provider: MaxQueryBytes %d must not be negative", cfg.MaxQueryBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Refresh == nil {
		cfg.Refresh = func(context.Context, string) bool { return false }
	}
	if cfg.RefreshList == nil {
		cfg.RefreshList = func(context.Context) bool { return false }
	}
	if cfg.Rules == nil {
		cfg.Rules = func() *rules.RuleSet { return nil }
	}
	if cfg.Pending == nil {
		cfg.Pending = func() []string { return nil }
	}
	cfg.Clock = cmp.Or[clock.WithDelayedExecution](cfg.Clock, clock.RealClock{})
	cfg.MaxNamesInQuery = cmp.Or(cfg.MaxNamesInQuery, rules.DefaultMaxNamesInQuery)
	cfg.MaxQueryBytes = cmp.Or(cfg.MaxQueryBytes, DefaultMaxQueryBytes)
	p := &Provider{cfg: cfg}
	if !cfg.Shared.Disabled {
		p.shared = newSharedEvaluator(cfg.Shared, cfg.Clock)
	}
	return p, nil
}

// currentIndex returns the index, or a 503 before the first discovery.
func (p *Provider) currentIndex() (MetricIndex, error) {
	x := p.cfg.Index()
	if x == nil {
		return nil, unavailable("metrics discovery has not completed yet; retry shortly")
	}
	return x, nil
}

// listIndex returns the index a listing of every metric reads, after
// Config.RefreshList (nil before the first discovery, without waiting).
func (p *Provider) listIndex() MetricIndex {
	if p.cfg.Index() == nil {
		return nil
	}
	// The library's listers give no request context: the wait is bounded here.
	ctx, cancel := context.WithTimeout(context.Background(), ListRefreshWait)
	defer cancel()
	p.cfg.RefreshList(ctx)
	return p.cfg.Index()
}

// now is the timestamp of values that have no sample (defaultValue).
func (p *Provider) now() time.Time { return p.cfg.Clock.Now() }

// querierFor returns the querier of a rule's backend (what rules.Rule.Backend
// names), or a 500 for a backend the adapter does not have (the server
// refuses such rules at load).
func (p *Provider) querierFor(backend, what string) (promclient.SampleQuerier, error) {
	if q, ok := p.cfg.Backends(backend); ok {
		return q, nil
	}
	return nil, internal("%s: the rule names backend %q, which is not defined", what, backend)
}

// pendingError is the 503 for a metric the index lacks while some
// backends' discovery has not completed (the metric may be one of
// theirs); nil when none is pending.
func (p *Provider) pendingError(what string) error {
	if pending := p.cfg.Pending(); len(pending) > 0 {
		return unavailable("%s is not discovered: discovery has not completed for backend %s; retry shortly", what, strings.Join(pending, ", "))
	}
	return nil
}

// lookup finds the entry find reads from the current index, looking again
// after Config.Refresh (with key) when the index lacks it. When nothing
// serves what, ok is false and x is the index read, to explain why (or the
// error is a 503 while some backend's discovery is pending).
func (p *Provider) lookup(ctx context.Context, key, what string, find func(MetricIndex) (discovery.Entry, bool)) (e discovery.Entry, x MetricIndex, ok bool, err error) {
	if x, err = p.currentIndex(); err != nil {
		return e, nil, false, err
	}
	e, ok = find(x)
	if !ok && p.cfg.Refresh(ctx, key) {
		if x, err = p.currentIndex(); err != nil {
			return e, nil, false, err
		}
		e, ok = find(x)
	}
	if !ok {
		err = p.pendingError(what)
	}
	return e, x, ok, err
}

// query renders a query, checks its size and runs it on the backend's
// querier; what names the request in errors. The samples are shared with
// coalesced callers: read-only.
func (p *Provider) query(ctx context.Context, what, backend string, render func() (rules.Query, error)) (rules.Query, promclient.Samples, error) {
	q, err := render()
	if err != nil {
		return q, nil, renderError(ctx, what, err)
	}
	if err := limits.CheckQuerySize(what, q.Expr); err != nil {
		return q, nil, err
	}
	querier, err := p.querierFor(backend, what)
	if err != nil {
		return q, nil, err
	}
	// A sample older than the rule's maxSampleAge (else the backend's) is
	// no value: the answer lacks it, as a series without a sample.
	smps, err := querier.QuerySamples(promclient.WithMaxSampleAge(ctx, q.MaxSampleAge), q.Expr, time.Time{})
	if err != nil {
		return q, nil, apistatus.FromError(ctx, what, err)
	}
	return q, smps, nil
}
