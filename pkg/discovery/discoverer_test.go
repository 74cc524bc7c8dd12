package discovery_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/test/promtest"
	"github.com/promscaler/promscaler/test/ruletest"
)

func TestStrategiesGiveTheSameIndex(t *testing.T) {
	series := testSeries()
	grouped := newSetup(t, testConfig, series, discovery.StrategyGrouped)
	listed := newSetup(t, testConfig, series, discovery.StrategySeries)
	grouped.runOnce(t)
	listed.runOnce(t)
	g, l := dump(grouped.disc.Index()), dump(listed.disc.Index())
	if diff := cmp.Diff(l, g); diff != "" {
		t.Errorf("index (-series +grouped):\n%s", diff)
	}
	// The offline path (saved series + MatchSeries) agrees too.
	in, err := discovery.MatchSeries(ruletest.Compile(t, testConfig), series)
	if err != nil {
		t.Fatal(err)
	}
	off := dump(discovery.BuildIndex(in, discovery.IndexOptions{Scoper: discovery.MapperScoper{Mapper: kubemapper.New()}}))
	// Rules differ by pointer between rule sets but render the same.
	if diff := cmp.Diff(l, off); diff != "" {
		t.Errorf("index (-series +offline):\n%s", diff)
	}
	want := []string{
		"custom namespaces/fpm_active_rate fpm_active_rate <- rules[0] (series \"pm_status\") []",
		"custom namespaces/http_errors http_errors <- rules[2] (series \"http_errors_total\") []",
		"custom namespaces/http_errors_per_second http_errors_per_second <- rules[1] (series \"http_errors_total\") []",
		"custom namespaces/http_requests http_requests <- rules[2] (series \"http_requests_total\") []",
		"custom namespaces/http_requests_per_second http_requests_per_second <- rules[1] (series \"http_requests_total\") []",
		"custom nodes/node_load1 node_load1 <- rules[3] (series \"node_load1\") []",
		"custom pods/fpm_active_rate(namespaced) fpm_active_rate <- rules[0] (series \"pm_status\") [ns0 ns1]",
		"custom pods/http_requests(namespaced) http_requests <- rules[2] (series \"http_requests_total\") [ns0 ns1]",
		"custom pods/http_requests_per_second(namespaced) http_requests_per_second <- rules[1] (series \"http_requests_total\") [ns0 ns1]",
		"custom services/http_requests(namespaced) http_requests <- rules[2] (series \"http_requests_total\") [ns0 ns1]",
		"custom services/http_requests_per_second(namespaced) http_requests_per_second <- rules[1] (series \"http_requests_total\") [ns0 ns1]",
		"custom deployments.apps/http_errors(namespaced) http_errors <- rules[2] (series \"http_errors_total\") [ns1]",
		"custom deployments.apps/http_errors_per_second(namespaced) http_errors_per_second <- rules[1] (series \"http_errors_total\") [ns1]",
		"custom jobs.batch/http_errors(namespaced) http_errors <- rules[2] (series \"http_errors_total\") [ns1]",
		"custom jobs.batch/http_errors_per_second(namespaced) http_errors_per_second <- rules[1] (series \"http_errors_total\") [ns1]",
		"external queue_age <- externalRules[1] (series \"queue_age\") []",
		"external queue_length <- externalRules[0] (series \"queue_length\") [q]",
	}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("grouped index (-want +got):\n%s", diff)
	}

	// Identical seriesQueries (rules[1] and rules[2]) are asked once; the
	// template rules need one label-names call.
	if got, want := grouped.fake.Calls(promtest.Query), 5; got != want {
		t.Errorf("grouped strategy sent %d queries, want %d (one per distinct seriesQuery):\n%s", got, want, strings.Join(grouped.fake.Queries(), "\n"))
	}
	if got := grouped.fake.Calls(promtest.Labels); got != 1 {
		t.Errorf("grouped strategy asked label names %d times, want 1", got)
	}
	if got := grouped.fake.Calls(promtest.Series); got != 0 {
		t.Errorf("grouped strategy listed series %d times, want 0", got)
	}
	if got, want := listed.fake.Calls(promtest.Series), 5; got != want {
		t.Errorf("series strategy listed series %d times, want %d", got, want)
	}
	// Both report the same number of series per rule.
	for _, rule := range []string{"rules[0]", "rules[1]", "rules[3]", "externalRules[0]"} {
		api := metrics.APICustom
		if strings.HasPrefix(rule, "external") {
			api = metrics.APIExternal
		}
		gs := testutil.ToFloat64(grouped.metrics.DiscoveredSeries.WithLabelValues(api, rule))
		ls := testutil.ToFloat64(listed.metrics.DiscoveredSeries.WithLabelValues(api, rule))
		if gs != ls || gs == 0 {
			t.Errorf("%s: discovered series grouped=%v series=%v, want equal and non-zero", rule, gs, ls)
		}
	}
}

func TestGroupedQueryText(t *testing.T) {
	t.Parallel()
	s := newSetup(t, testConfig, testSeries(), discovery.StrategyGrouped)
	s.runOnce(t)
	want := []string{
		`sum by (__name__,namespace,promscaler_has_0) (label_replace(count by (__name__,namespace,pod_name) (` +
			`last_over_time({__name__="pm_status",namespace!="",pod_name!="",state="active processes"}[5m])), "promscaler_has_0", "1", "pod_name", ".+"))`,
		`sum by (__name__,namespace,promscaler_has_0,promscaler_has_1,promscaler_has_2,promscaler_has_3) (` +
			`label_replace(label_replace(label_replace(label_replace(count by (__name__,namespace,deployment,job,pod,service) (` +
			`last_over_time({__name__=~"^http_.*_total$",namespace!=""}[5m])), ` +
			`"promscaler_has_0", "1", "deployment", ".+"), "promscaler_has_1", "1", "job", ".+"), "promscaler_has_2", "1", "pod", ".+"), "promscaler_has_3", "1", "service", ".+"))`,
		`sum by (__name__,promscaler_has_0) (label_replace(count by (__name__,instance) (last_over_time({__name__="node_load1"}[5m])), "promscaler_has_0", "1", "instance", ".+"))`,
		`count by (__name__,namespace) (last_over_time({__name__="queue_length",namespace!=""}[5m]))`,
		`count by (__name__) (last_over_time({__name__="queue_age"}[5m]))`,
	}
	got := s.fake.Queries()
	if diff := cmp.Diff(want, sortLike(got, want)); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
}

// sortLike orders got by the position of equal strings in want (queries run
// concurrently), unknown ones last.
func sortLike(got, want []string) []string {
	out := make([]string, 0, len(got))
	for _, w := range want {
		for _, g := range got {
			if g == w {
				out = append(out, g)
			}
		}
	}
	for _, g := range got {
		found := false
		for _, w := range want {
			found = found || g == w
		}
		if !found {
			out = append(out, g)
		}
	}
	return out
}

func TestFailureKeepsLastGoodResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		failure promtest.Failure
	}{
		{"server error", promtest.Failure{Status: http.StatusServiceUnavailable, Match: "pm_status"}},
		{"truncated JSON", promtest.Failure{Status: http.StatusOK, Body: `{"status":"success","data":{"resultType":"vec`, Match: "pm_status"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, testConfig, testSeries(), discovery.StrategyGrouped)
			s.runOnce(t)
			if !s.serves(podsGR, "ns0", "fpm_active_rate") {
				t.Fatal("fpm_active_rate not discovered")
			}
			// New data: pm_status fails, the node metric moves to n3.
			s.fake.Fail(promtest.Query, tc.failure)
			s.fake.SetSeries(append(testSeries()[:0:0], ls("__name__", "node_load1", "instance", "n3")))
			if err := s.disc.RunOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "pm_status") {
				t.Fatalf("RunOnce error = %v, want one naming the failed seriesQuery", err)
			}
			if !s.serves(podsGR, "ns0", "fpm_active_rate") {
				t.Error("the failed rule lost its last good result")
			}
			if s.serves(podsGR, "ns0", "http_requests_per_second") {
				t.Error("the other rules kept stale results")
			}
			if !s.serves(nodesGR, "", "node_load1") {
				t.Error("node_load1 lost")
			}
			if got := testutil.ToFloat64(s.metrics.DiscoveryFailures.WithLabelValues(metrics.APICustom, "rules[0]")); got != 1 {
				t.Errorf("rule_failures_total{rules[0]} = %v, want 1", got)
			}
			if got := s.failures(); got != 1 {
				t.Errorf("runs_total{failure} = %v, want 1", got)
			}
			if !s.disc.Ready() {
				t.Error("not ready after a complete discovery")
			}
		})
	}
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	s := newSetup(t, testConfig, testSeries(), discovery.StrategyGrouped)
	s.fake.Fail(promtest.Query, promtest.Failure{Status: http.StatusBadGateway})
	s.runOnceFails(t, "RunOnce succeeded against a failing Prometheus")
	if s.disc.Ready() {
		t.Fatal("ready without a complete discovery")
	}
	if err := s.disc.Checker().Check(nil); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Errorf("Checker() = %v, want an error with the cause", err)
	}
	s.fake.Fail(promtest.Query, promtest.Failure{})
	s.runOnce(t)
	if !s.disc.Ready() || s.disc.Checker().Check(nil) != nil {
		t.Error("not ready after Prometheus recovered")
	}
	if s.disc.Checker().Name() != "discovery" {
		t.Errorf("checker name %q", s.disc.Checker().Name())
	}
}

func TestFallbacks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(*promtest.Server)
		// Over two passes of 5 distinct seriesQueries: queries and series
		// lists sent (each variant is tried once per seriesQuery).
		wantQueries, wantSeries int
		wantKeep                bool // the second pass uses keep_metric_names
	}{
		{
			name:        "query rejected",
			setup:       func(f *promtest.Server) { f.Fail(promtest.Query, promtest.Failure{Status: http.StatusBadRequest}) },
			wantQueries: 5 + 5, wantSeries: 10,
		},
		{
			name:        "metric name dropped (VictoriaMetrics)",
			setup:       func(f *promtest.Server) { f.DropMetricName(true) },
			wantQueries: 5 + 5 + 5, wantKeep: true,
		},
		{
			name: "metric name dropped and keep_metric_names rejected",
			setup: func(f *promtest.Server) {
				f.DropMetricName(true)
				f.Fail(promtest.Query, promtest.Failure{Status: http.StatusBadRequest, Match: "keep_metric_names"})
			},
			wantQueries: 5 + 5, wantSeries: 10,
		},
	}
	want := reference(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, testConfig, testSeries(), discovery.StrategyGrouped)
			tc.setup(s.fake)
			for range 2 {
				s.runOnce(t)
			}
			if diff := cmp.Diff(want, dump(s.disc.Index())); diff != "" {
				t.Errorf("index (-series +fallback):\n%s", diff)
			}
			if got := s.fake.Calls(promtest.Query); got != tc.wantQueries {
				t.Errorf("%d queries over two passes, want %d", got, tc.wantQueries)
			}
			if got := s.fake.Calls(promtest.Series); got != tc.wantSeries {
				t.Errorf("%d series lists over two passes, want %d", got, tc.wantSeries)
			}
			qs := s.fake.Queries()
			if last := qs[len(qs)-1]; tc.wantKeep && !strings.Contains(last, "keep_metric_names") {
				t.Errorf("second pass sent %q, want keep_metric_names", last)
			}
		})
	}
}

func TestBadQueryCountsAsComplete(t *testing.T) {
	t.Parallel()
	s := newSetup(t, testConfig, testSeries(), discovery.StrategySeries)
	s.fake.Fail(promtest.Series, promtest.Failure{Status: http.StatusBadRequest, Match: "queue_age"})
	s.runOnceFails(t, "no error for a rejected seriesQuery")
	if !s.disc.Ready() {
		t.Error("a seriesQuery Prometheus rejects as invalid keeps the adapter unready forever")
	}
	if len(s.disc.Index().CustomMetrics()) == 0 {
		t.Error("other rules lost")
	}
}

func TestRunLoop(t *testing.T) {
	t.Parallel()
	s := newSetup(t, testConfig, testSeries(), discovery.StrategyGrouped)
	s.run(t)
	waitFor(t, "first discovery", s.disc.Ready)
	passes := s.passes

	// A tick relists.
	s.fake.SetSeries([]model.LabelSet{ls("__name__", "node_load1", "instance", "n9")})
	waitFor(t, "ticker registered", func() bool { return s.clock.HasWaiters() })
	s.clock.Step(time.Minute)
	waitFor(t, "relist on tick", func() bool {
		return s.serves(nodesGR, "", "node_load1") && len(s.disc.Index().CustomMetrics()) == 1 // the pod metrics are gone
	})

	// A new rule set relists without waiting for the ticker.
	before := passes()
	s.disc.SetRules(ruletest.Compile(t, `
rules:
- seriesQuery: 'node_load1'
  resources:
    overrides:
      instance: {resource: node}
  name:
    as: load
  metricsQuery: '<<.Series>>{<<.LabelMatchers>>}'
`))
	waitFor(t, "relist on SetRules", func() bool { return s.serves(nodesGR, "", "load") && passes() > before })
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := discovery.New(discovery.Options{Interval: -time.Second, MaxAge: -1, Concurrency: -1, Strategy: 7})
	if err == nil {
		t.Fatal("New accepted invalid options")
	}
	for _, want := range []string{"no Prometheus client", "no rule set", "relist interval", "max age", "concurrency", "strategy"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestRunRetriesUntilReady: Prometheus down at start; the loop retries
// sooner than the relist interval (1 s, doubling) and becomes ready once
// Prometheus answers, without a restart.
func TestRunRetriesUntilReady(t *testing.T) {
	t.Parallel()
	s := newSetup(t, testConfig, testSeries(), discovery.StrategyGrouped)
	s.fake.Fail(promtest.Query, promtest.Failure{Status: http.StatusServiceUnavailable})
	s.run(t)
	failures := s.failures
	waitFor(t, "first failed pass", func() bool { return failures() == 1 && s.clock.HasWaiters() })
	if s.disc.Ready() {
		t.Fatal("ready while Prometheus is down")
	}
	s.clock.Step(time.Second) // first retry
	waitFor(t, "second failed pass", func() bool { return failures() == 2 && s.clock.HasWaiters() })
	s.fake.Fail(promtest.Query, promtest.Failure{})
	s.clock.Step(1500 * time.Millisecond) // not yet: the retry delay doubled to 2 s
	time.Sleep(50 * time.Millisecond)
	if s.disc.Ready() {
		t.Fatal("retried before the doubled delay")
	}
	s.clock.Step(500 * time.Millisecond)
	waitFor(t, "ready after Prometheus came back", s.disc.Ready)
}

// TestRefresh: a request naming a metric the index lacks gets a pass at
// once and sees the new series; the same key asks again only after its
// backoff (2 s, then 4 s); another key is not held back.
func TestRefresh(t *testing.T) {
	t.Parallel()
	s, ctx := started(t)
	passes := s.passes
	served := func() bool { return s.serves(podsGR, "ns0", "http_logins_per_second") }
	const key = "custom pods true http_logins_per_second"
	s.clock.Step(time.Second) // past the gap since the first pass

	// A series of a new name appears: not served until a refresh.
	s.addLogins()
	if served() {
		t.Fatal("new metric served before any pass")
	}
	before := passes()
	if !s.disc.Refresh(ctx, key) {
		t.Fatal("first Refresh of a key returned false")
	}
	if !served() {
		t.Error("new metric not served after Refresh returned")
	}
	s.wantPasses(t, before+1, "after Refresh")

	// Within the key's backoff: no pass, false at once.
	if s.disc.Refresh(ctx, key) {
		t.Error("Refresh within the backoff returned true")
	}
	s.wantPasses(t, before+1, "after a Refresh within the backoff")
	// Another key is not held back by it.
	s.clock.Step(time.Second)
	if !s.disc.Refresh(ctx, "external other") {
		t.Error("Refresh of another key returned false")
	}
	// After 2 s the key asks again, then waits 4 s.
	s.clock.Step(time.Second)
	if !s.disc.Refresh(ctx, key) {
		t.Error("Refresh after the 2 s backoff returned false")
	}
	s.clock.Step(3 * time.Second)
	if s.disc.Refresh(ctx, key) {
		t.Error("Refresh 3 s after the second one returned true (backoff 4 s)")
	}
	s.clock.Step(time.Second)
	if !s.disc.Refresh(ctx, key) {
		t.Error("Refresh after the 4 s backoff returned false")
	}
	s.wantPasses(t, before+4, "after the 4 s backoff")
	s.wantRefreshes(t, 4)
}

// TestRefreshList: listing every metric shows a series that appeared since
// the last relist once the latest pass is more than 5 s old, at the cost of
// one pass however many listings ask; a listing within 5 s of a pass asks
// for none.
func TestRefreshList(t *testing.T) {
	t.Parallel()
	s, ctx := started(t)
	passes := s.passes
	listed := func() bool {
		return slices.ContainsFunc(s.disc.Index().CustomMetrics(), func(m cmprovider.CustomMetricInfo) bool {
			return m.Metric == "http_logins_per_second"
		})
	}
	s.addLogins()
	before := passes()

	// 1 s after the first pass: no pass, the listing is as it was.
	s.clock.Step(time.Second)
	s.disc.RefreshList(ctx)
	s.wantPasses(t, before, "listing 1 s after a pass")
	if listed() {
		t.Fatal("new metric listed before any pass")
	}

	// 5.5 s after it: one pass, and the new metric is listed.
	s.clock.Step(4500 * time.Millisecond)
	if !s.disc.RefreshList(ctx) {
		t.Fatal("RefreshList 5.5 s after a pass returned false")
	}
	if !listed() {
		t.Error("new metric not listed after RefreshList returned")
	}
	s.wantPasses(t, before+1, "listing 5.5 s after a pass")
	if s.disc.RefreshList(ctx) {
		t.Error("RefreshList right after a published pass returned true")
	}

	// Many listings at once, 6 s later: one pass between them.
	s.clock.Step(6 * time.Second)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { s.disc.RefreshList(ctx) })
	}
	wg.Wait()
	s.wantPasses(t, before+2, "after 20 listings at once")
	s.wantRefreshes(t, 2)
}

// TestRefreshBudget: passes asked for on demand are at most six per relist
// interval; the seventh waits until the oldest of the six is an interval
// old, so that a client naming a different missing metric every second
// costs seven passes a minute, not sixty.
func TestRefreshBudget(t *testing.T) {
	t.Parallel()
	s, ctx := started(t)
	waitFor(t, "ticker registered", s.clock.HasWaiters)
	idle := s.clock.Waiters() // the relist ticker
	before := s.passes()
	for i := range 6 {
		s.clock.Step(time.Second)
		if !s.disc.Refresh(ctx, fmt.Sprintf("custom pods true missing_%d", i)) {
			t.Fatalf("Refresh %d returned false", i)
		}
	}
	s.wantPasses(t, before+6, "after six refreshes")

	// The seventh, 1 s later: the loop waits for the oldest to be an
	// interval old (54 s) or the relist.
	s.clock.Step(time.Second)
	done := make(chan bool, 1)
	go func() { done <- s.disc.Refresh(ctx, "custom pods true missing_6") }()
	waitFor(t, "the loop waiting for the budget", func() bool { return s.clock.Waiters() > idle })
	s.wantPasses(t, before+6, "the seventh refresh at once")
	// 59 s after the first pass: still waiting; at 60 s the relist comes
	// before the budget (61 s) and serves it.
	s.clock.Step(52 * time.Second)
	s.wantPasses(t, before+6, "52 s later")
	s.clock.Step(time.Second)
	if !<-done {
		t.Error("the seventh Refresh returned false")
	}
	s.wantPasses(t, before+7, "after the relist")
}

// A Prometheus restarted after an outage longer than the discovery window
// answers no series at all until its first scrape (its newest samples are
// older than the window), though its queries still answer: the metrics
// discovered before must stay known (issue 32: 61-88 404s in the second
// after a 15 s outage), until the answers have been empty for the max age.
func TestEmptiedBackendKeepsLastGood(t *testing.T) {
	t.Parallel()
	for _, strategy := range discovery.Strategies {
		t.Run(strategy.String(), func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, testConfig, testSeries(), strategy)
			s.runOnce(t)
			known := func() bool { return s.serves(podsGR, "ns0", "fpm_active_rate") }
			if !known() {
				t.Fatal("fpm_active_rate not discovered")
			}
			steps := []struct {
				name      string
				series    []model.LabelSet
				advance   time.Duration
				wantKnown bool
			}{
				{"every answer empty", nil, 0, true},
				{"still empty within the max age", nil, 4 * time.Minute, true},
				{"series back", testSeries(), 2 * time.Minute, true},
				{"empty again: the max age counts from now", nil, time.Second, true},
				{"empty for the max age", nil, 5 * time.Minute, false},
				{"another seriesQuery answers: believed at once", append(testSeries()[:0:0], ls("__name__", "node_load1", "instance", "n3")), 0, false},
			}
			for _, st := range steps {
				s.fake.SetSeries(st.series)
				s.clock.Step(st.advance)
				s.runOnce(t)
				if got := known(); got != st.wantKnown {
					t.Fatalf("%s: fpm_active_rate known %v, want %v", st.name, got, st.wantKnown)
				}
			}
		})
	}
}

// TestRefreshListStuckPass: a listing waits for a pass only while the pass
// is young: once it has run listPassWait (250 ms) without publishing, held
// up by a stalled backend, the listing waiting for it returns, and a later
// listing returns at once instead of holding its request until the
// backend's call times out (every discovery poll waited its full 2 s
// while a backend was SIGSTOPped).
func TestRefreshListStuckPass(t *testing.T) {
	t.Parallel()
	s, ctx := started(t)
	arrived, release := s.fake.Hold(100)
	t.Cleanup(release)
	s.clock.Step(6 * time.Second) // the latest pass is older than 5 s
	waitFor(t, "ticker registered", s.clock.HasWaiters)
	idle := s.clock.Waiters() // the relist ticker

	first := make(chan bool, 1)
	go func() { first <- s.disc.RefreshList(ctx) }()
	<-arrived // the pass it asked for is running, its call held
	select {
	case got := <-first:
		t.Fatalf("RefreshList returned %t while its pass had run 0 s", got)
	case <-time.After(50 * time.Millisecond):
	}
	waitFor(t, "the listing's timer", func() bool { return s.clock.Waiters() > idle })
	s.clock.Step(300 * time.Millisecond)
	wantFalse(t, first, "RefreshList returned true for a pass that has not published",
		"RefreshList still waits for a pass running 300 ms (stuck after 250 ms)")

	later := make(chan bool, 1)
	go func() { later <- s.disc.RefreshList(ctx) }()
	wantFalse(t, later, "RefreshList returned true for a stuck pass", "a listing during a stuck pass waits for it")

	// Once the backend answers, the pass publishes and the next listing
	// 5 s later waits for its own pass again.
	release()
	waitFor(t, "the stuck pass to publish", func() bool { return !s.disc.RefreshList(ctx) && s.passes() > 0 })
}

// wantFalse fails the test with ifTrue when ch gives true, and with
// ifTimeout when it gives nothing within 5 s.
func wantFalse(t *testing.T, ch <-chan bool, ifTrue, ifTimeout string) {
	t.Helper()
	select {
	case got := <-ch:
		if got {
			t.Error(ifTrue)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(ifTimeout)
	}
}
