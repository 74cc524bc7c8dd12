//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// TestRulesAsPrometheusAdapter checks, through the aggregator against a
// real Prometheus, the rule behaviours prometheus-adapter users rely on
// (issue 19 item 0) and the reload guard of issue 21:
//   - two rules producing the same metric: the last one is served, and the
//     conflict is logged naming both rules;
//   - .LabelValuesByName holds the raw value, so an equality matcher finds
//     a deployment named api.v2;
//   - a reload whose metricsQuery Prometheus would reject is not swapped
//     in: the rule in service keeps answering; a good reload then is.
func TestRulesAsPrometheusAdapter(t *testing.T) {
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	ctx := ctxFor(t, 4*time.Minute)
	must := fatalOn(t)
	must(x.Set(exporter.Series{Name: "rc_dup", Labels: map[string]string{"job_name": "a"}, Value: 2}))
	must(x.Set(exporter.Series{Name: "rc_requests", Labels: map[string]string{"deployment": "api.v2"}, Value: 7}))
	must(x.Set(exporter.Series{Name: "rc_requests", Labels: map[string]string{"deployment": "apixv2"}, Value: 100}))
	_, err := prom.WaitForQuery(ctx, `count(rc_dup) + count(rc_requests) == 3`, 1, time.Minute)
	must(err)

	// The adapter reads a copy, which the test edits to reload it.
	configPath := filepath.Join(t.TempDir(), "config.yaml")
	original, err := os.ReadFile(testdata("rules-compat-config.yaml"))
	must(err)
	must(os.WriteFile(configPath, original, 0o644))
	a := env.MustStartAdapter(t, framework.AdapterConfig{
		ConfigFile: configPath, PrometheusURL: prom.URL,
		ExtraArgs: []string{"--config-reload-interval=1s"},
	})
	must(env.EnsureNamespace(ctx, "rc"))
	value := func(ctx context.Context, metric, selector string) (map[string]string, error) {
		path := emV1beta1 + "/namespaces/rc/" + metric
		if selector != "" {
			path += sel(selector)
		}
		return externalValues(getAnswer(ctx, env, path), metric)
	}
	wantValue := func(metric, selector, want string) func(context.Context) error {
		return func(ctx context.Context) error {
			got, err := value(ctx, metric, selector)
			if err != nil {
				return err
			}
			// sum() without by: one item without labels.
			return diffValues(map[string]string{"": want}, got)
		}
	}

	t.Run("last rule wins", func(t *testing.T) {
		eventually(t, ctx, time.Minute, "rc_dup from externalRules[1]", wantValue("rc_dup", "", "20"))
		log := a.Process.Tail(2000)
		if !strings.Contains(log, "Metric produced by more than one rule") || !strings.Contains(log, `externalRules[1] (series \"rc_dup\")`) || !strings.Contains(log, `externalRules[0] (series \"rc_dup\")`) {
			t.Errorf("the adapter's log does not report the conflict naming both rules:\n%s", grepLines(log, "rc_dup"))
		}
	})

	t.Run("label values by name are raw", func(t *testing.T) {
		eventually(t, ctx, time.Minute, "rc_requests for deployment api.v2", wantValue("rc_requests", "deployment=api.v2", "7"))
	})

	t.Run("reload keeps a rule whose new query Prometheus rejects", func(t *testing.T) {
		bad := strings.Replace(string(original), "'sum(<<.Series>>{<<.LabelMatchers>>}) * 10'", "'sum(<<.Series>>{<<.LabelMatchers>>) * 1000'", 1)
		if bad == string(original) {
			t.Fatal("the test's edit did not change the configuration")
		}
		must(os.WriteFile(configPath, []byte(bad), 0o644))
		eventually(t, ctx, 30*time.Second, "the reload to be refused", func(context.Context) error {
			if log := a.Process.Tail(2000); !strings.Contains(log, "Configuration reload failed") || !strings.Contains(log, "Prometheus would reject") {
				return fmt.Errorf("no refused reload in the log yet")
			}
			return nil
		})
		// Still the rule in service, on every request for a while.
		deadline := time.Now().Add(5 * time.Second)
		for n := 0; time.Now().Before(deadline); n++ {
			if err := wantValue("rc_dup", "", "20")(ctx); err != nil {
				t.Fatalf("request %d after the refused reload: %v", n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// A good version is applied: the refusal was not a stuck watcher.
		good := strings.Replace(string(original), "* 10'", "* 100'", 1)
		must(os.WriteFile(configPath, []byte(good), 0o644))
		eventually(t, ctx, time.Minute, "the good reload", wantValue("rc_dup", "", "200"))
	})
}
