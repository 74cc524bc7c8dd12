//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// freshRate is how fast the fresh_* counters grow per second: a counter's
// first scraped value, divided by it, is how long after the test created
// the series Prometheus first scraped it.
const freshRate = 1000.0

// TestFreshMetrics (issue 22 item 4): with default flags (relist every
// minute), series that appear in Prometheus while the adapter runs are
// served before the next relist could have run:
//   - a new metric name, listed by `kubectl get --raw
//     /apis/custom.metrics.k8s.io/v1beta1` without any request naming it;
//   - a new metric name, asked for by name (an HPA's request);
//   - a known metric in a namespace that had none of its series.
//
// The first relist tick comes a minute after the adapter's discovery loop
// started, so no earlier than a minute after the adapter process started:
// what is served before then was served by the refresh paths, not by a
// relist. How long after its first scrape each series was served is
// logged (the figure: within 5 s); the test asserts only the
// bound of the next relist.
func TestFreshMetrics(t *testing.T) {
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	ctx := ctxFor(t, 4*time.Minute)
	must := fatalOn(t)
	created := map[string]time.Time{}
	add := func(name, ns string) {
		t.Helper()
		created[name+"/"+ns] = time.Now()
		must(x.Set(exporter.Series{Name: name, Type: exporter.Counter, Rate: freshRate,
			Labels: map[string]string{"namespace": ns, "pod": "p1"}}))
	}
	// firstScrape is when Prometheus first scraped the series.
	firstScrape := func(name, ns string) time.Time {
		t.Helper()
		s, err := prom.WaitForQuery(ctx, fmt.Sprintf(`min_over_time(%s{namespace=%q}[10m])`, name, ns), 1, 30*time.Second)
		must(err)
		return created[name+"/"+ns].Add(time.Duration(s[0].Value / freshRate * float64(time.Second)))
	}
	served := func(name, ns string) func(context.Context) error {
		return func(ctx context.Context) error {
			a := getAnswer(ctx, env, cmV1beta1+"/namespaces/"+ns+"/pods/p1/"+name)
			got, err := customValuesV1beta1(a, name, objectRef{Kind: "Pod", APIVersion: "v1", Namespace: ns})
			if err != nil {
				return err
			}
			if len(got) != 1 {
				return fmt.Errorf("want a value for pod p1, got %v", got)
			}
			return nil
		}
	}
	listed := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			body, err := getRaw(ctx, env, cmV1beta1)
			if err != nil {
				return err
			}
			names, err := resourceNames(body)
			if err != nil {
				return err
			}
			if !slices.Contains(names, "pods/"+name) {
				return fmt.Errorf("pods/%s not in %v", name, names)
			}
			return nil
		}
	}

	add("fresh_known", "fresh-a")
	_, err := prom.WaitForQuery(ctx, `fresh_known`, 1, time.Minute)
	must(err)
	started := time.Now()
	env.MustStartAdapter(t, framework.AdapterConfig{
		ConfigFile: testdata("fresh-config.yaml"), PrometheusURL: prom.URL,
		RelistInterval: time.Minute, // the adapter's default (the framework's is 2 s)
	})
	eventually(t, ctx, time.Minute, "fresh_known served in fresh-a", served("fresh_known", "fresh-a"))
	nextRelist := started.Add(time.Minute)
	if left := time.Until(nextRelist); left < 20*time.Second {
		t.Skipf("the adapter took %s to serve its first metric: %s left before its first relist could run, too little to tell a refresh from a relist",
			time.Since(started).Round(time.Second), left.Round(time.Second))
	}
	t.Logf("adapter serving %s after start; the first relist runs no earlier than %s from now",
		time.Since(started).Round(100*time.Millisecond), time.Until(nextRelist).Round(100*time.Millisecond))

	// before polls each check every 250 ms until it holds or the next
	// relist could have run, and returns when each first held.
	before := func(checks map[string]func(context.Context) error) map[string]time.Time {
		t.Helper()
		at := map[string]time.Time{}
		for len(at) < len(checks) {
			for what, check := range checks {
				if _, ok := at[what]; ok {
					continue
				}
				err := check(ctx)
				if err == nil {
					at[what] = time.Now()
					continue
				}
				if time.Now().After(nextRelist) || ctx.Err() != nil {
					t.Fatalf("%s: not before the next relist: %v", what, err)
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
		return at
	}
	report := func(what string, at, first time.Time) {
		t.Logf("%s %.1f s after its first scrape", what, at.Sub(first).Seconds())
	}

	// Listing alone (no request names the metric) shows a new name.
	add("fresh_listed", "fresh-a")
	at := before(map[string]func(context.Context) error{"fresh_listed listed": listed("fresh_listed")})
	report("new metric name listed", at["fresh_listed listed"], firstScrape("fresh_listed", "fresh-a"))

	// An HPA-style request names a new metric, and a known metric in a
	// new namespace.
	add("fresh_new", "fresh-a")
	add("fresh_known", "fresh-b")
	at = before(map[string]func(context.Context) error{
		"fresh_new served":              served("fresh_new", "fresh-a"),
		"fresh_known served in fresh-b": served("fresh_known", "fresh-b"),
	})
	report("new metric name served", at["fresh_new served"], firstScrape("fresh_new", "fresh-a"))
	report("known metric in a new namespace served", at["fresh_known served in fresh-b"], firstScrape("fresh_known", "fresh-b"))
}
