// Package monitoring holds the tests of deploy/monitoring: the alerting
// rules pass promtool's checks and unit tests, and every metric the alerts
// and the Grafana dashboard query is one the adapter exports.
package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"sigs.k8s.io/yaml"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/version"
)

type prometheusRule struct {
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func readRule(t *testing.T) (prometheusRule, []byte) {
	t.Helper()
	data, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatalf("prometheusrule.yaml: %v", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	spec, err := yaml.Marshal(raw["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return pr, spec
}

// TestAlertRules runs `promtool check rules` on the PrometheusRule's groups
// and `promtool test rules` on alerts_test.yaml.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool: %v (hack/install-deps.sh installs Debian's prometheus, which ships it)", err)
	}
	_, spec := readRule(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// exportedNames lists the metric names the adapter's /metrics can hold:
// its own collectors, the build info, and the Go and process collectors the
// API server library registers; histograms also as _bucket, _sum, _count.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	var cs []prometheus.Collector
	m := reflect.ValueOf(metrics.New()).Elem()
	for i := range m.NumField() {
		if c, ok := m.Field(i).Interface().(prometheus.Collector); ok && m.Type().Field(i).Name != "Registry" {
			cs = append(cs, c)
		}
	}
	cs = append(cs, version.NewCollector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	names := map[string]bool{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			mm := fqName.FindStringSubmatch(d.String())
			if mm == nil {
				t.Fatalf("no fqName in %s", d)
			}
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				names[mm[1]+suffix] = true
			}
		}
	}
	if len(names) < 40 {
		t.Fatalf("found only %d metric names: %v", len(names), names)
	}
	return names
}

// metricRef finds metric names in PromQL: the adapter's, the Go and
// process collectors', and the aggregator's.
var metricRef = regexp.MustCompile(`\b(?:promscaler|process|go|aggregator)_[a-zA-Z0-9_]+`)

// others are metrics other components export that the rules may read.
var others = map[string]bool{"aggregator_unavailable_apiservice": true}

func checkExprs(t *testing.T, where string, exprs []string, names map[string]bool) {
	t.Helper()
	for _, e := range exprs {
		refs := metricRef.FindAllString(e, -1)
		if len(refs) == 0 {
			t.Errorf("%s: %q reads no known metric", where, e)
		}
		for _, r := range refs {
			if !names[r] && !others[r] {
				t.Errorf("%s: %q reads %s, which the adapter does not export", where, e, r)
			}
		}
	}
}

func TestAlertMetricsExist(t *testing.T) {
	names := exportedNames(t)
	pr, _ := readRule(t)
	var n int
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			checkExprs(t, "alert "+r.Alert, []string{r.Expr}, names)
			n++
		}
	}
	if n < 6 {
		t.Errorf("found %d alerts, want at least 6", n)
	}
}

// TestDashboard checks dashboard.json is a Grafana dashboard whose every
// panel queries metrics the adapter exports.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if dash.UID == "" || len(dash.Panels) < 8 {
		t.Fatalf("dashboard.json: uid %q, %d panels", dash.UID, len(dash.Panels))
	}
	names := exportedNames(t)
	var used []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkExprs(t, "panel "+p.Title, []string{tg.Expr}, names)
			used = append(used, metricRef.FindAllString(tg.Expr, -1)...)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && strings.HasPrefix(q, "label_values(") {
			checkExprs(t, "variable "+v.Name, []string{q}, names)
		}
	}
	// Every family of the adapter's own metrics has a panel.
	for _, family := range []string{"promscaler_api_", "promscaler_prometheus_", "promscaler_discovery_", "promscaler_config_"} {
		if !slices.ContainsFunc(used, func(s string) bool { return strings.HasPrefix(s, family) }) {
			t.Errorf("no panel shows %s* metrics", family)
		}
	}
}

// TestChartAlertsSame checks the chart's copy of the alert groups
// (charts/promscaler/files/alert-groups.yaml) is this PrometheusRule's.
func TestChartAlertsSame(t *testing.T) {
	_, spec := readRule(t)
	chart, err := os.ReadFile(filepath.Join("..", "..", "charts", "promscaler", "files", "alert-groups.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	if err := yaml.Unmarshal(spec, &want); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(chart, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("charts/promscaler/files/alert-groups.yaml differs from deploy/monitoring/prometheusrule.yaml's groups (-rule +chart); copy them over:\n%s", diff)
	}
}
