package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/pkg/limits"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
)

// Defaults of SharedConfig.
const (
	// DefaultSharedMaxAge is the oldest shared answer served: one HPA sync
	// period (kube-controller-manager's --horizontal-pod-autoscaler-sync-period).
	DefaultSharedMaxAge = 15 * time.Second
	// DefaultSharedMinNamespaces is how many namespaces must ask for one
	// rule's metric within two SharedConfig.MaxAge periods before their requests are
	// answered from a shared evaluation.
	DefaultSharedMinNamespaces = 3
	// DefaultSharedMaxSeries bounds the series of a shared answer: a rule
	// whose grouped answer is larger stays per request (a few HPAs reading
	// a metric of a million objects would pay more than they save).
	DefaultSharedMaxSeries = 100_000
	// DefaultSharedMaxBytes bounds the label bytes of a shared answer.
	DefaultSharedMaxBytes = 32 << 20
	// sharedRetryPeriods is how long a rule found too large for sharing (or
	// whose shared query failed) stays per request before it is tried
	// again, in units of MaxAge.
	sharedRetryPeriods = 40
	// sharedIdle is how long a key nobody asks for is kept, in units of
	// MaxAge.
	sharedIdlePeriods = 20
)

// SharedConfig configures shared evaluation: when requests of one rule
// (and series, resource and metric selector) come from several namespaces
// within two MaxAge periods, they are answered from one query covering every namespace
// and object (rules.Rule.SharedQuery), where rules.Rule.Sharing shows the
// rewrite equivalent, each request reading its slice. Objects the shared
// answer lacks (a pod whose series appeared after it) are asked for with
// the per-request query, so new series are served as soon as a
// per-request query would serve them.
type SharedConfig struct {
	// Disabled turns shared evaluation off: every request sends its query.
	Disabled bool
	// MaxAge is the oldest shared answer served (measured from when its
	// query was sent); 0 means DefaultSharedMaxAge. At most one HPA sync
	// period keeps the HPA's reading no older than its own period.
	MaxAge time.Duration
	// MinNamespaces is how many namespaces must ask within two MaxAge
	// periods before sharing starts; 0 means DefaultSharedMinNamespaces.
	MinNamespaces int
	// MaxSeries and MaxBytes bound a shared answer (series, label bytes);
	// 0 means the defaults. A larger answer is served once, then the key
	// stays per request for 40 MaxAge periods.
	MaxSeries int
	MaxBytes  int
}

// withDefaults fills in the zero fields.
func (c SharedConfig) withDefaults() SharedConfig {
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultSharedMaxAge
	}
	if c.MinNamespaces <= 0 {
		c.MinNamespaces = DefaultSharedMinNamespaces
	}
	if c.MaxSeries <= 0 {
		c.MaxSeries = DefaultSharedMaxSeries
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultSharedMaxBytes
	}
	return c
}

// sharedKey identifies the requests one shared query answers. A reload
// compiles new *rules.Rule values, hence new keys.
type sharedKey struct {
	rule     *rules.Rule
	series   string
	resource schema.GroupResource
	selector string
}

// sharedTable is one shared answer: each object's first sample with a
// value, by namespace and name, as sampleMatcher keeps it.
type sharedTable struct {
	sentAt  time.Time
	objects map[string]map[string]point
}

// sharedEntry is the state of one key.
type sharedEntry struct {
	decision error     // rules.Rule.Sharing's answer, computed once
	lastUse  time.Time // for eviction and for the refresh ahead of expiry
	seen     map[string]time.Time
	// seenSince is at most the oldest time in seen: while it is within
	// two MaxAge periods every namespace in seen asked recently, and
	// active need not walk seen.
	seenSince time.Time
	retryAt   time.Time // per request until then (too large, failed)
	table     *sharedTable
	inflight  chan struct{} // closed when the running evaluation ends
	lastError error
	// evaluate runs the key's shared query (the latest request's); the
	// refresh ahead of expiry calls it.
	evaluate func(context.Context) (*sharedTable, error)
	// took is how long the latest evaluation took.
	took time.Duration
}

// sharedEvaluator holds the shared answers. Safe for concurrent use.
type sharedEvaluator struct {
	cfg     SharedConfig
	clock   clock.WithDelayedExecution
	mu      sync.Mutex
	entries map[sharedKey]*sharedEntry
	swept   time.Time
}

func newSharedEvaluator(cfg SharedConfig, clk clock.WithDelayedExecution) *sharedEvaluator {
	return &sharedEvaluator{cfg: cfg.withDefaults(), clock: clk, entries: map[sharedKey]*sharedEntry{}}
}

func (s *sharedEvaluator) now() time.Time { return s.clock.Now() }

// sharedAnswer is what a request reads from a shared evaluation.
type sharedAnswer struct {
	found   []point // at each name's index
	missing []int   // indexes of the names the table lacks
	age     time.Duration
}

// errNotShared says that the request is answered per request.
var errNotShared = errors.New("not answered from a shared evaluation")

// queryShared answers queryCustom's request from a shared evaluation when
// the rule's requests are shared (ok), asking for the objects the shared
// answer lacks with the per-request query.
func (p *Provider) queryShared(ctx context.Context, t *customTarget, namespace string, names []string, sel labels.Selector) ([]point, bool, error) {
	a, err := p.sharedAnswer(ctx, t, namespace, names, sel)
	if err != nil {
		if !errors.Is(err, errNotShared) {
			klog.V(4).InfoS("Shared evaluation unavailable; querying per request", "rule", t.entry.Rule.Path(), "metric", t.metric, "err", err)
		}
		return nil, false, nil
	}
	klog.V(4).InfoS("Custom metrics answered from a shared evaluation", "metric", t.metric, "resource", t.gr(), "namespace", namespace,
		"objects", len(names), "missing", len(a.missing), "age", a.age, "rule", t.entry.Rule.Path())
	if len(a.missing) == 0 {
		return a.found, true, nil
	}
	missing := make([]string, len(a.missing))
	for i, k := range a.missing {
		missing[i] = names[k]
	}
	pts, err := p.queryPerRequest(ctx, t, namespace, missing, nil, sel)
	if err != nil {
		return nil, true, err
	}
	for i, k := range a.missing {
		a.found[k] = pts[i]
	}
	return a.found, true, nil
}

// sharedAnswer returns the request's slice of a shared evaluation no older than
// MaxAge, running one if needed, or errNotShared (with the reason logged
// at V(5)) when the request is answered per request.
func (p *Provider) sharedAnswer(ctx context.Context, t *customTarget, namespace string, names []string, sel labels.Selector) (sharedAnswer, error) {
	s := p.shared
	if s == nil || namespace == "" {
		return sharedAnswer{}, errNotShared
	}
	req := rules.SharedRequest{Series: t.entry.SeriesName, Resource: t.gr(), MetricSelector: sel}
	table, err := s.table(ctx, p.sharedKeyOf(t, req), namespace, func(ctx context.Context) (*sharedTable, error) {
		return p.evaluateShared(ctx, t, req)
	}, func() error { return t.entry.Rule.Sharing(req) })
	if err != nil {
		return sharedAnswer{}, err
	}
	a := sharedAnswer{found: make([]point, len(names)), age: s.now().Sub(table.sentAt)}
	objs := table.objects[namespace]
	for i, n := range names {
		pt, ok := objs[n]
		if !ok {
			a.missing = append(a.missing, i)
			continue
		}
		a.found[i] = pt
	}
	return a, nil
}

// table returns a shared table for key no older than MaxAge, or
// errNotShared.
func (s *sharedEvaluator) table(ctx context.Context, key sharedKey, namespace string,
	evaluate func(context.Context) (*sharedTable, error), decide func() error) (*sharedTable, error) {
	now := s.now()
	s.mu.Lock()
	s.sweep(now)
	e := s.entries[key]
	if e == nil {
		e = &sharedEntry{decision: decide(), seen: map[string]time.Time{}}
		s.entries[key] = e
		if e.decision != nil {
			klog.V(2).InfoS("Rule answered per request, not from a shared evaluation", "rule", key.rule.Path(), "series", key.series, "reason", e.decision)
		}
	}
	e.lastUse, e.evaluate = now, evaluate
	if e.decision != nil || now.Before(e.retryAt) || !s.active(e, namespace, now) {
		s.mu.Unlock()
		return nil, errNotShared
	}
	for {
		if e.table != nil && now.Sub(e.table.sentAt) <= s.cfg.MaxAge {
			t := e.table
			s.mu.Unlock()
			return t, nil
		}
		if e.inflight == nil {
			break
		}
		wait := e.inflight
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
		if e.table == nil || e.lastError != nil {
			s.mu.Unlock()
			return nil, errNotShared
		}
		now = s.now()
	}
	done := make(chan struct{})
	e.inflight = done
	s.mu.Unlock()
	return s.run(ctx, key, e, done, evaluate)
}

// run evaluates the shared query for e, publishes the table and arms its
// refresh ahead of expiry.
func (s *sharedEvaluator) run(ctx context.Context, key sharedKey, e *sharedEntry, done chan struct{},
	evaluate func(context.Context) (*sharedTable, error)) (*sharedTable, error) {
	// Other requests wait for this evaluation: the caller's cancellation
	// must not fail theirs (the querier bounds the query's time).
	start := s.now()
	t, err := evaluate(context.WithoutCancel(ctx))
	s.mu.Lock()
	defer s.mu.Unlock()
	e.inflight = nil
	close(done)
	e.lastError = err
	e.took = s.now().Sub(start)
	if err != nil {
		e.retryAt = s.now().Add(sharedRetryPeriods * s.cfg.MaxAge)
		return nil, fmt.Errorf("%w: %w", errNotShared, err)
	}
	e.table = t
	s.scheduleRefresh(key, e, t)
	return t, nil
}

// SharedRefreshMinLead is the least time before a shared answer expires
// that its refresh starts.
const SharedRefreshMinLead = 250 * time.Millisecond

// refreshLead is how long before a shared answer expires it is refreshed:
// twice the latest evaluation's duration, at least SharedRefreshMinLead and
// at most half of MaxAge. Refreshes are MaxAge minus the lead apart: at the
// default 15 s, 14.75 s when the query takes under 125 ms, 1.02 queries per
// period. A request waits only for a refresh that outlasts the lead (one
// over twice as long as the one before it), and then for the rest of it.
func (s *sharedEvaluator) refreshLead(took time.Duration) time.Duration {
	return min(max(SharedRefreshMinLead, 2*took), s.cfg.MaxAge/2)
}

// scheduleRefresh arms the refresh of table, e's newest, ahead of its
// expiry. A refresh armed for an older table finds it replaced and does
// nothing. Called with s.mu held.
func (s *sharedEvaluator) scheduleRefresh(key sharedKey, e *sharedEntry, table *sharedTable) {
	at := table.sentAt.Add(s.cfg.MaxAge - s.refreshLead(e.took))
	// The clock may call the function with its own lock held: it only
	// starts the refresh.
	s.clock.AfterFunc(at.Sub(s.now()), func() { go s.refreshAhead(key, e, table) })
}

// refreshAhead evaluates e's shared query again before table expires, so
// that requests keep reading an answer younger than MaxAge without waiting
// for one (singleflight with the requests' own evaluations). It stops when
// nobody asked for the key for two MaxAge periods, when the key went per
// request or was swept, when a newer table replaced this one, and when
// this one expired before the refresh could start (the next request
// evaluates).
func (s *sharedEvaluator) refreshAhead(key sharedKey, e *sharedEntry, table *sharedTable) {
	now := s.now()
	s.mu.Lock()
	if s.entries[key] != e || e.table != table || e.inflight != nil || e.decision != nil || e.evaluate == nil ||
		now.Before(e.retryAt) || now.Sub(e.lastUse) > 2*s.cfg.MaxAge || now.Sub(table.sentAt) > s.cfg.MaxAge {
		s.mu.Unlock()
		return
	}
	done := make(chan struct{})
	e.inflight = done
	evaluate := e.evaluate
	s.mu.Unlock()
	// No request waits for this one; the querier bounds its time.
	if _, err := s.run(context.Background(), key, e, done, evaluate); err != nil {
		klog.V(4).InfoS("Shared evaluation refresh failed; the rule's requests are answered per request for a while", "rule", key.rule.Path(), "series", key.series, "err", err)
	}
}

// active records namespace's request and reports whether MinNamespaces
// asked within two MaxAge periods (HPAs of one sync period ask about once
// per MaxAge, with some jitter). It walks seen only when its oldest entry
// may be older than that: with N namespaces asking every period, walking
// on every request cost N map steps per request. Called with s.mu held.
func (s *sharedEvaluator) active(e *sharedEntry, namespace string, now time.Time) bool {
	if len(e.seen) == 0 {
		e.seenSince = now
	}
	e.seen[namespace] = now
	if len(e.seen) < s.cfg.MinNamespaces {
		return false
	}
	if now.Sub(e.seenSince) <= 2*s.cfg.MaxAge {
		return true
	}
	e.seenSince = now
	for ns, at := range e.seen {
		if now.Sub(at) > 2*s.cfg.MaxAge {
			delete(e.seen, ns)
			continue
		}
		if at.Before(e.seenSince) {
			e.seenSince = at
		}
	}
	return len(e.seen) >= s.cfg.MinNamespaces
}

// sweep drops the keys nobody asked for lately (once per MaxAge). Called
// with s.mu held.
func (s *sharedEvaluator) sweep(now time.Time) {
	if now.Sub(s.swept) < s.cfg.MaxAge {
		return
	}
	s.swept = now
	for k, e := range s.entries {
		if e.inflight == nil && now.Sub(e.lastUse) > sharedIdlePeriods*s.cfg.MaxAge {
			delete(s.entries, k)
		}
	}
}

// evaluateShared runs the shared query of t's rule and indexes its answer.
func (p *Provider) evaluateShared(ctx context.Context, t *customTarget, req rules.SharedRequest) (*sharedTable, error) {
	what := t.what() + " (shared evaluation)"
	q, err := t.entry.Rule.SharedQuery(req)
	if err != nil {
		return nil, err
	}
	if err := limits.CheckQuerySize(what, q.Expr); err != nil {
		return nil, err
	}
	querier, err := p.querierFor(t.entry.Rule.Backend(), what)
	if err != nil {
		return nil, err
	}
	start := p.shared.now()
	ctx = promclient.WithTenant(ctx, t.entry.Rule.Tenant())
	smps, err := querier.QuerySamples(promclient.WithMaxSampleAge(ctx, q.MaxSampleAge), q.Expr, time.Time{})
	if err != nil {
		return nil, err
	}
	table := &sharedTable{sentAt: start, objects: map[string]map[string]point{}}
	nanAsZero, bytes := t.entry.Rule.NaNAsZero(), 0
	for i := range smps {
		sm := &smps[i]
		for _, l := range sm.Labels {
			bytes += len(l.Name) + len(l.Value)
		}
		ns, _ := sm.Labels.Get(q.NamespaceLabel)
		name, _ := sm.Labels.Get(q.ResourceLabel)
		if name == "" || ns == "" {
			continue
		}
		f, ok := sampleFloat(float64(sm.Value), nanAsZero)
		if !ok {
			continue
		}
		objs := table.objects[ns]
		if objs == nil {
			objs = map[string]point{}
			table.objects[ns] = objs
		}
		if _, dup := objs[name]; !dup {
			objs[name] = point{value: model.SampleValue(f), ts: sm.Timestamp, ok: true}
		}
	}
	klog.V(4).InfoS("Shared evaluation", "rule", t.entry.Rule.Path(), "metric", t.metric, "resource", t.gr(),
		"series", len(smps), "namespaces", len(table.objects), "labelBytes", bytes, "duration", p.shared.now().Sub(start))
	if len(smps) > p.shared.cfg.MaxSeries || bytes > p.shared.cfg.MaxBytes {
		// Served this once (it is correct), then per request for a while.
		klog.InfoS("Shared answer too large; the rule's requests are answered per request", "rule", t.entry.Rule.Path(),
			"metric", t.metric, "series", len(smps), "maxSeries", p.shared.cfg.MaxSeries, "labelBytes", bytes, "maxBytes", p.shared.cfg.MaxBytes)
		p.shared.mu.Lock()
		if e := p.shared.entries[p.sharedKeyOf(t, req)]; e != nil {
			e.retryAt = p.shared.now().Add(sharedRetryPeriods * p.shared.cfg.MaxAge)
		}
		p.shared.mu.Unlock()
	}
	return table, nil
}

func (p *Provider) sharedKeyOf(t *customTarget, req rules.SharedRequest) sharedKey {
	k := sharedKey{rule: t.entry.Rule, series: req.Series, resource: req.Resource}
	if req.MetricSelector != nil {
		k.selector = req.MetricSelector.String()
	}
	return k
}
