//go:build e2eengines

package engines

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// checkMaxSampleAge: rw_queue_depth is remote-written to e every second
// (no staleness markers when the writer stops), served by rw_fresh
// (maxSampleAge 10s) and rw_default (none). After the writer stops,
// rw_fresh must be gone within the age (plus 5 s of polling and
// engine latency) when the engine honours the adapter's parameter, and
// rw_default only after the engine's lookback.
func checkMaxSampleAge(t *testing.T, env *framework.Env, e *engine, rules string) {
	ctx := ctxFor(t, 4*time.Minute)
	writeCtx, stopWriting := context.WithCancel(ctx)
	defer stopWriting()
	written := make(chan time.Time, 1)
	go func() { written <- remoteWriteEvery(writeCtx, t, e.push, time.Second) }()
	startAdapter(t, env, e, rules, "labels")
	value := func(metric string) (map[string]string, error) { return externalValues(ctx, env, ns, metric) }
	for _, m := range []string{"rw_fresh", "rw_default"} {
		eventually(t, ctx, 2*time.Minute, m+" served while written", func(context.Context) error {
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
				t.Fatalf("%s: %s still answered %v (err %v) %s after the last sample", e.name, metric, got, err, time.Since(last).Round(time.Second))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	freshWithin := maxAge + 5*time.Second
	if e.ageParam == "" {
		freshWithin = lookback + 10*time.Second
	}
	fresh := gone("rw_fresh", freshWithin)
	if got, err := value("rw_default"); e.ageParam != "" && (err != nil || len(got) != 1) {
		t.Errorf("%s: rw_default (no maxSampleAge) gone %s after the last sample, before the lookback %s: %v %v", e.name, fresh.Round(time.Second), lookback, got, err)
	}
	def := gone("rw_default", lookback+10*time.Second)
	if def < lookback-2*time.Second {
		t.Errorf("%s: rw_default gone %s after the last sample, before the lookback %s", e.name, def.Round(time.Second), lookback)
	}
	honoured := "honoured as " + e.ageParam
	if e.ageParam == "" {
		honoured = "not honoured by the engine"
		if fresh < lookback-2*time.Second {
			t.Errorf("%s: rw_fresh gone %s after the last sample, before the lookback %s, on an engine said to ignore the age", e.name, fresh.Round(time.Second), lookback)
		}
	}
	t.Logf("%s: after the last remote-written sample, rw_fresh (maxSampleAge %s, %s) gone in %s, rw_default (lookback %s) in %s",
		e.name, maxAge, honoured, fresh.Round(100*time.Millisecond), lookback, def.Round(100*time.Millisecond))
}

// remoteWriteEvery remote-writes rw_queue_depth{queue="a"} = 7, stamped
// now, to every target every interval until ctx ends, and returns the last
// sample's time.
func remoteWriteEvery(ctx context.Context, t *testing.T, targets []pushTarget, interval time.Duration) time.Time {
	var last time.Time
	for {
		now := time.Now()
		for _, tg := range targets {
			if err := remoteWrite(ctx, tg, now); err != nil {
				if ctx.Err() == nil {
					t.Errorf("remote write to %s: %v", tg.url, err)
				}
				return last
			}
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
func remoteWrite(ctx context.Context, tg pushTarget, ts time.Time) error {
	req := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "rw_queue_depth"}, {Name: "queue", Value: "a"}},
		Samples: []prompb.Sample{{Value: 7, Timestamp: ts.UnixMilli()}},
	}}}
	data, err := req.Marshal()
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.url, bytes.NewReader(snappy.Encode(nil, data)))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	for k, v := range tg.headers {
		hr.Header.Set(k, v)
	}
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
