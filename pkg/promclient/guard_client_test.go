package promclient_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/test/promtest"
)

// TestClientGuard: through the Client, with a stalled fake Prometheus, the
// requests beyond the bound fail at once as unavailable (a 503 for the
// API), and a backend known down is not asked.
func TestClientGuard(t *testing.T) {
	fake := promtest.New([]model.LabelSet{{"__name__": "up", "job": "a"}})
	defer fake.Close()
	m := metrics.New()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	guard, err := promclient.NewGuard("main", promclient.GuardConfig{MaxConcurrent: 2, BreakerFailures: 1}, m, clk)
	if err != nil {
		t.Fatal(err)
	}
	c, err := promclient.New(promclient.Config{Address: fake.URL, HTTPClient: &http.Client{}, Metrics: m, Guard: guard, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if c.Guard() != guard {
		t.Fatal("Client.Guard is not the guard given")
	}
	for _, q := range []string{"up", "up + 0", "up / 3"} {
		fake.Answer(q, model.Vector{{Metric: model.Metric{"job": "a"}, Value: 1}})
	}
	arrived, release := fake.Hold(2)
	done := make(chan error, 2)
	for _, q := range []string{"up", "up + 0"} {
		go func() {
			_, err := c.QuerySamples(context.Background(), q, time.Time{})
			done <- err
		}()
	}
	<-arrived
	<-arrived
	_, err = c.QuerySamples(context.Background(), "up * 2", time.Time{})
	var pe *promclient.Error
	if !errors.As(err, &pe) || pe.Outcome != metrics.PromOutcomeBusy || !promclient.IsUnavailable(err) {
		t.Fatalf("third query with two stalled: %v, want a busy, unavailable *Error", err)
	}
	release()
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("stalled query after release: %v", err)
		}
	}

	// Down: a timeout marks it (one failure here); the next query is not
	// sent.
	arrived, release = fake.Hold(1)
	defer release()
	// (The client's own timeout: a caller going away cancels the request,
	// which is no failure of the backend.)
	if _, err := c.WithTimeout(50*time.Millisecond).QuerySamples(context.Background(), "up / 2", time.Time{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("query held past its deadline: %v, want a timeout", err)
	}
	<-arrived
	release()
	calls := fake.Calls(promtest.Query)
	_, err = c.QuerySamples(context.Background(), "up / 3", time.Time{})
	if !errors.As(err, &pe) || pe.Outcome != metrics.PromOutcomeBackendDown || !promclient.IsUnavailable(err) {
		t.Fatalf("query with the backend down: %v, want a backend_down, unavailable *Error", err)
	}
	if got := fake.Calls(promtest.Query) - calls; got != 0 {
		t.Errorf("%d queries reached Prometheus while down, want 0", got)
	}
	if diff := cmp.Diff(promclient.ErrBackendDown.Error(), pe.Err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	// After the open period one probe goes and, answered, closes it.
	clk.Step(promclient.DefaultBreakerOpen)
	if _, err := c.QuerySamples(context.Background(), "up / 3", time.Time{}); err != nil {
		t.Errorf("the probe: %v", err)
	}
	if !guard.Status().Up {
		t.Error("still down after the probe got an answer")
	}
}

// bigPod is a series of up whose pod label makes its answer about size
// bytes.
func bigPod(size int) model.Metric {
	return model.Metric{"__name__": "up", "pod": model.LabelValue(strings.Repeat("p", size))}
}

// TestClientAnswerTooLarge: an answer longer than the guard's
// MaxAnswerBytes is refused (answer_too_large, unavailable: a 503 whose
// message names the limit and its flag), on the query path and on the
// client_golang path (series); one within it is served; and the backend
// stays up (it answered).
func TestClientAnswerTooLarge(t *testing.T) {
	const limit = 64 << 10
	fake := promtest.New([]model.LabelSet{model.LabelSet(bigPod(10 * limit))})
	defer fake.Close()
	fake.Answer("up", model.Vector{{Metric: bigPod(limit / 2), Value: 1}})
	fake.Answer("up + 1", model.Vector{{Metric: bigPod(10 * limit), Value: 1}})
	guard, err := promclient.NewGuard("main", promclient.GuardConfig{MaxAnswerBytes: limit}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := promclient.New(promclient.Config{Address: fake.URL, HTTPClient: &http.Client{}, Guard: guard, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if smps, err := c.QuerySamples(ctx, "up", time.Time{}); err != nil || len(smps) != 1 {
		t.Fatalf("answer within the limit: %d samples, %v", len(smps), err)
	}
	for name, call := range map[string]func() error{
		"query":  func() error { _, err := c.QuerySamples(ctx, "up + 1", time.Time{}); return err },
		"series": func() error { _, err := c.Series(ctx, []string{"up"}, time.Time{}, time.Time{}); return err },
	} {
		err := call()
		var pe *promclient.Error
		var tl *promclient.AnswerTooLargeError
		if !errors.As(err, &pe) || pe.Outcome != metrics.PromOutcomeAnswerTooLarge || !promclient.IsUnavailable(err) || !errors.As(err, &tl) {
			t.Fatalf("%s: answer of 10 times the limit: %v, want an answer_too_large, unavailable *Error", name, err)
		}
		for _, want := range []string{"65536-byte answer limit", "--prometheus-max-answer-bytes", "max_answer_bytes", `backend "main"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", name, err, want)
			}
		}
	}
	if !guard.Status().Up {
		t.Error("the backend is marked down for an oversized answer: it answered")
	}
}

// TestClientWaitingBound: with a stalled backend, the requests waiting on
// it are bounded, every caller counted (a coalesced query's joiners too,
// which the in-flight bound counts once): one beyond MaxWaiting waits
// WaitGrace, then fails busy with a message naming the backend and the
// bound, and the next one beyond it fails at once, without a query; once
// the backend answers, requests are served again.
func TestClientWaitingBound(t *testing.T) {
	fake := promtest.New([]model.LabelSet{{"__name__": "up", "job": "a"}})
	defer fake.Close()
	m := metrics.New()
	guard, err := promclient.NewGuard("main", promclient.GuardConfig{MaxWaiting: 2, WaitGrace: 20 * time.Millisecond}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := promclient.New(promclient.Config{Backend: "main", Address: fake.URL, HTTPClient: &http.Client{}, Metrics: m, Guard: guard, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"up", "up + 0"} {
		fake.Answer(q, model.Vector{{Metric: model.Metric{"job": "a"}, Value: 1}})
	}
	// The test's deadline: without a bound, a request beyond it would
	// wait for the stalled backend until then.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	arrived, release := fake.Hold(4)
	defer release()
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.QuerySamples(ctx, "up", time.Time{})
			done <- err
		}()
	}
	<-arrived
	promclient.WaitFor(t, func() bool {
		return testutil.ToFloat64(m.CoalescedQueries.WithLabelValues("main", metrics.EndpointQuery)) == 1
	})
	rejected := m.PrometheusRejected.WithLabelValues("main", "too_many_waiting")
	// A third identical request (it would join the stalled query) waits
	// its grace, then fails.
	_, err = c.QuerySamples(ctx, "up", time.Time{})
	checkTooManyWaiting(t, "beyond the bound", err)
	if got := testutil.ToFloat64(rejected); got != 1 {
		t.Errorf("rejected{too_many_waiting} = %v, want 1", got)
	}
	// The backend is saturated: another request beyond the bound fails at
	// once, without a query.
	calls := fake.Calls(promtest.Query)
	_, err = c.QuerySamples(ctx, "up + 0", time.Time{})
	checkTooManyWaiting(t, "saturated", err)
	if got := fake.Calls(promtest.Query) - calls; got != 0 {
		t.Errorf("%d queries sent while saturated, want 0", got)
	}
	release()
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("waiting request after the backend answered: %v", err)
		}
	}
	if _, err := c.QuerySamples(ctx, "up + 0", time.Time{}); err != nil {
		t.Errorf("request after the backend answered: %v", err)
	}
}

func checkTooManyWaiting(t *testing.T, name string, err error) {
	t.Helper()
	var (
		pe      *promclient.Error
		waiting *promclient.TooManyWaitingError
	)
	if !errors.As(err, &pe) || pe.Outcome != metrics.PromOutcomeBusy || !promclient.IsUnavailable(err) ||
		!errors.As(err, &waiting) || !errors.Is(err, promclient.ErrBackendBusy) {
		t.Fatalf("%s: %v, want a busy, unavailable *Error with a *TooManyWaitingError", name, err)
	}
	for _, want := range []string{`backend "main"`, "2 requests already wait", "--prometheus-max-waiting", "max_waiting"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not say %q", name, err, want)
		}
	}
}

// TestClientWaitingBurst: a burst of identical requests far beyond
// MaxWaiting, answered by one query within the grace, is served whole by
// that one query: the bound refuses only requests waiting on a backend
// that does not answer.
func TestClientWaitingBurst(t *testing.T) {
	const n = 50
	fake := promtest.New([]model.LabelSet{{"__name__": "up", "job": "a"}})
	defer fake.Close()
	fake.Answer("up", model.Vector{{Metric: model.Metric{"job": "a"}, Value: 1}})
	m := metrics.New()
	guard, err := promclient.NewGuard("main", promclient.GuardConfig{MaxWaiting: 2, WaitGrace: time.Minute}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := promclient.New(promclient.Config{Backend: "main", Address: fake.URL, HTTPClient: &http.Client{}, Metrics: m, Guard: guard, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	arrived, release := fake.Hold(1)
	defer release()
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := c.QuerySamples(context.Background(), "up", time.Time{})
			errs <- err
		}()
	}
	<-arrived
	promclient.WaitFor(t, func() bool {
		return testutil.ToFloat64(m.CoalescedQueries.WithLabelValues("main", metrics.EndpointQuery)) == n-1
	})
	release()
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("request of the burst: %v", err)
		}
	}
	if got := fake.Calls(promtest.Query); got != 1 {
		t.Errorf("%d queries for the burst, want 1", got)
	}
}

// TestClientTeamBudget: a team's requests (WithTenant) are bounded and
// counted apart: their timeouts do not mark the backend down for everybody
// (before, one team's slow queries opened the shared breaker), and their
// waiting requests are bounded per namespace (a quarter of MaxWaiting), so
// that another team's and the cluster's requests are still served.
func TestClientTeamBudget(t *testing.T) {
	const empty = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	fake := promtest.New([]model.LabelSet{{"__name__": "up", "job": "a"}})
	defer fake.Close()
	stall := make(chan struct{})
	defer close(stall)
	fake.HandleQuery(func(q string) (int, string) {
		if strings.Contains(q, "team_a") {
			<-stall
		}
		return http.StatusOK, empty
	})
	m := metrics.New()
	guard, err := promclient.NewGuard("main", promclient.GuardConfig{MaxWaiting: 8, BreakerFailures: 1, WaitGrace: 20 * time.Millisecond}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := promclient.New(promclient.Config{Backend: "main", Address: fake.URL, HTTPClient: &http.Client{}, Metrics: m, Guard: guard, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	teamA, teamB := promclient.WithTenant(ctx, "team-a"), promclient.WithTenant(ctx, "team-b")

	// A team's timeout (one failure marks this backend down) is its own.
	if _, err := c.WithTimeout(50*time.Millisecond).QuerySamples(teamA, "team_a_slow", time.Time{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("team query held past its timeout: %v, want a timeout", err)
	}
	if !guard.Status().Up {
		t.Fatalf("a team's timeout marked the backend down for everybody: %s", guard.Status())
	}
	if _, err := c.QuerySamples(ctx, "up", time.Time{}); err != nil {
		t.Errorf("the cluster's query after a team's timeout: %v", err)
	}

	// A team's waiting requests: 2 (8/4) wait, the third is refused, and
	// the other team and the cluster are served.
	calls := fake.Calls(promtest.Query)
	done := make(chan error, 2)
	for _, q := range []string{"team_a_1", "team_a_2"} {
		go func() {
			_, err := c.QuerySamples(teamA, q, time.Time{})
			done <- err
		}()
	}
	promclient.WaitFor(t, func() bool { return fake.Calls(promtest.Query) == calls+2 })
	_, err = c.QuerySamples(teamA, "team_a_3", time.Time{})
	var waiting *promclient.TooManyWaitingError
	if !errors.As(err, &waiting) || !promclient.IsUnavailable(err) || waiting.Namespace != "team-a" || waiting.Limit != 2 ||
		!strings.Contains(err.Error(), `namespace "team-a"`) {
		t.Errorf("team-a's third waiting request: %v, want a *TooManyWaitingError of namespace team-a, limit 2", err)
	}
	for name, qctx := range map[string]context.Context{"team-b": teamB, "the cluster": ctx} {
		if _, err := c.QuerySamples(qctx, "up + 1", time.Time{}); err != nil {
			t.Errorf("%s's query while team-a's wait: %v", name, err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("a stalled team-a request returned: %v", err)
	default:
	}
}
