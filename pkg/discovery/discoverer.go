package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
)

// Prometheus is what discovery asks Prometheus: label values and label
// names with match[] (the labels strategy, and the label names a
// resources.template maps for the grouped strategy), instant queries (the
// grouped strategy) and series lists (the series strategy and fallback).
// *promclient.Client implements it.
type Prometheus interface {
	promclient.SampleQuerier
	promclient.SeriesLister
	promclient.LabelNamesLister
	promclient.LabelValuesLister
}

// Strategy is how discovery asks Prometheus for a seriesQuery.
//
// StrategyLabels and StrategySeries use the series index over
// [now-MaxAge, now], so they see series that have a sample in a block or
// head chunk overlapping that window (block-granular: a series that stopped
// up to a block length, 2 h by default, before the window may still be
// seen); this is what prometheus-adapter uses. StrategyGrouped reads samples
// and sees exactly the series with a sample in the window, at a much higher
// cost in Prometheus.
type Strategy int

const (
	// StrategyLabels (the default) asks only Prometheus' index, per
	// distinct seriesQuery:
	//
	//  1. /api/v1/label/__name__/values?match[]=SERIES_QUERY: the series
	//     names; names that no rule of the seriesQuery keeps (seriesFilters,
	//     name.matches) are dropped here, so the cost grows with the metrics
	//     served, not with every name the seriesQuery selects;
	//  2. per kept name N, Options.Concurrency names at a time:
	//     /api/v1/labels?match[]=SERIES_QUERY,__name__="N" (the
	//     label names N has), then for each label L a rule maps to a
	//     namespaced resource, the namespaces of N's series having L
	//     (/api/v1/label/NAMESPACE_LABEL/values with L!="") and whether
	//     series of N with L and no namespace label exist (L is among the
	//     /api/v1/labels with NAMESPACE_LABEL="", one request per name).
	//     Requests and matchers the
	//     seriesQuery makes redundant are left out: for
	//     {namespace!="",pod!=""} with overrides, one request per name.
	//
	// The rows built from these answers give exactly the index the series
	// strategy gives for the same series: resource mapping reads label names
	// only, per label, plus whether the series is namespaced and its
	// namespace. Each request costs Prometheus an index lookup (tens of
	// milliseconds for a million series) instead of decoding every series'
	// chunks (grouped) or serialising every series (series). A backend that
	// rejects match[] on these endpoints (400/422/404) gets StrategySeries
	// for that seriesQuery, kept for the Discoverer's lifetime (logged once).
	StrategyLabels Strategy = iota
	// StrategyGrouped sends one instant query per distinct seriesQuery that
	// Prometheus answers with one row per distinct (series name, namespace,
	// set of resource labels present):
	//
	//	sum by (__name__, namespace, promscaler_has_0) (
	//	  label_replace(
	//	    count by (__name__, namespace, pod) (last_over_time(SERIES_QUERY[MAX_AGE])),
	//	    "promscaler_has_0", "1", "pod", ".+"))
	//
	// It is sample-precise (a series is seen when it has a sample in the
	// last MaxAge) but Prometheus decodes every selected series' chunks:
	// for a million series, several CPU-seconds per relist.
	//
	// Only label names matter for resource mapping, so object names are
	// folded into presence flags and the answer grows with distinct
	// (metric, namespace, resource) combinations, not with series or
	// objects. The namespace labels keep their values; the other resource
	// labels (overrides and, for rules with a resources.template, the label
	// names of /api/v1/labels with match[] that the template maps) become
	// flags. When the backend drops __name__ in last_over_time
	// (VictoriaMetrics), the query is sent again with MetricsQL's
	// keep_metric_names modifier; when that is rejected too, that
	// seriesQuery falls back to StrategySeries. The working form is kept for
	// the Discoverer's lifetime (logged once).
	StrategyGrouped
	// StrategySeries lists every series with /api/v1/series, as
	// prometheus-adapter does.
	StrategySeries
)

// Strategies lists the strategies, the default first.
var Strategies = []Strategy{StrategyLabels, StrategyGrouped, StrategySeries}

// String returns "labels", "grouped" or "series".
func (s Strategy) String() string {
	switch s {
	case StrategyLabels:
		return "labels"
	case StrategyGrouped:
		return "grouped"
	case StrategySeries:
		return "series"
	default:
		return fmt.Sprintf("Strategy(%d)", int(s))
	}
}

// ParseStrategy parses a strategy name as String writes it.
func ParseStrategy(name string) (Strategy, error) {
	for _, s := range Strategies {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown discovery strategy %q (want labels, grouped or series)", name)
}

// Set parses a strategy's name (ParseStrategy): with String and Type,
// *Strategy is a command-line flag's value (pflag.Value).
func (s *Strategy) Set(name string) error {
	v, err := ParseStrategy(name)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Type names the flag's value type in --help.
func (*Strategy) Type() string { return "strategy" }

// DefaultConcurrency is the number of seriesQueries asked in parallel when
// Options.Concurrency is zero.
const DefaultConcurrency = 4

// Backends looks up the client answering discovery requests for the rules
// of a backend (rules.Rule.Backend; "" and "default" are the default
// backend); ok is false for a backend it does not know.
// promclient.LookupAs[discovery.Prometheus] on the adapter's
// promclient.Backends is one, promclient.Single one of a single Prometheus.
type Backends = func(name string) (p Prometheus, ok bool)

// Options configure a Discoverer. Backends, Rules and Interval are
// required.
type Options struct {
	// Backends answer discovery requests, each for the rules naming it;
	// give them a per-call timeout suited to discovery
	// (promclient.Backends.WithTimeout). A rule naming a backend Backends
	// does not know fails its discovery (the server refuses such rules at
	// load). The default backend is required.
	Backends Backends
	// Rules is the compiled configuration; SetRules swaps it later.
	Rules *rules.RuleSet
	// Interval is the relist interval (--metrics-relist-interval).
	Interval time.Duration
	// MaxAge is how far back series are looked for (--metrics-max-age);
	// zero means Interval.
	MaxAge time.Duration
	// Strategy chooses how Prometheus is asked; the zero value is
	// StrategyLabels.
	Strategy Strategy
	// Concurrency bounds the seriesQueries asked in parallel and, for
	// StrategyLabels, the series names asked about at a time (over all
	// seriesQueries); zero means DefaultConcurrency.
	Concurrency int
	// Scoper says which resources are cluster-scoped; nil means
	// DefaultScoper. Give MapperScoper with the server's RESTMapper.
	Scoper Scoper
	// Clock drives the relist ticker and the retry delay before the first
	// complete discovery; nil means the real clock.
	Clock clock.WithTicker
	// Metrics records discovery metrics; nil creates a private set.
	Metrics *metrics.Metrics
	// MaxTeamRuleMetrics is IndexOptions.MaxTeamRuleMetrics.
	MaxTeamRuleMetrics int
}

// Discoverer runs discovery: once when Run starts, then every Interval and
// whenever SetRules installs a new rule set; before the first complete
// discovery it retries sooner (1 s, doubling up to Interval). Each pass asks
// every distinct seriesQuery once, builds a new Index and publishes it
// atomically. A seriesQuery that fails keeps its last good answer (the
// rules using it keep serving what they served); the failure is logged once
// per pass and counted per rule. A backend that answers no series at all
// after it had some (a Prometheus restarted after an outage longer than the
// max age, before its first scrape) keeps its last good results until its
// answers have been empty for the max age.
//
// Index, Ready and Checker are safe to call from any goroutine and never
// wait for discovery.
type Discoverer struct {
	backends    Backends
	interval    time.Duration
	maxAge      time.Duration
	strategy    Strategy
	concurrency int
	scoper      Scoper
	maxTeam     int
	clock       clock.WithTicker
	metrics     *metrics.Metrics

	rules   atomic.Pointer[rules.RuleSet]
	index   atomic.Pointer[Index]
	ready   atomic.Bool
	pending atomic.Pointer[[]string] // backends without a complete discovery yet
	lastErr atomic.Pointer[string]
	trigger chan struct{}

	// Owned by the goroutine running passes (mu serialises RunOnce callers).
	// onRefused, when set (SetOnRefused), is told each pass's refused team
	// rules; d.mu guards it.
	onRefused func([]RefusedRule)

	mu        sync.Mutex
	lastGood  map[string]fetchResult
	conflicts map[string]bool
	// emptySince is, per backend, when its answers went from some series
	// to none for every seriesQuery (see holdEmptied).
	emptySince map[string]time.Time

	fbMu     sync.Mutex
	variants map[string]queryVariant // per plan key, once the standard query failed

	nameSlots chan struct{} // bounds the labels strategy's per-name work

	// Refresh state (see Refresh and RefreshList), under refreshMu.
	refreshMu sync.Mutex
	waiting   chan struct{}         // closed when the next pass publishes
	misses    map[string]*missState // per lookup key
	passStart time.Time             // start of the latest pass Run began
	passDone  chan struct{}         // closed when that pass has published
}

// missState is the backoff of one lookup key that asked for a refresh.
type missState struct {
	last    time.Time
	backoff time.Duration
}

const (
	// refreshBackoff is how long a key that asked for a refresh waits
	// before it may ask again; it doubles on each refresh of the key, up
	// to the relist interval, and is forgotten after two idle intervals.
	refreshBackoff = 2 * time.Second
	// refreshGap is the shortest time between the starts of two passes
	// when the second one is asked for by Refresh.
	refreshGap = time.Second
	// listMaxAge is how old the latest pass may be when every metric is
	// listed (see RefreshList) before the listing asks for a new one.
	listMaxAge = 5 * time.Second
	// listPassWait is how long a listing waits for a pass (see
	// RefreshList) after the pass started: a pass still running after that
	// is held up by a slow or stalled backend (over a healthy one it takes
	// milliseconds), and a listing answers from the current index at once
	// instead of holding its request, and kube-apiserver's seat, until the
	// stalled backend's call times out. Every discovery poll waited up to its
	// 2 s bound (ListRefreshWait) while a backend was stalled: at 50 polls a
	// second, 100 seats of a priority level that has 56 at first, and with
	// the stalled backend's 40 waiting requests 14-17 % of every request
	// through it was refused (429) on a loaded machine (docs/reliability.md).
	listPassWait = 250 * time.Millisecond
	// onDemandPerInterval is how many passes Refresh and RefreshList may
	// start within one relist interval: beyond it, the next one waits until
	// the oldest of them is an interval old (or the relist comes first).
	// It bounds what a client naming a different missing metric every
	// second costs: at 1,000,000 series, 7 passes a minute instead of 60.
	onDemandPerInterval = 6
)

// fetchResult is one seriesQuery's answer.
type fetchResult struct {
	rows   []rules.Series
	series int // series behind the rows (sum of counts for grouped rows)
	// perRule, set by the labels strategy, holds each rule's rows by rule
	// path (rows and series are then unused): which labels its rows carry
	// depends on the rule. Keyed by path so that, after a reload, a failing
	// seriesQuery's rules keep their last good rows.
	perRule map[string][]rules.Series
}

// rowsFor returns the rows for rule r and the number reported as its
// discovered series: the series for the series strategy, the series behind
// the rows for the grouped one, the rows (combinations of name, namespace
// and resource label) for the labels one, which cannot count series.
func (f fetchResult) rowsFor(r *rules.Rule) ([]rules.Series, int) {
	if f.perRule == nil {
		return f.rows, f.series
	}
	rows := f.perRule[r.Path()]
	return rows, len(rows)
}

// New builds a Discoverer from opts. It does not start discovery: call Run.
func New(opts Options) (*Discoverer, error) {
	var errs []error
	for _, check := range []struct {
		bad bool
		msg string
	}{
		{opts.Backends == nil, "no Prometheus client"},
		{opts.Rules == nil, "no rule set"},
		{opts.Interval <= 0, fmt.Sprintf("relist interval must be positive, got %s", opts.Interval)},
		{opts.MaxAge < 0, fmt.Sprintf("max age must not be negative, got %s", opts.MaxAge)},
		{opts.Concurrency < 0, fmt.Sprintf("concurrency must not be negative, got %d", opts.Concurrency)},
		{!slices.Contains(Strategies, opts.Strategy), fmt.Sprintf("unknown strategy %d", opts.Strategy)},
	} {
		if check.bad {
			errs = append(errs, errors.New("discovery: "+check.msg))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	d := &Discoverer{
		backends:    opts.Backends,
		interval:    opts.Interval,
		maxAge:      opts.MaxAge,
		strategy:    opts.Strategy,
		concurrency: opts.Concurrency,
		scoper:      opts.Scoper,
		maxTeam:     opts.MaxTeamRuleMetrics,
		clock:       opts.Clock,
		metrics:     opts.Metrics,
		trigger:     make(chan struct{}, 1),
		lastGood:    map[string]fetchResult{},
		variants:    map[string]queryVariant{},
		conflicts:   map[string]bool{},
		emptySince:  map[string]time.Time{},
		misses:      map[string]*missState{},
	}
	if d.maxAge == 0 {
		d.maxAge = d.interval
	}
	if d.concurrency == 0 {
		d.concurrency = DefaultConcurrency
	}
	d.nameSlots = make(chan struct{}, d.concurrency)
	if d.scoper == nil {
		d.scoper = DefaultScoper{}
	}
	if d.clock == nil {
		d.clock = clock.RealClock{}
	}
	if d.metrics == nil {
		d.metrics = metrics.New()
	}
	d.rules.Store(opts.Rules)
	d.index.Store(EmptyIndex())
	msg := "no discovery has completed yet"
	d.lastErr.Store(&msg)
	return d, nil
}

// Index returns the current index (an empty one before the first
// discovery). It never blocks.
func (d *Discoverer) Index() *Index { return d.index.Load() }

// Ready reports whether a complete discovery has been published: every
// seriesQuery was answered (a query Prometheus rejects as invalid counts as
// answered: retrying cannot fix it). It stays true afterwards, since later
// failures keep the last good results.
func (d *Discoverer) Ready() bool { return d.ready.Load() }

// Checker returns a readiness check named "discovery" for the API server's
// /readyz, failing until Ready.
func (d *Discoverer) Checker() healthz.HealthChecker {
	return healthz.NamedCheck("discovery", func(*http.Request) error {
		if d.Ready() {
			return nil
		}
		return fmt.Errorf("metrics discovery has not completed: %s", *d.lastErr.Load())
	})
}

// Rules returns the rule set discovery currently uses.
func (d *Discoverer) Rules() *rules.RuleSet { return d.rules.Load() }

// SetRules installs a new rule set (a configuration reload) and asks the
// running loop to relist now. The published index keeps serving the old
// rules until that relist completes.
func (d *Discoverer) SetRules(rs *rules.RuleSet) {
	if rs == nil {
		return
	}
	d.rules.Store(rs)
	d.kick()
}

// kick asks the running loop for a pass.
func (d *Discoverer) kick() {
	select {
	case d.trigger <- struct{}{}:
	default: // a relist is already pending
	}
}

// Refresh is called when a request names a metric the index lacks (a
// series that appeared since the last relist): it asks the running loop
// for a pass and waits until a pass started after the call has published
// its index, then returns true (look the metric up again). Calls waiting at
// once share one pass, and passes run on demand start at least a second
// apart, at most six of them (with RefreshList's) per relist interval. key names what was looked up (API, resource, metric); a key that
// asked within its backoff (2 s, doubling on each refresh of the key up to
// the relist interval, reset after two idle intervals) gets no pass and
// false at once, so a request for a metric that never exists costs at most
// one pass per relist interval after the first few. Refresh returns false
// when ctx ends first. It needs Run.
func (d *Discoverer) Refresh(ctx context.Context, key string) bool {
	now := d.clock.Now()
	d.refreshMu.Lock()
	m, ok := d.misses[key]
	switch {
	case !ok || now.Sub(m.last) > 2*d.interval:
		if len(d.misses) > 0 {
			d.forgetMisses(now)
		}
		m = &missState{backoff: refreshBackoff}
		d.misses[key] = m
	case now.Sub(m.last) < m.backoff:
		d.refreshMu.Unlock()
		return false
	default:
		m.backoff = min(2*m.backoff, d.interval)
	}
	m.last = now
	if d.waiting == nil {
		d.waiting = make(chan struct{})
	}
	ch := d.waiting
	d.refreshMu.Unlock()
	d.metrics.DiscoveryRefreshes.Inc()
	d.kick()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// RefreshList is called before every metric is listed (the API's
// discovery documents: `kubectl get --raw
// /apis/custom.metrics.k8s.io/v1beta1`, the aggregator's poll), so that a
// listing shows the series that appeared since the last relist even when
// no request has named them yet. When the latest pass started more than 5 s
// ago it asks for a pass, shared with waiting Refresh calls, and waits for
// it; when the latest pass started within 5 s and has not published yet it
// waits for that one; otherwise it returns false at once. It waits for a
// pass only until the pass has run listPassWait: a pass running longer is
// held up by a slow or stalled backend, and the listing returns false at
// once (the current index), so that one stalled backend does not hold every
// discovery poll. Listings thus cost at most one pass per 5 s, whatever
// their number, and a listing shows every series that appeared 5 s or more
// before it, unless the pass takes longer than listPassWait (the series
// then show once it has published). It returns true when a pass it waited
// for has published, false when ctx ends first or the pass is stuck. It
// needs Run.
func (d *Discoverer) RefreshList(ctx context.Context) bool {
	now := d.clock.Now()
	d.refreshMu.Lock()
	ch := d.passDone
	if ch == nil || now.Sub(d.passStart) > listMaxAge {
		first := d.waiting == nil
		if first {
			d.waiting = make(chan struct{})
		}
		ch = d.waiting
		d.refreshMu.Unlock()
		if first { // listings joining a pass already asked for count once
			d.metrics.DiscoveryRefreshes.Inc()
		}
		d.kick()
	} else {
		d.refreshMu.Unlock()
		select {
		case <-ch:
			return false // fresh enough
		default:
		}
	}
	for {
		wait, stuck := d.passStuck(d.clock.Now())
		if stuck {
			return false
		}
		timer := d.clock.NewTimer(wait)
		select {
		case <-ch:
			timer.Stop()
			return true
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C():
		}
	}
}

// passStuck says whether the pass running now started listPassWait or more
// before now (stuck: a listing does not wait for it, nor for the next pass,
// which cannot start before it ends); if not, wait is how long until it
// will have (listPassWait when no pass is running: the pass asked for has
// not started yet).
func (d *Discoverer) passStuck(now time.Time) (wait time.Duration, stuck bool) {
	d.refreshMu.Lock()
	defer d.refreshMu.Unlock()
	if d.passDone == nil {
		return listPassWait, false
	}
	select {
	case <-d.passDone:
		return listPassWait, false
	default:
	}
	if age := now.Sub(d.passStart); age < listPassWait {
		return listPassWait - age, false
	}
	return 0, true
}

// forgetMisses drops the keys idle for two intervals (refreshMu held).
func (d *Discoverer) forgetMisses(now time.Time) {
	for k, m := range d.misses {
		if now.Sub(m.last) > 2*d.interval {
			delete(d.misses, k)
		}
	}
}

// beginPass records a pass starting at start and returns the channel to
// close when it has published: the one the waiting Refresh calls hold, if
// any; later calls get a new one.
func (d *Discoverer) beginPass(start time.Time) chan struct{} {
	d.refreshMu.Lock()
	defer d.refreshMu.Unlock()
	ch := d.waiting
	if ch == nil {
		ch = make(chan struct{})
	}
	d.waiting = nil
	d.passStart, d.passDone = start, ch
	return ch
}

// hasWaiting reports whether Refresh calls wait for the next pass.
func (d *Discoverer) hasWaiting() bool {
	d.refreshMu.Lock()
	defer d.refreshMu.Unlock()
	return d.waiting != nil
}

// Run discovers once, then every Interval (or sooner, see Discoverer and
// Refresh), until ctx is done.
func (d *Discoverer) Run(ctx context.Context) {
	ticker := d.clock.NewTicker(d.interval)
	defer ticker.Stop()
	retry := time.Second
	var onDemand []time.Time // starts of the recent on-demand passes, oldest first
	for {
		start := d.clock.Now()
		done := d.beginPass(start)
		_ = d.RunOnce(ctx)
		close(done)
		var retryC <-chan time.Time
		if !d.Ready() {
			retryC = d.clock.After(retry)
			retry = min(2*retry, d.interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-d.trigger:
			if !d.hasWaiting() {
				break // new rules (SetRules): relist at once
			}
			wait := refreshGap - d.clock.Since(start)
			if len(onDemand) == onDemandPerInterval {
				wait = max(wait, d.interval-d.clock.Since(onDemand[0]))
			}
			if wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-d.clock.After(wait):
				case <-ticker.C(): // the relist serves the waiting calls
				}
			}
			if len(onDemand) == onDemandPerInterval {
				onDemand = onDemand[1:]
			}
			onDemand = append(onDemand, d.clock.Now())
		case <-retryC:
		}
	}
}

// plan is one distinct seriesQuery of one backend and what it is asked for.
type plan struct {
	backend     string
	prom        Prometheus // the backend's client; nil when it is unknown
	seriesQuery string
	rules       []*rules.Rule
	nsLabels    []string // labels whose values are kept (namespaces), sorted
	labels      []string // other resource labels (presence only), sorted
	template    bool     // some custom rule maps labels with a template
	key         string   // seriesQuery and labels: the lastGood key
}

func (d *Discoverer) plans(rs *rules.RuleSet) []*plan {
	var out []*plan
	byQuery := map[string]*plan{}
	for _, r := range rs.Rules() {
		// Rules are grouped by backend, then by seriesQuery: each backend
		// is asked for its own rules only.
		k := r.Backend() + "\x00" + r.SeriesQuery()
		p, ok := byQuery[k]
		if !ok {
			p = &plan{backend: r.Backend(), prom: d.promFor(r.Backend()), seriesQuery: r.SeriesQuery()}
			byQuery[k] = p
			out = append(out, p)
		}
		p.rules = append(p.rules, r)
		res := r.Resources()
		if r.Kind() == rules.KindCustom {
			for l := range res.Overrides() {
				p.labels = append(p.labels, l)
			}
			if res.HasTemplate() {
				p.template = true
			}
		}
		if r.Kind() == rules.KindCustom || r.Namespaced() {
			if l, err := res.LabelForResource(rules.NamespaceResource); err == nil {
				p.nsLabels = append(p.nsLabels, l)
			}
		}
	}
	for _, p := range out {
		slices.Sort(p.nsLabels)
		p.nsLabels = slices.Compact(p.nsLabels)
		p.labels = presenceLabels(p.labels, p.nsLabels)
		p.key = p.backend + "\x00" + p.seriesQuery + "\x00" + strings.Join(p.nsLabels, "\x00") + "\x00\x00" + strings.Join(p.labels, "\x00") + fmt.Sprintf("\x00%t", p.template)
	}
	return out
}

// promFor returns the client of a backend, nil when it is unknown.
func (d *Discoverer) promFor(backend string) Prometheus {
	p, ok := d.backends(backend)
	if !ok {
		return nil
	}
	return p
}

// presenceLabels sorts and dedups labels, without the namespace labels and
// __name__.
func presenceLabels(labels, nsLabels []string) []string {
	out := make([]string, 0, len(labels))
	for _, l := range labels {
		if l != string(model.MetricNameLabel) && !slices.Contains(nsLabels, l) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SetOnRefused makes every later pass tell f the team rules it refused for
// producing too many metrics (Index.RefusedRules), e.g. to record an event
// on their ConfigMaps.
func (d *Discoverer) SetOnRefused(f func([]RefusedRule)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onRefused = f
}

// RunOnce runs one discovery pass and publishes its index. It returns the
// failures of the pass, joined (the index is published anyway, with the
// last good results of failed seriesQueries). Run calls it; tools and tests
// may call it directly.
func (d *Discoverer) RunOnce(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := d.clock.Now()
	rs := d.rules.Load()
	rs.ForgetUnresolved()
	plans := d.plans(rs)

	results, errs := d.fetchAll(ctx, plans, start)
	d.holdEmptied(plans, results, errs, start)
	in, backends, failed := d.collect(plans, results, errs)
	if ctx.Err() != nil && len(failed) > 0 {
		// Shutting down: do not publish a pass cut short.
		return errors.Join(failed...)
	}

	idx := BuildIndex(in, IndexOptions{Scoper: d.scoper, MaxTeamRuleMetrics: d.maxTeam})
	d.index.Store(idx)
	if refused := idx.RefusedRules(); len(refused) > 0 && d.onRefused != nil {
		d.onRefused(refused)
	}
	d.record(rs, idx, failed, start)
	complete, pending := d.recordBackends(backends)
	d.pending.Store(&pending)
	if complete {
		d.ready.Store(true)
	} else {
		msg := errors.Join(failed...).Error()
		d.lastErr.Store(&msg)
	}
	return errors.Join(failed...)
}

// fetchAll asks each plan's backend for its series, at most d.concurrency
// at once; results[i] and errs[i] are plans[i]'s.
func (d *Discoverer) fetchAll(ctx context.Context, plans []*plan, start time.Time) ([]fetchResult, []error) {
	results := make([]fetchResult, len(plans))
	errs := make([]error, len(plans))
	var g errgroup.Group
	g.SetLimit(d.concurrency)
	for i, p := range plans {
		g.Go(func() error {
			results[i], errs[i] = d.fetch(ctx, p, start)
			return nil // each seriesQuery's failure is its own
		})
	}
	_ = g.Wait()
	return results, errs
}

// collect turns a pass's answers into the index input: a failed
// seriesQuery keeps its last good result, and lastGood forgets the
// seriesQueries no rule asks any more. It returns, per backend, what the
// pass got from it, and the pass's failures.
func (d *Discoverer) collect(plans []*plan, results []fetchResult, errs []error) ([]RuleSeries, map[string]*backendPass, []error) {
	var in []RuleSeries
	// Per backend: complete when each of its seriesQueries has an answer
	// (this pass's or a last good one), up when this pass answered all,
	// down when every failure says the backend could not answer.
	backends := map[string]*backendPass{}
	d.metrics.DiscoveredSeries.Reset() // rules removed by a reload disappear
	var failed []error
	used := map[string]bool{}
	for i, p := range plans {
		used[p.key] = true
		bp := backends[p.backend]
		if bp == nil {
			bp = &backendPass{complete: true, up: true, down: true}
			backends[p.backend] = bp
		}
		res := results[i]
		if err := errs[i]; err != nil {
			failed = append(failed, err)
			res = d.keepLastGood(p, bp, err)
		} else {
			d.lastGood[p.key] = res
		}
		for _, r := range p.rules {
			rows, n := res.rowsFor(r)
			in = append(in, RuleSeries{Rule: r, Series: rows})
			d.metrics.DiscoveredSeries.WithLabelValues(apiLabel(r), r.Path()).Set(float64(n))
		}
	}
	for k := range d.lastGood {
		if !used[k] {
			delete(d.lastGood, k)
		}
	}
	return in, backends, failed
}

// holdEmptied keeps the last good results of a backend whose answers, for
// every seriesQuery it answered, went from some series to none, until they
// have been empty for the max age (one discovery window). That is what a
// Prometheus restarted after an outage longer than the window answers until
// its first scrape: its newest samples are older than the window, so the
// label endpoints and last_over_time find nothing, though every series is
// still there and its queries answer. Believing it at once turned every
// known metric into a 404 for up to a relist interval; a metric that really
// disappears now goes one window later. A backend answering some series for
// any seriesQuery is believed at once, as one whose series vanish one by one.
func (d *Discoverer) holdEmptied(plans []*plan, results []fetchResult, errs []error, now time.Time) {
	type backendAnswers struct{ anyRows, emptied bool }
	byBackend := map[string]*backendAnswers{}
	for i, p := range plans {
		b := byBackend[p.backend]
		if b == nil {
			b = &backendAnswers{}
			byBackend[p.backend] = b
		}
		if errs[i] != nil {
			continue
		}
		if !results[i].empty() {
			b.anyRows = true
		} else if last, ok := d.lastGood[p.key]; ok && !last.empty() {
			b.emptied = true
		}
	}
	for name, b := range byBackend {
		if b.anyRows || !b.emptied {
			delete(d.emptySince, name)
			continue
		}
		since, ok := d.emptySince[name]
		if !ok {
			since = now
			d.emptySince[name] = now
		}
		if now.Sub(since) >= d.maxAge {
			continue
		}
		klog.InfoS("Backend answered no series for any seriesQuery after it had some; keeping the last good series until its answers have been empty for the max age",
			"backend", name, "emptyFor", now.Sub(since), "maxAge", d.maxAge)
		for i, p := range plans {
			if p.backend == name && errs[i] == nil {
				if last, ok := d.lastGood[p.key]; ok {
					results[i] = last
				}
			}
		}
	}
}

// empty reports whether the answer has no series at all.
func (f fetchResult) empty() bool {
	if len(f.rows) > 0 {
		return false
	}
	for _, rows := range f.perRule {
		if len(rows) > 0 {
			return false
		}
	}
	return true
}

// keepLastGood records a failed seriesQuery (metrics, log, its backend's
// pass) and returns its last good result, empty when it has none.
func (d *Discoverer) keepLastGood(p *plan, bp *backendPass, err error) fetchResult {
	bp.up = false
	bp.down = bp.down && promclient.IsUnavailable(err)
	paths := make([]string, len(p.rules))
	for j, r := range p.rules {
		paths[j] = r.Path()
		d.metrics.DiscoveryFailures.WithLabelValues(apiLabel(r), r.Path()).Inc()
	}
	last, ok := d.lastGood[p.key]
	klog.ErrorS(err, "Discovery failed for a seriesQuery; its rules keep their last good result",
		"backend", p.backend, "rules", paths, "seriesQuery", p.seriesQuery, "keptLastGood", ok)
	if !ok && !promclient.IsBadQuery(err) {
		bp.complete = false
	}
	return last
}

// backendPass is what one pass got from one backend.
type backendPass struct{ complete, up, down bool }

// recordBackends sets the backends' up metric and returns whether the pass
// makes discovery complete, and the backends whose rules have no complete
// discovery yet. A pass is complete when every backend is; with several
// backends it is also complete when at least one is and each of the others
// could not answer at all (unreachable, 5xx, timeout): one backend down
// does not hold the others' metrics back, and requests for its metrics get
// a 503 (Pending).
func (d *Discoverer) recordBackends(backends map[string]*backendPass) (bool, []string) {
	d.metrics.DiscoveryBackendUp.Reset()
	var pending []string
	anyComplete, othersDown := false, true
	for name, bp := range backends {
		up := 0.0
		if bp.up {
			up = 1
		}
		d.metrics.DiscoveryBackendUp.WithLabelValues(name).Set(up)
		if bp.complete {
			anyComplete = true
			continue
		}
		pending = append(pending, name)
		othersDown = othersDown && bp.down
	}
	slices.Sort(pending)
	return len(pending) == 0 || anyComplete && othersDown, pending
}

// Pending returns the backends whose rules have no complete discovery yet
// (sorted): a metric the index lacks may be one of theirs, so the answer
// for it is "unavailable", not "not found".
func (d *Discoverer) Pending() []string {
	if p := d.pending.Load(); p != nil {
		return *p
	}
	return nil
}

func (d *Discoverer) record(rs *rules.RuleSet, idx *Index, failed []error, start time.Time) {
	dur := d.clock.Since(start)
	d.metrics.DiscoveryDuration.Observe(dur.Seconds())
	d.metrics.DiscoveredMetrics.Reset()
	for _, r := range rs.Rules() {
		d.metrics.DiscoveredMetrics.WithLabelValues(apiLabel(r), r.Path()).Set(float64(idx.RuleMetrics(r.Path())))
	}
	d.metrics.MetricConflicts.WithLabelValues(metrics.APICustom).Set(float64(idx.ConflictCount(rules.CustomMetricsAPI)))
	d.metrics.MetricConflicts.WithLabelValues(metrics.APIExternal).Set(float64(idx.ConflictCount(rules.ExternalMetricsAPI)))
	seen := map[string]bool{}
	for _, c := range idx.Conflicts() {
		s := c.String()
		seen[s] = true
		if !d.conflicts[s] {
			klog.InfoS("Metric produced by more than one rule; the last rule in the configuration wins",
				"api", c.API, "resource", c.GroupResource.String(), "metric", c.Metric,
				"winner", c.Winner.String(), "shadowed", c.Shadowed.String(), "namespaces", summarize(c.Namespaces, 5))
		}
	}
	d.conflicts = seen
	if len(failed) == 0 {
		d.metrics.DiscoveryRuns.WithLabelValues(metrics.OutcomeSuccess).Inc()
		d.metrics.DiscoveryLastSuccess.Set(float64(d.clock.Now().Unix()))
	} else {
		d.metrics.DiscoveryRuns.WithLabelValues(metrics.OutcomeFailure).Inc()
	}
	klog.V(2).InfoS("Discovery pass done", "duration", dur, "customMetrics", len(idx.CustomMetrics()),
		"externalMetrics", len(idx.ExternalMetrics()), "failedQueries", len(failed))
}

func apiLabel(r *rules.Rule) string {
	if r.Kind() == rules.KindExternal {
		return metrics.APIExternal
	}
	return metrics.APICustom
}

// queryVariant is how a seriesQuery is asked once the standard grouped
// query turned out unsupported by the backend.
type queryVariant int

const (
	variantStandard  queryVariant = iota // PromQL: last_over_time keeps __name__
	variantKeepNames                     // MetricsQL: last_over_time(...) keep_metric_names
	variantSeries                        // /api/v1/series
)

func (v queryVariant) String() string {
	switch v {
	case variantStandard:
		return "grouped"
	case variantKeepNames:
		return "grouped with keep_metric_names"
	default:
		return "series"
	}
}

// fetch asks Prometheus for one seriesQuery. With StrategyLabels, a backend
// that rejects match[] on the label endpoints is asked for series. With
// StrategyGrouped, a backend that drops __name__ in last_over_time
// (VictoriaMetrics) is asked again with MetricsQL's keep_metric_names
// modifier, and one that rejects both queries is asked for series. The
// working variant is remembered per seriesQuery.
func (d *Discoverer) fetch(ctx context.Context, p *plan, now time.Time) (fetchResult, error) {
	if p.prom == nil {
		return fetchResult{}, fmt.Errorf("seriesQuery %q: unknown backend %q", p.seriesQuery, p.backend)
	}
	if d.strategy == StrategySeries {
		return d.fetchSeries(ctx, p, now)
	}
	d.fbMu.Lock()
	variant := d.variants[p.key]
	d.fbMu.Unlock()
	if d.strategy == StrategyLabels {
		if variant != variantSeries {
			res, err := d.fetchLabels(ctx, p, now)
			if err == nil || !labelsUnsupported(err) {
				return res, err
			}
			klog.InfoS("Discovery by label endpoints not supported by the backend for this seriesQuery; listing series instead",
				"seriesQuery", p.seriesQuery, "reason", err.Error())
			d.fbMu.Lock()
			d.variants[p.key] = variantSeries
			d.fbMu.Unlock()
		}
		return d.fetchSeries(ctx, p, now)
	}
	for variant != variantSeries {
		res, err := d.fetchGrouped(ctx, p, now, variant == variantKeepNames)
		if err == nil {
			return res, nil
		}
		if !errors.Is(err, errNameDropped) && !promclient.IsBadQuery(err) {
			return fetchResult{}, err
		}
		next := variant + 1
		klog.InfoS("Discovery query not supported by the backend for this seriesQuery; trying another form",
			"seriesQuery", p.seriesQuery, "failed", variant.String(), "next", next.String(), "reason", err.Error())
		variant = next
		d.fbMu.Lock()
		d.variants[p.key] = variant
		d.fbMu.Unlock()
	}
	return d.fetchSeries(ctx, p, now)
}

// errNameDropped means the backend's last_over_time drops __name__.
var errNameDropped = errors.New("the grouped query's answer has no __name__ label")

// presenceFlag is the label the grouped query sets to "1" on series that
// carry the i-th presence label.
func presenceFlag(i int) string { return fmt.Sprintf("promscaler_has_%d", i) }

// GroupedQuery returns the instant query the grouped strategy sends for a
// seriesQuery (see StrategyGrouped). The inner count groups the series by
// name, namespace labels and the other resource labels (rows grow with
// objects); the outer sum turns each other resource label into a presence
// flag (rows grow with metrics x namespaces), the label_replace calls running
// over the inner rows, not over every series. Its values are series counts.
func GroupedQuery(seriesQuery string, nsLabels, presence []string, maxAge time.Duration) string {
	return groupedQuery(seriesQuery, nsLabels, presence, maxAge, false)
}

// groupedQuery is GroupedQuery, with MetricsQL's keep_metric_names modifier
// on last_over_time when keepNames is set.
func groupedQuery(seriesQuery string, nsLabels, presence []string, maxAge time.Duration, keepNames bool) string {
	outer := make([]string, 0, 1+len(nsLabels)+len(presence))
	outer = append(outer, string(model.MetricNameLabel))
	for _, l := range nsLabels {
		outer = append(outer, labelNameExpr(l))
	}
	expr := fmt.Sprintf("last_over_time(%s[%s])", strings.TrimSpace(seriesQuery), model.Duration(maxAge))
	if keepNames {
		expr += " keep_metric_names"
	}
	if len(presence) == 0 {
		return fmt.Sprintf("count by (%s) (%s)", strings.Join(outer, ","), expr)
	}
	inner := slices.Clone(outer)
	for _, l := range presence {
		inner = append(inner, labelNameExpr(l))
	}
	expr = fmt.Sprintf("count by (%s) (%s)", strings.Join(inner, ","), expr)
	for i, l := range presence {
		flag := presenceFlag(i)
		outer = append(outer, flag)
		expr = fmt.Sprintf("label_replace(%s, %q, \"1\", %s, \".+\")", expr, flag, strconv.Quote(l))
	}
	return fmt.Sprintf("sum by (%s) (%s)", strings.Join(outer, ","), expr)
}

func (d *Discoverer) fetchGrouped(ctx context.Context, p *plan, now time.Time, keepNames bool) (fetchResult, error) {
	presence := p.labels
	if p.template {
		names, err := p.prom.LabelNames(ctx, []string{p.seriesQuery}, now.Add(-d.maxAge), now)
		if err != nil {
			return fetchResult{}, fmt.Errorf("listing label names for seriesQuery %q: %w", p.seriesQuery, err)
		}
		presence = slices.Clone(presence)
		for _, n := range names {
			if mapsToResource(p.rules, n) {
				presence = append(presence, n)
			}
		}
		presence = presenceLabels(presence, p.nsLabels)
	}
	q := groupedQuery(p.seriesQuery, p.nsLabels, presence, d.maxAge, keepNames)
	smps, err := p.prom.QuerySamples(ctx, q, time.Time{})
	if err != nil {
		return fetchResult{}, fmt.Errorf("discovering seriesQuery %q: %w", p.seriesQuery, err)
	}
	res := fetchResult{rows: make([]rules.Series, 0, len(smps))}
	for _, s := range smps {
		name, ok := s.Labels.Get(model.MetricNameLabel)
		if !ok {
			return fetchResult{}, errNameDropped
		}
		ls := make(model.LabelSet, 1+len(p.nsLabels)+len(presence))
		ls[model.MetricNameLabel] = model.LabelValue(name)
		for _, l := range p.nsLabels {
			if v, ok := s.Labels.Get(l); ok {
				ls[model.LabelName(l)] = model.LabelValue(v)
			}
		}
		for i, l := range presence {
			if v, _ := s.Labels.Get(presenceFlag(i)); v == "1" {
				ls[model.LabelName(l)] = "1"
			}
		}
		res.rows = append(res.rows, rules.Series{Name: name, Labels: ls})
		res.series += int(s.Value)
	}
	return res, nil
}

// mapsToResource reports whether a custom rule with a template maps label.
func mapsToResource(ruleList []*rules.Rule, label string) bool {
	for _, r := range ruleList {
		if r.Kind() != rules.KindCustom || !r.Resources().HasTemplate() {
			continue
		}
		if _, ok := r.Resources().ResourceForLabel(label); ok {
			return true
		}
	}
	return false
}

func (d *Discoverer) fetchSeries(ctx context.Context, p *plan, now time.Time) (fetchResult, error) {
	sets, err := p.prom.Series(ctx, []string{p.seriesQuery}, now.Add(-d.maxAge), now)
	if err != nil {
		return fetchResult{}, fmt.Errorf("listing series for seriesQuery %q: %w", p.seriesQuery, err)
	}
	res := fetchResult{rows: make([]rules.Series, len(sets)), series: len(sets)}
	for i, ls := range sets {
		res.rows[i] = rules.SeriesFromLabelSet(ls)
	}
	return res, nil
}
