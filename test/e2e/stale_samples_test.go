//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// staleLookback is the test Prometheus' --query.lookback-delta: short, so
// that the series' disappearance without a maximum sample age is seen
// quickly (5m by default).
const staleLookback = 40 * time.Second

// staleMaxAge is the maxSampleAge of the rule that has one.
const staleMaxAge = 10 * time.Second

// TestStaleSamplesMaxAge: a series remote-written to Prometheus (no
// staleness markers when the writer stops) is served by two
// externalQueries entries, one with maxSampleAge: 10s. When the writer
// stops, the external metrics API stops returning the first within about
// 10s (the rule's age, sent as lookback_delta), the second only after
// Prometheus' lookback (as without promscaler's setting: issue 31). On
// Debian's Prometheus 2.42, which predates lookback_delta (2.43) and
// stamps instant results with the evaluation time, both last the lookback:
// the adapter cannot see the age there.
func TestStaleSamplesMaxAge(t *testing.T) {
	env := framework.New(t, framework.Config{})
	requireAdapter(t, env)
	t.Run("prometheus 3.x", func(t *testing.T) { staleSamples(t, env, env.Tool("prometheus"), true) })
	t.Run("prometheus 2.42 (Debian)", func(t *testing.T) {
		if _, err := os.Stat(debianPrometheus); err != nil {
			t.Skipf("Debian's Prometheus is not installed (%v): hack/install-deps.sh installs it", err)
		}
		staleSamples(t, env, debianPrometheus, false)
	})
}

func staleSamples(t *testing.T, env *framework.Env, bin string, lookbackDelta bool) {
	ctx := ctxFor(t, 3*time.Minute)
	must := fatalOn(t)
	prom := env.MustStartPrometheus(t, framework.PrometheusConfig{Binary: bin,
		ExtraArgs: []string{"--web.enable-remote-write-receiver", "--query.lookback-delta=" + staleLookback.String()},
	})
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	must(os.WriteFile(rules, []byte(`externalQueries:
- name: rw_fresh
  query: 'sum(rw_queue_depth{<<.LabelMatchers>>})'
  maxSampleAge: `+staleMaxAge.String()+`
- name: rw_default
  query: 'sum(rw_queue_depth{<<.LabelMatchers>>})'
`), 0o644))

	writeCtx, stopWriting := context.WithCancel(ctx)
	written := make(chan time.Time, 1)
	go func() { written <- remoteWriteEvery(writeCtx, t, prom.URL+"/api/v1/write", time.Second) }()
	_, err := prom.WaitForQuery(ctx, `rw_queue_depth == 7`, 1, time.Minute)
	must(err)
	adapter := env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: rules, PrometheusURL: prom.URL})
	defer adapter.Process.Stop(5 * time.Second)
	value := func(metric string) (map[string]string, error) {
		return externalValues(getAnswer(ctx, env, emV1beta1+"/namespaces/default/"+metric), metric)
	}
	for _, m := range []string{"rw_fresh", "rw_default"} {
		eventually(t, ctx, time.Minute, m+" served while written", func(context.Context) error {
			got, err := value(m)
			if err != nil {
				return err
			}
			return diffValues(map[string]string{"": "7"}, got)
		})
	}

	stopWriting()
	last := <-written
	gone := func(metric string, within time.Duration) time.Duration {
		t.Helper()
		for {
			got, err := value(metric)
			if err == nil && len(got) == 0 {
				return time.Since(last)
			}
			if time.Since(last) > within {
				t.Fatalf("%s still answered %v (err %v) %s after the last sample", metric, got, err, time.Since(last).Round(time.Second))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	freshWithin := staleMaxAge + 5*time.Second
	if !lookbackDelta {
		freshWithin = staleLookback + 10*time.Second
	}
	fresh := gone("rw_fresh", freshWithin)
	if !lookbackDelta && fresh < staleLookback-time.Second {
		t.Errorf("rw_fresh gone %s after the last sample on a Prometheus without lookback_delta, before its lookback %s: the doc says it is not", fresh.Round(time.Second), staleLookback)
	}
	if got, err := value("rw_default"); lookbackDelta && (err != nil || len(got) != 1) {
		t.Errorf("rw_default (no maxSampleAge) gone %s after the last sample, before Prometheus' lookback %s: %v %v", fresh.Round(time.Second), staleLookback, got, err)
	}
	def := gone("rw_default", staleLookback+10*time.Second)
	if def < staleLookback-time.Second {
		t.Errorf("rw_default gone %s after the last sample, before the lookback %s", def.Round(time.Second), staleLookback)
	}
	t.Logf("%s: after the last remote-written sample, rw_fresh (maxSampleAge %s) gone in %s, rw_default (lookback %s) in %s",
		bin, staleMaxAge, fresh.Round(100*time.Millisecond), staleLookback, def.Round(100*time.Millisecond))
}

// remoteWriteEvery remote-writes rw_queue_depth{queue="a"} = 7, stamped
// now, every interval until ctx ends, and returns the last sample's time.
func remoteWriteEvery(ctx context.Context, t *testing.T, url string, interval time.Duration) time.Time {
	var last time.Time
	for {
		now := time.Now()
		if err := remoteWrite(ctx, url, now); err != nil {
			if ctx.Err() != nil {
				return last
			}
			t.Errorf("remote write: %v", err)
			return last
		}
		last = now
		select {
		case <-ctx.Done():
			return last
		case <-time.After(interval):
		}
	}
}

// remoteWrite sends one sample with the remote write 1.0 protocol: a
// prompb.WriteRequest, snappy-compressed.
func remoteWrite(ctx context.Context, url string, ts time.Time) error {
	req := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "rw_queue_depth"}, {Name: "queue", Value: "a"}},
		Samples: []prompb.Sample{{Value: 7, Timestamp: ts.UnixMilli()}},
	}}}
	data, err := req.Marshal()
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(snappy.Encode(nil, data)))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}
