//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// sourcesRule is a pods rule serving series name as itself, its value
// multiplied by factor.
func sourcesRule(name, factor string) string {
	return fmt.Sprintf(`- seriesQuery: '{__name__="%s",namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) * %s'
`, name, factor)
}

// TestConfigSources (issue 22 item 1): --config given twice plus a
// directory, through the aggregator against a real Prometheus:
//   - the rules of every file are served, and a metric two files produce
//     is served by the later one, the conflict logged naming both places;
//   - a file made bad at runtime is reported naming it and keeps its last
//     good rules in service, while the other files keep serving and still
//     reload on their own; once fixed it is applied.
func TestConfigSources(t *testing.T) {
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	ctx := ctxFor(t, 4*time.Minute)
	must := fatalOn(t)
	const ns = "sources"
	for name, v := range map[string]float64{"src_base": 1, "src_team": 2, "src_dup": 3} {
		must(x.Set(exporter.Series{Name: name, Labels: map[string]string{"namespace": ns, "pod": "p1"}, Value: v}))
	}
	_, err := prom.WaitForQuery(ctx, `count({__name__=~"src_.*"}) == 3`, 1, time.Minute)
	must(err)

	dir := t.TempDir()
	mainFile := filepath.Join(dir, "main.yaml")
	extraFile := filepath.Join(dir, "extra.yaml")
	rulesDir := filepath.Join(dir, "rules.d")
	teamFile := filepath.Join(rulesDir, "team.yaml")
	must(os.Mkdir(rulesDir, 0o755))
	write := func(path string, rules ...string) {
		t.Helper()
		must(os.WriteFile(path, []byte("rules:\n"+strings.Join(rules, "")), 0o644))
	}
	write(mainFile, sourcesRule("src_base", "1"))
	write(extraFile, sourcesRule("src_dup", "10"))
	teamGood := "rules:\n" + sourcesRule("src_team", "1") + sourcesRule("src_dup", "100")
	must(os.WriteFile(teamFile, []byte(teamGood), 0o644))
	a := env.MustStartAdapter(t, framework.AdapterConfig{
		ConfigFile: mainFile, PrometheusURL: prom.URL,
		ExtraArgs: []string{"--config=" + extraFile, "--config=" + rulesDir, "--config-reload-interval=1s"},
	})

	value := func(ctx context.Context, metric string) (string, error) {
		a := getAnswer(ctx, env, cmV1beta1+"/namespaces/"+ns+"/pods/p1/"+metric)
		got, err := customValuesV1beta1(a, metric, objectRef{Kind: "Pod", APIVersion: "v1", Namespace: ns})
		if err != nil {
			return "", err
		}
		if len(got) != 1 {
			return "", fmt.Errorf("want one value for pod p1, got %v", got)
		}
		return got["p1"], nil
	}
	want := func(values map[string]string) func(context.Context) error {
		return func(ctx context.Context) error {
			got := map[string]string{}
			for metric := range values {
				v, err := value(ctx, metric)
				if err != nil {
					return fmt.Errorf("%s: %w", metric, err)
				}
				got[metric] = v
			}
			return diffValues(values, got)
		}
	}
	served := map[string]string{"src_base": "1", "src_team": "2", "src_dup": "300"}

	t.Run("every file served, the later file wins a conflict", func(t *testing.T) {
		eventually(t, ctx, time.Minute, "the three files' metrics", want(served))
		var line string
		for _, l := range strings.Split(a.Process.Tail(3000), "\n") {
			if strings.Contains(l, "Metric produced by more than one rule") && strings.Contains(l, "src_dup") {
				line = l
			}
		}
		if !strings.Contains(line, "extra.yaml:rules[0]") || !strings.Contains(line, "team.yaml:rules[1]") {
			t.Errorf("the conflict is not logged naming extra.yaml:rules[0] and rules.d/team.yaml:rules[1]: %q", line)
		}
	})

	t.Run("a bad file keeps its last good rules, the others keep serving and reloading", func(t *testing.T) {
		// A YAML syntax error on line 3.
		must(os.WriteFile(teamFile, []byte("rules:\n"+sourcesRule("src_team", "1")[:40]+"\n  resources: [\n"), 0o644))
		failed := regexp.MustCompile(`Configuration reload failed.*team\.yaml`)
		eventually(t, ctx, 30*time.Second, "the bad file reported", func(context.Context) error {
			if !failed.MatchString(a.Process.Tail(3000)) {
				return fmt.Errorf("no failed reload of team.yaml in the log yet")
			}
			return nil
		})
		line := failed.FindString(a.Process.Tail(3000))
		if !regexp.MustCompile(`team\.yaml:\d+`).MatchString(a.Process.Tail(3000)) {
			t.Errorf("the failed reload does not name team.yaml with a line: %q", line)
		}
		deadline := time.Now().Add(5 * time.Second)
		for n := 0; time.Now().Before(deadline); n++ {
			if err := want(served)(ctx); err != nil {
				t.Fatalf("request %d after team.yaml went bad: %v", n, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
		// Another file still reloads on its own.
		write(mainFile, sourcesRule("src_base", "5"))
		served["src_base"] = "5"
		eventually(t, ctx, 30*time.Second, "main.yaml's reload while team.yaml is bad", want(served))
		// The fixed file is applied.
		must(os.WriteFile(teamFile, []byte(strings.Replace(teamGood, "* 100'", "* 1000'", 1)), 0o644))
		served["src_dup"] = "3000"
		eventually(t, ctx, 30*time.Second, "team.yaml fixed", want(served))
	})
}
