//go:build e2eengines

package engines

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/promscaler/promscaler/pkg/resourcemetrics/resourcetest"
	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// ns is the namespace of the suite's pods and requests.
const ns = "eng"

// maxAge is the maxSampleAge of rw_fresh.
const maxAge = 10 * time.Second

// suiteRules: a custom metric of pods, an external rule, external queries
// (one sums a metric every replica of Thanos holds, one has a maximum
// sample age) and prometheus-adapter's cAdvisor resource rules. The
// externalQueries list is last: an engine appends its own entries.
var suiteRules = resourcetest.CAdvisorRules("10s") + `
rules:
- seriesQuery: 'eng_queue_depth{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: 'eng_jobs_waiting{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
externalQueries:
- name: eng_jobs_total
  query: 'sum(eng_jobs_waiting)'
- name: rw_fresh
  query: 'sum(rw_queue_depth{<<.LabelMatchers>>})'
  maxSampleAge: ` + maxAge.String() + `
- name: rw_default
  query: 'sum(rw_queue_depth{<<.LabelMatchers>>})'
`

// data is what one exporter serves: the queue depth of pods p-0 and p-1,
// jobs waiting per queue, and cAdvisor series of one container per pod.
type data struct {
	depth  [2]float64
	jobs   map[string]float64
	cores  [2]float64
	memory [2]float64
}

var (
	dataA = data{depth: [2]float64{3, 5}, jobs: map[string]float64{"orders": 12, "billing": 4},
		cores: [2]float64{0.25, 0.5}, memory: [2]float64{64 << 20, 32 << 20}}
	// dataB is the second Cortex tenant's: the same series, other values.
	dataB = data{depth: [2]float64{30, 50}, jobs: map[string]float64{"orders": 120},
		cores: [2]float64{2, 3}, memory: [2]float64{1 << 30, 1 << 30}}
)

func (d data) serve(t *testing.T, x *exporter.Exporter) {
	t.Helper()
	var errs []error
	for i, pod := range pods {
		l := map[string]string{"namespace": ns, "pod": pod}
		errs = append(errs, x.Set(exporter.Series{Name: "eng_queue_depth", Labels: l, Value: d.depth[i]}))
		c := map[string]string{"namespace": ns, "pod": pod, "container": "app"}
		errs = append(errs, x.SetCounterRate("container_cpu_usage_seconds_total", c, d.cores[i]),
			x.Set(exporter.Series{Name: "container_memory_working_set_bytes", Labels: c, Value: d.memory[i]}))
	}
	for q, v := range d.jobs {
		errs = append(errs, x.Set(exporter.Series{Name: "eng_jobs_waiting", Labels: map[string]string{"queue": q}, Value: v}))
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

var pods = []string{"p-0", "p-1"}

// wantCustom, wantExternal, wantTotal: the values the adapter must serve for d.
func (d data) wantCustom() map[string]string {
	return map[string]string{"p-0": fmtValue(d.depth[0]), "p-1": fmtValue(d.depth[1])}
}

func (d data) wantExternal() map[string]string {
	out := map[string]string{}
	for q, v := range d.jobs {
		out["queue="+q] = fmtValue(v)
	}
	return out
}

func (d data) wantTotal() map[string]string {
	var sum float64
	for _, v := range d.jobs {
		sum += v
	}
	return map[string]string{"": fmtValue(sum)}
}

func fmtValue(v float64) string { return fmt.Sprintf("%g", v) }

// startEnv starts the control plane with the suite's pods (Running and
// Ready, in namespace eng) and an exporter serving d.
func startEnv(t *testing.T, d data) (*framework.Env, *exporter.Exporter, string) {
	t.Helper()
	env := framework.New(t, framework.Config{})
	if _, err := exec.LookPath(env.Bin("adapter")); err != nil {
		t.Fatalf("adapter binary: %v (run `make build`)", err)
	}
	ctx := ctxFor(t, 2*time.Minute)
	if err := env.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CreateReadyPods(ctx, ns, map[string]string{"app": ns}, time.Minute, time.Minute, pods...); err != nil {
		t.Fatal(err)
	}
	x, addr := serveExporter(t)
	d.serve(t, x)
	return env, x, addr
}

// adapterArgs are the flags pointing the adapter at e (besides
// --prometheus-url).
func (e *engine) adapterArgs(t *testing.T) []string {
	var args []string
	for k, v := range e.headers {
		args = append(args, "--prometheus-header="+k+"="+v)
	}
	if e.backends != "" {
		args = append(args, "--backends-config="+writeFile(t, "backends.yaml", e.backends))
	}
	return args
}

// startAdapter starts the adapter against e with the discovery strategy.
func startAdapter(t *testing.T, env *framework.Env, e *engine, rules, strategy string) *framework.Adapter {
	t.Helper()
	a := env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: rules, PrometheusURL: e.url, ResourceMetrics: true,
		ExtraArgs: append(e.adapterArgs(t), "--discovery-strategy="+strategy)})
	t.Cleanup(a.Stop)
	return a
}

// runSuite runs every check against e, whose data is d.
func runSuite(t *testing.T, env *framework.Env, e *engine, d data) string {
	rules := writeFile(t, "rules.yaml", suiteRules+e.extraRules)
	for _, strategy := range []string{"labels", "grouped", "series"} {
		t.Run("discovery "+strategy, func(t *testing.T) {
			t0 := time.Now()
			a := startAdapter(t, env, e, rules, strategy)
			checkServed(t, env, d)
			fallbacks := logLines(a.Process, "not supported by the backend")
			t.Logf("%s, strategy %s: served in %s; fallbacks logged: %d %q", e.name, strategy, time.Since(t0).Round(time.Millisecond), len(fallbacks), fallbacks)
			a.Stop()
		})
	}
	t.Run("explain", func(t *testing.T) { checkExplain(t, env, e, rules, d) })
	t.Run("max sample age", func(t *testing.T) { checkMaxSampleAge(t, env, e, rules) })
	return rules
}

// checkServed: the discovered metrics are listed, and the custom,
// external and resource metrics APIs answer d's values.
func checkServed(t *testing.T, env *framework.Env, d data) {
	ctx := ctxFor(t, 3*time.Minute)
	eventually(t, ctx, time.Minute, "discovered metrics listed", func(ctx context.Context) error {
		custom, err := listed(ctx, env, cmV1beta2)
		if err != nil {
			return err
		}
		external, err := listed(ctx, env, emV1beta1)
		if err != nil {
			return err
		}
		if !slices.Contains(custom, "pods/eng_queue_depth") || !slices.Contains(external, "eng_jobs_waiting") {
			return fmt.Errorf("custom %q, external %q", custom, external)
		}
		return nil
	})
	eventually(t, ctx, time.Minute, "custom metric values", func(ctx context.Context) error {
		got, err := customValues(ctx, env, ns, "eng_queue_depth", "app="+ns)
		if err != nil {
			return err
		}
		return diffValues(d.wantCustom(), got)
	})
	eventually(t, ctx, time.Minute, "external metric values", func(ctx context.Context) error {
		got, err := externalValues(ctx, env, ns, "eng_jobs_waiting")
		if err != nil {
			return err
		}
		return diffValues(d.wantExternal(), got)
	})
	eventually(t, ctx, time.Minute, "external query values", func(ctx context.Context) error {
		got, err := externalValues(ctx, env, ns, "eng_jobs_total")
		if err != nil {
			return err
		}
		return diffValues(d.wantTotal(), got)
	})
	eventually(t, ctx, time.Minute, "resource metrics", func(ctx context.Context) error {
		return checkPodMetrics(ctx, env, d)
	})
}

// checkPodMetrics: metrics.k8s.io answers each pod's container usage: the
// memory exactly, the CPU within 10 % of the exporter's rate (rate() over
// a 10 s window of 1 s scrapes).
func checkPodMetrics(ctx context.Context, env *framework.Env, d data) error {
	for i, pod := range pods {
		pm, err := decodeAnswer[metricsv1beta1.PodMetrics](getAnswer(ctx, env, rmV1beta1+"/namespaces/"+ns+"/pods/"+pod))
		if err != nil {
			return err
		}
		if len(pm.Containers) != 1 || pm.Containers[0].Name != "app" {
			return fmt.Errorf("%s: containers %+v, want app", pod, pm.Containers)
		}
		u := pm.Containers[0].Usage
		cpu, mem := u.Cpu().AsApproximateFloat64(), u.Memory().Value()
		if math.Abs(cpu-d.cores[i]) > 0.1*d.cores[i] || mem != int64(d.memory[i]) {
			return fmt.Errorf("%s: cpu %v memory %d, want cpu %v memory %d", pod, cpu, mem, d.cores[i], int64(d.memory[i]))
		}
	}
	return nil
}

// checkExplain runs `adapter explain --run` against e for the custom and
// the external metric and finds d's values in its output.
func checkExplain(t *testing.T, env *framework.Env, e *engine, rules string, d data) {
	ctx := ctxFor(t, 2*time.Minute)
	base := []string{"explain", "--config=" + rules, "--prometheus-url=" + e.url, "--namespace=" + ns, "--run"}
	for k, v := range e.headers {
		base = append(base, "--prometheus-header="+k+"="+v)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--metric=eng_queue_depth", "--resource=pods", "--names=p-0,p-1"},
			[]string{fmt.Sprintf("pod=\"p-0\"\t%s\t@", fmtValue(d.depth[0])), fmt.Sprintf("pod=\"p-1\"\t%s\t@", fmtValue(d.depth[1]))}},
		{[]string{"--metric=eng_jobs_waiting", "--external"},
			[]string{fmt.Sprintf("{queue=\"orders\"}\t%s\t@", fmtValue(d.jobs["orders"]))}},
	} {
		args := append(slices.Clone(base), tc.args...)
		cmd := exec.CommandContext(ctx, env.Bin("adapter"), args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("adapter %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("adapter %s: stdout lacks %q:\n%s\nstderr:\n%s", strings.Join(args, " "), w, stdout.String(), stderr.String())
			}
		}
		t.Logf("adapter explain %s:\n%s", strings.Join(tc.args, " "), stdout.String())
	}
}
