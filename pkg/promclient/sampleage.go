package promclient

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// maxSampleAgeKey carries a call's maximum sample age (WithMaxSampleAge).
type maxSampleAgeKey struct{}

// WithMaxSampleAge returns ctx carrying a maximum sample age for the
// instant queries sent with it (a rule's maxSampleAge): it replaces the
// backend's own (Backend.MaxSampleAge). Zero leaves the backend's.
func WithMaxSampleAge(ctx context.Context, age time.Duration) context.Context {
	if age <= 0 {
		return ctx
	}
	return context.WithValue(ctx, maxSampleAgeKey{}, age)
}

// maxSampleAge is the maximum sample age in force for a call: the one ctx
// carries, else the backend's; 0 is off.
func (c *Client) maxSampleAge(ctx context.Context) time.Duration {
	if age, ok := ctx.Value(maxSampleAgeKey{}).(time.Duration); ok {
		return age
	}
	return c.sampleAge
}

// MaxSampleAge returns the backend's maximum sample age (0: off).
func (c *Client) MaxSampleAge() time.Duration { return c.sampleAge }

// setLookbackDelta asks the server to look back at most age for the latest
// sample of each series: Prometheus' lookback_delta (since 2.43) and
// VictoriaMetrics' max_lookback (which ignores lookback_delta); a server
// ignores the one it does not know.
func setLookbackDelta(args url.Values, age time.Duration) {
	if age > 0 {
		args.Set("lookback_delta", strconv.FormatFloat(age.Seconds(), 'f', -1, 64))
		args.Set("max_lookback", strconv.FormatInt(age.Milliseconds(), 10)+"ms")
	}
}

// dropOlder returns the samples whose timestamp is not older than age
// before eval, and how many it dropped. It shares smps' backing array
// when none is dropped; otherwise it copies (answers are shared).
// Prometheus stamps an instant query's samples with the evaluation time,
// so this catches only servers that answer older timestamps; the
// lookback_delta sent with the query is what bounds a Prometheus'.
func dropOlder(smps Samples, eval time.Time, age time.Duration) (Samples, int) {
	if age <= 0 || len(smps) == 0 {
		return smps, 0
	}
	oldest := eval.Add(-age).UnixMilli()
	n := 0
	for _, s := range smps {
		if int64(s.Timestamp) < oldest {
			n++
		}
	}
	if n == 0 {
		return smps, 0
	}
	out := make(Samples, 0, len(smps)-n)
	for _, s := range smps {
		if int64(s.Timestamp) >= oldest {
			out = append(out, s)
		}
	}
	return out, n
}

// sampleAgeKeyParts are the coalescing and cache key parts of a query
// sent with a maximum sample age: the same query with another age is
// another call.
func sampleAgeKeyParts(query string, age time.Duration) []string {
	if age <= 0 {
		return []string{query}
	}
	return []string{query, "lookback_delta=" + age.String()}
}

// dropStale drops the samples older than age before the evaluation time
// (ts, or now for a "now" query), counting them.
func (c *Client) dropStale(smps Samples, ts time.Time, age time.Duration) Samples {
	eval := ts
	if eval.IsZero() {
		eval = c.clock.Now()
	}
	out, n := dropOlder(smps, eval, age)
	if n > 0 {
		c.metrics.StaleSamplesDropped.WithLabelValues(c.backend).Add(float64(n))
	}
	return out
}
