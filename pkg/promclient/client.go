// Package promclient is promscaler's Prometheus client: the HTTP API
// (instant queries, series, label names and values) over client_golang's
// api and api/v1 packages, except that instant query answers are read by a
// streaming decoder of its own (decode.go, reached only through
// decodeQuery: see docs/performance.md for what it buys). It has an injected
// *http.Client, a per-query timeout that is both sent as timeout= and
// enforced locally, GET or POST (POST automatically when a GET URL would be
// too long), coalescing of concurrent identical calls (extended, for "now"
// queries, to calls whose request arrived before the last identical answer
// landed: Config.ArrivalTime), an optional short-TTL result cache, and
// request metrics.
//
// It speaks only the standard Prometheus HTTP API, so Thanos, Mimir/Cortex
// and VictoriaMetrics work too. Consumers depend on the small interfaces
// (SampleQuerier, SeriesLister, LabelValuesLister, LabelNamesLister), not on
// *Client.
package promclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/servertiming"
	"github.com/promscaler/promscaler/internal/truncate"
	"github.com/promscaler/promscaler/internal/turns"
)

// SampleQuerier runs an instant PromQL query and returns the vector as
// Samples. A zero ts means "now" as Prometheus sees it, which is also what
// lets concurrent identical queries coalesce. A scalar result is returned as
// one sample with empty labels. It is the one read of sample values:
// custom and external metrics (pkg/provider), resource metrics
// (pkg/resourcemetrics), the grouped discovery strategy (pkg/discovery) and
// the explain tool.
type SampleQuerier interface {
	QuerySamples(ctx context.Context, query string, ts time.Time) (Samples, error)
}

// SeriesLister lists the label sets of the series matching any of the
// matchers (series selectors) between start and end.
type SeriesLister interface {
	Series(ctx context.Context, matchers []string, start, end time.Time) ([]model.LabelSet, error)
}

// LabelValuesLister lists the values of one label over the series matching
// any of the matchers (all series when none) between start and end.
type LabelValuesLister interface {
	LabelValues(ctx context.Context, label string, matchers []string, start, end time.Time) ([]string, error)
}

// LabelNamesLister lists the label names over the series matching any of the
// matchers (all series when none) between start and end.
type LabelNamesLister interface {
	LabelNames(ctx context.Context, matchers []string, start, end time.Time) ([]string, error)
}

var (
	_ SampleQuerier     = (*Client)(nil)
	_ SeriesLister      = (*Client)(nil)
	_ LabelValuesLister = (*Client)(nil)
	_ LabelNamesLister  = (*Client)(nil)
)

// DefaultTimeout is the default per-call timeout: the default of
// --prometheus-timeout (NewOptions), which the backends file's entries take
// unless they set their own. It is applied there only: New refuses a
// Config without a timeout.
const DefaultTimeout = 10 * time.Second

// MaxGETURLLength is the longest URL sent with GET when the verb is GET;
// longer requests are sent as a form POST, which Prometheus and compatible
// servers accept on the same endpoints. 4 KiB stays well under the 8 KiB
// line limits of common proxies and VictoriaMetrics' 16 KiB.
const MaxGETURLLength = 4096

// Config configures a Client. Address and HTTPClient are required.
type Config struct {
	// Backend names the backend in the "backend" label of the request
	// metrics and in errors; "" means DefaultBackendName.
	Backend string
	// Address is the base URL of the Prometheus HTTP API (without /api/v1).
	Address string
	// HTTPClient sends every request; it carries TLS and authentication.
	// Its Timeout should be zero: the per-call timeout governs.
	HTTPClient *http.Client
	// Verb is http.MethodGet (default) or http.MethodPost.
	Verb string
	// Timeout bounds each call; it is sent to Prometheus as timeout= on
	// queries and enforced locally. It must be positive (New refuses
	// zero: the adapter's default is DefaultTimeout, set by NewOptions).
	Timeout time.Duration
	// CacheTTL, when positive, keeps successful results that long and answers
	// identical calls from them. Zero (the default) disables the cache.
	CacheTTL time.Duration
	// Metrics receives request latencies and coalescing counts. Nil creates
	// a private set (useful in tests and tools).
	Metrics *metrics.Metrics
	// Clock drives the result cache and timestamps landed results (see
	// ArrivalTime). Nil means the real clock. ArrivalTime's times must come
	// from the same clock.
	Clock clock.PassiveClock
	// ArrivalTime, when not nil, returns when the request a call serves
	// reached the server (false when unknown), e.g. the API server's
	// request.ReceivedTimestampFrom. It lets an instant query at "now" (zero
	// ts) use the result of the identical query that landed last, if it
	// landed at or after that time and within the last minute: that
	// answer is what the call would have got by joining the query in flight
	// when its request arrived, so it is at least as fresh as the request.
	// Such calls count as coalesced. Errors are never reused. Nil (the
	// default) coalesces only with queries in flight.
	ArrivalTime ArrivalFunc
	// CoalesceWindow, with ArrivalTime, also lets a "now" query take the
	// identical query's last answer when its request arrived no later than
	// CoalesceWindow after that query was sent, even if after it landed,
	// provided that answer already answered another request than the one
	// that sent the query (a burst of identical requests): the requests of a
	// burst, which a busy server stamps one after another over more time
	// than a fast query takes, then share one query, while a client asking
	// one request at a time is never answered from an answer that landed
	// before its request arrived. Joining a flight already gives an answer
	// evaluated up to the flight's duration before the request arrived; in
	// a burst the window makes that bound a fixed floor. Zero shares only
	// with flights and answers that landed after the request arrived. At
	// most MaxCoalesceWindow.
	CoalesceWindow time.Duration
	// Guard, when set, bounds the requests to the backend (see Guard): it
	// wraps HTTPClient's transport.
	Guard *Guard
	// MaxSampleAge, when positive, is the backend's maximum sample age: a
	// sample older is no value (see WithMaxSampleAge, which overrides it
	// per call). Zero (the default) is off.
	MaxSampleAge time.Duration
}

// ArrivalFunc returns when the request a call serves reached the server
// (false when unknown); see Config.ArrivalTime.
type ArrivalFunc func(ctx context.Context) (time.Time, bool)

// DefaultCoalesceWindow is the adapter's default --prometheus-coalesce-window.
// It applies only within a burst (see Config.CoalesceWindow): 1,000
// identical requests at once reach the client over up to ~250 ms of a busy
// handler chain (docs/performance.md, Coalescing), and one query answers
// them all; an answer is then at most this much older than a request of the
// burst, a fifteenth of the HPA's 15 s sync period and of
// --shared-evaluation-max-age's default.
const DefaultCoalesceWindow = time.Second

// MaxCoalesceWindow bounds CoalesceWindow: a longer reuse is what the
// result cache (CacheTTL) is for.
const MaxCoalesceWindow = time.Second

// Client is the Prometheus client. It is safe for concurrent use. Results
// may be shared between callers and with the cache: callers must
// treat returned vectors, label sets and slices as read-only.
type Client struct {
	backend  string
	api      v1.API
	verb     *verbClient
	queryURL url.URL
	http     *http.Client
	timeout  time.Duration
	flights  *group
	cache    *resultCache
	metrics  *metrics.Metrics
	arrival  ArrivalFunc
	guard    *Guard
	// sampleAge is Config.MaxSampleAge; clock stamps the evaluation of
	// "now" queries for it.
	sampleAge time.Duration
	clock     clock.PassiveClock
}

// New builds a Client from cfg.
func New(cfg Config) (*Client, error) {
	if cfg.HTTPClient == nil {
		return nil, errors.New("prometheus client: no HTTP client given")
	}
	u, err := url.Parse(cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("prometheus client: invalid address: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("prometheus client: address %q must be an http or https URL with a host", u.Redacted())
	}
	verb := strings.ToUpper(cfg.Verb)
	switch verb {
	case "":
		verb = http.MethodGet
	case http.MethodGet, http.MethodPost:
	default:
		return nil, fmt.Errorf("prometheus client: unsupported verb %q (want GET or POST)", cfg.Verb)
	}
	if cfg.Timeout <= 0 {
		return nil, fmt.Errorf("prometheus client: backend %q: timeout %v must be positive (the --prometheus-timeout default is %v)", nameOr(cfg.Backend), cfg.Timeout, DefaultTimeout)
	}
	if cfg.CacheTTL < 0 {
		return nil, errors.New("prometheus client: cache TTL must not be negative")
	}
	if cfg.CoalesceWindow < 0 || cfg.CoalesceWindow > MaxCoalesceWindow {
		return nil, fmt.Errorf("prometheus client: coalesce window %v must be between 0 and %v", cfg.CoalesceWindow, MaxCoalesceWindow)
	}
	if cfg.Guard != nil {
		hc := *cfg.HTTPClient
		hc.Transport = cfg.Guard.RoundTripper(hc.Transport)
		cfg.HTTPClient = &hc
	}
	inner, err := api.NewClient(api.Config{Address: cfg.Address, Client: cfg.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("prometheus client: %w", err)
	}
	if cfg.Backend == "" {
		cfg.Backend = DefaultBackendName
	}
	m := cfg.Metrics
	if m == nil {
		m = metrics.New()
	}
	if m, err = m.ForBackend(cfg.Backend); err != nil {
		return nil, fmt.Errorf("prometheus client: %w", err)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	vc := &verbClient{inner: inner, verb: verb, http: cfg.HTTPClient}
	return &Client{
		backend:  cfg.Backend,
		api:      v1.NewAPI(vc),
		verb:     vc,
		queryURL: *inner.URL(queryPath, nil),
		http:     cfg.HTTPClient,
		timeout:  cfg.Timeout,
		flights:  &group{clock: clk, window: cfg.CoalesceWindow, mark: cfg.Guard.sentMark},
		cache:    &resultCache{ttl: cfg.CacheTTL, clock: clk},
		metrics:  m,
		arrival:  cfg.ArrivalTime,
		guard:    cfg.Guard,

		sampleAge: cfg.MaxSampleAge,
		clock:     clk,
	}, nil
}

// CloseIdleConnections closes the idle connections to Prometheus, e.g. when
// the adapter stops.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Backend returns the name of the backend the client talks to.
func (c *Client) Backend() string { return c.backend }

// Timeout returns the per-call timeout.
func (c *Client) Timeout() time.Duration { return c.timeout }

// WithTimeout returns a Client sharing this one's transport, coalescing and
// cache but with another per-call timeout, e.g. a longer one for discovery.
// A non-positive d keeps the current timeout.
func (c *Client) WithTimeout(d time.Duration) *Client {
	cp := *c
	if d > 0 {
		cp.timeout = d
	}
	return &cp
}

// QuerySamples implements SampleQuerier.
func (c *Client) QuerySamples(ctx context.Context, query string, ts time.Time) (Samples, error) {
	var sh share
	if ts.IsZero() && c.arrival != nil {
		// A query at an explicit time has one answer; only "now" needs the
		// freshness rule to share beyond a flight.
		sh.keep = true
		if t, ok := c.arrival(ctx); ok {
			sh.arrived = t
		}
	}
	age := c.maxSampleAge(ctx)
	key := cacheKey(metrics.EndpointQuery, c.timeout, ts, time.Time{}, sampleAgeKeyParts(query, age)...)
	smps, err := callAs(ctx, c, metrics.EndpointQuery, query, key, sh, func(ctx context.Context) (Samples, v1.Warnings, error) {
		if st, _ := ctx.Value(requestStateKey{}).(*requestState); st != nil {
			st.arrived = sh.arrived
		}
		return c.query(ctx, query, ts, age)
	})
	if err != nil || age <= 0 {
		return smps, err
	}
	return c.dropStale(smps, ts, age), nil
}

// Series implements SeriesLister.
func (c *Client) Series(ctx context.Context, matchers []string, start, end time.Time) ([]model.LabelSet, error) {
	key := cacheKey(metrics.EndpointSeries, c.timeout, start, end, matchers...)
	return callAs(ctx, c, metrics.EndpointSeries, strings.Join(matchers, ", "), key, share{}, func(ctx context.Context) ([]model.LabelSet, v1.Warnings, error) {
		sets, warnings, _, err := c.api.Series(ctx, matchers, start, end)
		return sets, warnings, err
	})
}

// LabelValues implements LabelValuesLister.
func (c *Client) LabelValues(ctx context.Context, label string, matchers []string, start, end time.Time) ([]string, error) {
	key := cacheKey(metrics.EndpointLabelValues, c.timeout, start, end, append([]string{label}, matchers...)...)
	return callAs(ctx, c, metrics.EndpointLabelValues, label+" "+strings.Join(matchers, ", "), key, share{}, func(ctx context.Context) ([]string, v1.Warnings, error) {
		vals, warnings, _, err := c.api.LabelValues(ctx, label, matchers, start, end)
		return strs(vals), warnings, err
	})
}

// LabelNames implements LabelNamesLister.
func (c *Client) LabelNames(ctx context.Context, matchers []string, start, end time.Time) ([]string, error) {
	key := cacheKey(metrics.EndpointLabelNames, c.timeout, start, end, matchers...)
	return callAs(ctx, c, metrics.EndpointLabelNames, strings.Join(matchers, ", "), key, share{}, func(ctx context.Context) ([]string, v1.Warnings, error) {
		names, warnings, _, err := c.api.LabelNames(ctx, matchers, start, end)
		return strs(names), warnings, err
	})
}

// strs converts label names or values to strings.
func strs[S ~[]E, E ~string](in S) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}

// callAs is c.call for a call of fn, whose warnings are logged, giving its
// result as a T.
func callAs[T any](ctx context.Context, c *Client, endpoint, desc, key string, sh share, fn func(context.Context) (T, v1.Warnings, error)) (T, error) {
	v, err := c.call(ctx, endpoint, desc, key, sh, func(ctx context.Context) (any, error) {
		out, warnings, err := fn(ctx)
		logWarnings(endpoint, desc, warnings)
		if err != nil {
			return nil, err
		}
		return out, nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

// call runs fn once for all concurrent callers with the same key (and, as sh
// allows, for callers that arrived before its result landed), under the
// per-call timeout, recording metrics, and answers from the cache when on.
//
// The caller's wait (a query it sent, joined or took) is recorded for its
// request's Server-Timing header (servertiming).
func (c *Client) call(ctx context.Context, endpoint, desc, key string, sh share, fn func(context.Context) (any, error)) (any, error) {
	start := time.Now()
	defer func() { servertiming.Observe(ctx, start, time.Now()) }()
	if ns := tenantOf(ctx); ns != "" {
		// A team's calls are its own (WithTenant): never shared with
		// another's, whose cost is counted elsewhere.
		key += "\x00tenant\x00" + ns
	}
	if v, ok := c.cache.get(key); ok {
		c.metrics.CacheHits.WithLabelValues(endpoint).Inc()
		return c.answered(ctx, endpoint, desc, v)
	}
	if err := ctx.Err(); err != nil {
		return nil, classify(endpoint, desc, err, err, 0)
	}
	w, err := c.guard.wait(ctx)
	if err != nil {
		return nil, classify(endpoint, desc, err, nil, 0)
	}
	if w.timer != nil {
		sh.onFlight = w.flight
	}
	v, err := c.flights.do(w.ctx, key, sh, func(fctx context.Context) (any, error) {
		return c.send(fctx, endpoint, desc, key, fn)
	}, c.metrics.CoalescedQueries.WithLabelValues(endpoint).Inc)
	if err = w.done(err); err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return nil, err
		}
		// The caller's own context ended while waiting.
		return nil, classify(endpoint, desc, err, ctx.Err(), 0)
	}
	return c.answered(ctx, endpoint, desc, v)
}

// answered returns v once the caller's request has its turn to build its
// answer from it (internal/turns): in a burst, the hundreds of requests a
// landed query releases at once would otherwise all turn samples into
// answers together, and the burst's later requests, not yet taken in by the
// server, would wait behind them.
func (c *Client) answered(ctx context.Context, endpoint, desc string, v any) (any, error) {
	if err := turns.Take(ctx); err != nil {
		return nil, classify(endpoint, desc, err, ctx.Err(), 0)
	}
	return v, nil
}

// send performs one request to Prometheus: the shared work of a flight.
func (c *Client) send(ctx context.Context, endpoint, desc, key string, fn func(context.Context) (any, error)) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	st := &requestState{}
	if endpoint == metrics.EndpointQuery {
		st.timeout = c.timeout
	}
	ctx = context.WithValue(ctx, requestStateKey{}, st)

	start := time.Now()
	v, err := fn(ctx)
	elapsed := time.Since(start)
	if err != nil {
		pe := classify(endpoint, desc, err, ctx.Err(), st.status)
		c.metrics.PrometheusRequestDuration.WithLabelValues(endpoint, pe.Outcome).Observe(elapsed.Seconds())
		klog.V(4).InfoS("Prometheus request failed", "endpoint", endpoint, "query", pe.Query,
			"outcome", pe.Outcome, "status", st.status, "duration", elapsed, "err", pe.Err)
		return nil, pe
	}
	c.metrics.PrometheusRequestDuration.WithLabelValues(endpoint, metrics.PromOutcomeSuccess).Observe(elapsed.Seconds())
	if logger := klog.V(5); logger.Enabled() {
		if st.arrived.IsZero() {
			logger.InfoS("Prometheus request", "endpoint", endpoint, "query", truncate.String(desc, maxQueryInError), "duration", elapsed)
		} else {
			// How long the request that sent the query had been waiting
			// (from its arrival stamp): what a caller that missed an
			// identical answer saw.
			logger.InfoS("Prometheus request", "endpoint", endpoint, "query", truncate.String(desc, maxQueryInError), "duration", elapsed, "requestAge", start.Sub(st.arrived))
		}
	}
	c.cache.put(key, v)
	return v, nil
}

// queryPath is the instant query endpoint below the address.
const queryPath = "/api/v1/query"

// query sends an instant query and decodes the answer with the streaming
// decoder (decodeQuery); requests and errors are those of client_golang's
// v1 API Query followed by toVector.
func (c *Client) query(ctx context.Context, query string, ts time.Time, maxSampleAge time.Duration) (Samples, v1.Warnings, error) {
	args := c.queryURL.Query()
	args.Set("query", query)
	setLookbackDelta(args, maxSampleAge)
	if !ts.IsZero() {
		args.Set("time", formatTime(ts))
	}
	var (
		smps     Samples
		scalar   bool
		warnings v1.Warnings
		decErr   error
	)
	err := c.verb.query(ctx, c.queryURL, args, func(code int, body []byte) {
		// The decoder copies every string it keeps (labels, warnings,
		// error details): the body buffer is reused.
		smps, scalar, warnings, decErr = decodeInstant(code, body)
	})
	if err != nil {
		return nil, nil, err
	}
	if scalar && onlyVector(query) {
		// Served, the scalar would become a value of a metric whose query
		// cannot have one: a sample without labels, for any object.
		return nil, warnings, &v1.Error{Type: v1.ErrBadResponse,
			Msg: "Prometheus answered a scalar to a query whose result can only be an instant vector (refused: a scalar is not a value of the series the query selects)"}
	}
	return smps, warnings, decErr
}

// promql parses queries as the most permissive Prometheus server would
// (every feature flag on).
var promql = parser.NewParser(parser.Options{
	EnableExperimentalFunctions: true,
	EnableBinopFillModifiers:    true,
	EnableUnquotedUTF8Names:     true,
})

// onlyVector reports whether PromQL's type rules say query evaluates to an
// instant vector (so a scalar answer to it is wrong). A query the parser
// does not read (another server's dialect) is given the benefit of the
// doubt. Only scalar answers are checked, so the parse is rare.
func onlyVector(query string) bool {
	expr, err := promql.ParseExpr(query)
	return err == nil && expr.Type() == parser.ValueTypeVector
}

// formatTime renders an evaluation time as Prometheus' float seconds, the
// way client_golang does.
func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.Unix())+float64(t.Nanosecond())/1e9, 'f', -1, 64)
}

func logWarnings(endpoint, desc string, warnings v1.Warnings) {
	if len(warnings) > 0 {
		klog.V(2).InfoS("Prometheus answered with warnings", "endpoint", endpoint,
			"query", truncate.String(desc, maxQueryInError), "warnings", warnings)
	}
}

// cacheKey identifies a call for coalescing and caching. A zero time stays
// "now" (never a concrete instant), so concurrent "now" calls share a key.
func cacheKey(endpoint string, timeout time.Duration, t1, t2 time.Time, parts ...string) string {
	var b strings.Builder
	b.WriteString(endpoint)
	b.WriteByte(0)
	b.WriteString(strconv.FormatInt(int64(timeout), 10))
	for _, t := range []time.Time{t1, t2} {
		b.WriteByte(0)
		if !t.IsZero() {
			b.WriteString(strconv.FormatInt(t.UnixNano(), 10))
		}
	}
	for _, p := range parts {
		b.WriteByte(0)
		b.WriteString(p)
	}
	return b.String()
}
