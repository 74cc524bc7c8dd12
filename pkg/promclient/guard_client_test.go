package promclient_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
