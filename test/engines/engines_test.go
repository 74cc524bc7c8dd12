//go:build e2eengines

package engines

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// TestVictoriaMetrics runs the suite against VictoriaMetrics single-node.
func TestVictoriaMetrics(t *testing.T) {
	env, _, addr := startEnv(t, dataA)
	vm := startVictoriaMetrics(t, env, addr)
	rules := runSuite(t, env, vm, dataA)
	t.Run("series limit", func(t *testing.T) { checkVMSeriesLimit(t, env, addr, rules) })
}

// checkVMSeriesLimit: with -search.maxSeries=1 (30,000 by default),
// VictoriaMetrics refuses /api/v1/series for a seriesQuery matching 2
// series: the series strategy discovers nothing for it (the failure is
// logged), the labels strategy (label APIs, -search.maxLabelsAPISeries)
// still serves it.
func checkVMSeriesLimit(t *testing.T, env *framework.Env, exporterAddr, rules string) {
	ctx := ctxFor(t, 3*time.Minute)
	vm := startVictoriaMetrics(t, env, exporterAddr, "-search.maxSeries=1")
	eventually(t, ctx, time.Minute, "samples in the second VictoriaMetrics", func(ctx context.Context) error {
		s, err := framework.QueryPrometheus(ctx, &http.Client{Timeout: 10 * time.Second}, vm.url, "eng_queue_depth")
		if err == nil && len(s) != 2 {
			err = fmt.Errorf("%d samples", len(s))
		}
		return err
	})
	a := startAdapter(t, env, vm, rules, "series")
	eventually(t, ctx, time.Minute, "the series strategy's failure logged", func(context.Context) error {
		if l := logLines(a.Process, "the number of matching timeseries exceeds"); len(l) == 0 {
			return fmt.Errorf("no line saying the number of matching timeseries exceeds the limit in %s", a.Process.LogFile)
		}
		return nil
	})
	if custom, err := listed(ctx, env, cmV1beta2); err != nil || slices.Contains(custom, "pods/eng_queue_depth") {
		t.Errorf("series strategy over -search.maxSeries: custom metrics listed %q (%v), want no eng_queue_depth", custom, err)
	}
	line := logLines(a.Process, "the number of matching timeseries exceeds")[0]
	t.Logf("series strategy over the limit: %.400s", line)
	a.Stop()
	startAdapter(t, env, vm, rules, "labels")
	eventually(t, ctx, time.Minute, "the labels strategy under the same limit", func(ctx context.Context) error {
		got, err := customValues(ctx, env, ns, "eng_queue_depth", "app="+ns)
		if err != nil {
			return err
		}
		return diffValues(dataA.wantCustom(), got)
	})
}

// TestCortex runs the suite against Cortex's tenant-a, then checks that
// each tenant's rules read its own data only.
func TestCortex(t *testing.T) {
	env, _, addrA := startEnv(t, dataA)
	xB, addrB := serveExporter(t)
	dataB.serve(t, xB)
	cx := startCortex(t, env, addrA, addrB)
	rules := runSuite(t, env, cx, dataA)
	t.Run("tenants", func(t *testing.T) {
		ctx := ctxFor(t, 2*time.Minute)
		startAdapter(t, env, cx, rules, "labels")
		for metric, want := range map[string]map[string]string{"eng_jobs_total": dataA.wantTotal(), "tenant_b_jobs_total": dataB.wantTotal()} {
			eventually(t, ctx, time.Minute, metric, func(ctx context.Context) error {
				got, err := externalValues(ctx, env, ns, metric)
				if err != nil {
					return err
				}
				return diffValues(want, got)
			})
		}
	})
}

// TestThanos runs the suite against a Thanos querier over two Prometheus
// replicas (the external query eng_jobs_total is the deduplicated sum:
// twice it without deduplication), then stops one sidecar: the querier
// answers partially (with warnings), the adapter serves that answer, and
// a backend asking partial_response=false gets an error instead.
func TestThanos(t *testing.T) {
	env, _, addr := startEnv(t, dataA)
	th := startThanos(t, env, addr)
	th.backends = fmt.Sprintf("backends:\n- name: thanos-strict\n  url: %s/?partial_response=false\n", th.url)
	th.extraRules = "- name: strict_jobs_total\n  query: 'sum(eng_jobs_waiting)'\n  backend: thanos-strict\n"
	rules := runSuite(t, env, &th.engine, dataA)
	t.Run("partial response", func(t *testing.T) { checkPartialResponse(t, env, th, rules) })
}

func checkPartialResponse(t *testing.T, env *framework.Env, th *thanos, rules string) {
	ctx := ctxFor(t, 3*time.Minute)
	startAdapter(t, env, &th.engine, rules, "labels")
	value := func(metric string) (map[string]string, error) { return externalValues(ctx, env, ns, metric) }
	for _, m := range []string{"eng_jobs_total", "strict_jobs_total"} {
		eventually(t, ctx, time.Minute, m+" with both replicas", func(context.Context) error {
			got, err := value(m)
			if err != nil {
				return err
			}
			return diffValues(dataA.wantTotal(), got)
		})
	}
	th.sidecars[1].Stop(5 * time.Second)
	eventually(t, ctx, time.Minute, "the querier answering with a warning", func(ctx context.Context) error {
		w, err := queryWarnings(ctx, th.url, "sum(eng_jobs_waiting)")
		if err != nil {
			return err
		}
		if len(w) == 0 {
			return fmt.Errorf("no warnings yet")
		}
		t.Logf("querier warnings with sidecar b stopped: %q", w)
		return nil
	})
	got, err := value("eng_jobs_total")
	if err == nil {
		err = diffValues(dataA.wantTotal(), got)
	}
	if err != nil {
		t.Errorf("eng_jobs_total with one replica's sidecar stopped (a partial answer, complete here: the replicas hold the same data): %v", err)
	}
	eventually(t, ctx, time.Minute, "strict_jobs_total refused", func(context.Context) error {
		got, err := value("strict_jobs_total")
		if err == nil {
			return fmt.Errorf("served %v", got)
		}
		t.Logf("strict_jobs_total (partial_response=false) with sidecar b stopped: %v", err)
		return nil
	})
}

// queryWarnings runs an instant query on a Prometheus API and returns the
// warnings of its answer.
func queryWarnings(ctx context.Context, base, query string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status   string   `json:"status"`
		Error    string   `json:"error"`
		Warnings []string `json:"warnings"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body.Error)
	}
	return body.Warnings, nil
}
