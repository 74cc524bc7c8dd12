//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/exporter"
)

// sharedDiffConfigs are the configurations whose every custom rule the
// differential test runs: the project's (deploy/base, the chart's default
// rules) and prometheus-adapter's published ones (pkg/config/testdata/valid,
// each file naming its source: the docs' config reference and walkthroughs,
// cmd/config-gen's defaults, deploy/manifests, the community chart).
func sharedDiffConfigs(t *testing.T) []string {
	t.Helper()
	files := []string{
		filepath.Join("..", "..", "deploy", "base", "config.yaml"),
		filepath.Join("..", "..", "charts", "promscaler", "rules", "default.yaml"),
	}
	valid, err := filepath.Glob(filepath.Join("..", "..", "pkg", "config", "testdata", "valid", "*.yaml"))
	if err != nil || len(valid) == 0 {
		t.Fatalf("no configuration fixtures in pkg/config/testdata/valid (%v)", err)
	}
	return append(files, valid...)
}

// setSharedDiffData fills the exporter with varied data for the rules'
// series: several series per pod (containers, verbs), one pod name in two
// namespaces, NaN gauges, an FPM ratio of 0/0, series without a pod label
// and pods that have no series (asked for by the test).
func setSharedDiffData(t *testing.T, x *exporter.Exporter) {
	t.Helper()
	var ss []exporter.Series
	for i, ns := range []string{"ns-a", "ns-b", "ns-c"} {
		for j, pod := range []string{"p1", "p2", "web.1"} {
			if ns == "ns-c" && pod == "p2" {
				continue // a pod without series
			}
			v := float64(10*i + j + 1)
			for _, c := range []string{"app", "sidecar", "POD"} {
				l := map[string]string{"namespace": ns, "pod": pod, "container": c, "container_name": c, "pod_name": pod}
				ss = append(ss,
					exporter.Series{Name: "container_cpu_usage_seconds_total", Type: exporter.Counter, Labels: l, Value: v, Rate: v / 10},
					exporter.Series{Name: "container_memory_working_set_bytes", Labels: l, Value: v * 1e6},
					exporter.Series{Name: "container_network_receive_packets_total", Type: exporter.Counter, Labels: l, Value: v, Rate: v},
				)
			}
			nan := v
			if j == 1 {
				nan = math.NaN()
			}
			ss = append(ss, exporter.Series{Name: "container_fs_usage_bytes", Labels: map[string]string{"namespace": ns, "pod": pod, "container": "app"}, Value: nan})
			for _, verb := range []string{"GET", "POST"} {
				ss = append(ss,
					exporter.Series{Name: "http_requests_total", Type: exporter.Counter, Rate: v,
						Labels: map[string]string{"namespace": ns, "pod": pod, "kubernetes_namespace": ns, "kubernetes_pod_name": pod, "verb": verb}},
					exporter.Series{Name: "some_metric_count", Labels: map[string]string{"namespace": ns, "pod": pod, "verb": verb}, Value: v},
				)
			}
			ss = append(ss, exporter.Series{Name: "jobs_queued", Labels: map[string]string{"namespace": ns, "pod": pod, "deployment": "web"}, Value: v})
			total := 4.0
			if j == 2 {
				total = 0 // 0/0: NaN
			}
			if err := x.FPM(ns, pod, float64(j), total); err != nil {
				t.Fatal(err)
			}
		}
		// Series of the namespace without a pod label.
		ss = append(ss, exporter.Series{Name: "container_memory_working_set_bytes", Labels: map[string]string{"namespace": ns, "id": "/"}, Value: 5})
	}
	if err := x.Set(ss...); err != nil {
		t.Fatal(err)
	}
}

// TestSharedEvaluationDifferential runs every custom rule of the
// configurations both ways against a real Prometheus at one evaluation
// time: the per-request query for a namespace and objects, and the shared
// query (every namespace and object, grouped by namespace and object) read
// for that namespace and those objects. Where rules.Rule.Sharing accepts
// the rule, the answers must be identical: the same values, in the same
// order, for every object.
func TestSharedEvaluationDifferential(t *testing.T) {
	_, x, prom := startStack(t)
	setSharedDiffData(t, x)
	ctx := ctxFor(t, 4*time.Minute)
	if _, err := prom.WaitForQuery(ctx, `count_over_time(http_requests_total[1m]) >= 6`, 1, 2*time.Minute); err != nil {
		t.Fatalf("waiting for six scrapes: %v", err)
	}
	at := time.Now().Add(-time.Second)
	shared, refused := 0, 0
	for _, f := range sharedDiffConfigs(t) {
		cfg, err := config.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rs, err := rules.Compile(cfg, kubemapper.New())
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, r := range rs.CustomRules() {
			s, n := diffRule(ctx, t, prom.URL, at, filepath.Base(f), r)
			shared += s
			refused += n
		}
	}
	t.Logf("%d (rule, series, resource, request) cases compared both ways, %d with values; %d rule/series/resource combinations refused sharing", shared, nonEmpty, refused)
	if shared == 0 || nonEmpty < shared/4 {
		t.Fatalf("%d cases compared, %d with values: the data or the configurations changed", shared, nonEmpty)
	}
}

// diffRule compares the rule's answers for every series it discovers and
// every namespaced resource its labels name.
func diffRule(ctx context.Context, t *testing.T, promURL string, at time.Time, file string, r *rules.Rule) (compared, refused int) {
	t.Helper()
	series, err := promSeries(ctx, promURL, r.SeriesQuery())
	if err != nil {
		t.Fatalf("%s %s: %v", file, r.Path(), err)
	}
	done := map[string]bool{}
	for _, ls := range series {
		name := string(ls[model.MetricNameLabel])
		if !r.KeepSeries(name) {
			continue
		}
		grs, _ := r.ResourcesForSeries(ls)
		for _, gr := range grs {
			if gr == rules.NamespaceResource || done[name+"/"+gr.String()] {
				continue
			}
			done[name+"/"+gr.String()] = true
			for _, sel := range []string{"", "verb=GET", "container!=sidecar"} {
				c, ok := diffRequests(ctx, t, promURL, at, fmt.Sprintf("%s %s series %s for %s selector %q", file, r.Path(), name, gr, sel), r, name, gr, sel)
				if !ok {
					refused++
					break
				}
				compared += c
			}
		}
	}
	return compared, refused
}

// nonEmpty counts the compared per-request answers that had values.
var nonEmpty int

// diffRequests compares, for one series, resource and selector, the
// per-request answers of several namespaces and object lists with the
// shared answer; ok is false when the rule is not shared.
func diffRequests(ctx context.Context, t *testing.T, promURL string, at time.Time, what string, r *rules.Rule, series string, gr schema.GroupResource, selector string) (int, bool) {
	t.Helper()
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatal(err)
	}
	sr := rules.SharedRequest{Series: series, Resource: gr, MetricSelector: sel}
	if err := r.Sharing(sr); err != nil {
		t.Logf("%s: not shared: %v", what, err)
		return 0, false
	}
	sq, err := r.SharedQuery(sr)
	if err != nil {
		t.Fatalf("%s: SharedQuery: %v", what, err)
	}
	sharedAnswer, err := promQuery(ctx, promURL, sq.Expr, at)
	if err != nil {
		t.Fatalf("%s: shared query %s: %v", what, sq.Expr, err)
	}
	n := 0
	for _, ns := range []string{"ns-a", "ns-b", "ns-c", "ns-empty"} {
		for _, names := range [][]string{{"p1"}, {"p1", "p2", "p-missing", "web.1"}, nil} {
			req := rules.CustomRequest{Series: series, Resource: gr, Namespace: ns, Names: names, AllObjects: names == nil, MetricSelector: sel}
			q, err := r.QueryForSeries(req)
			if err != nil {
				t.Fatalf("%s: QueryForSeries: %v", what, err)
			}
			perRequest, err := promQuery(ctx, promURL, q.Expr, at)
			if err != nil {
				t.Fatalf("%s: per-request query %s: %v", what, q.Expr, err)
			}
			want := objectValues(perRequest, q.ResourceLabel, "", "", names)
			got := objectValues(sharedAnswer, sq.ResourceLabel, sq.NamespaceLabel, ns, names)
			if len(want) > 0 {
				nonEmpty++
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s, namespace %s, objects %v: shared answer differs (-per-request +shared):\n%s\nper-request: %s\nshared: %s", what, ns, names, diff, q.Expr, sq.Expr)
			}
			n++
		}
	}
	return n, true
}

// objectValues is each asked object's values (all objects when names is
// nil), in the answer's order, from the samples of namespace ns (when
// nsLabel is set): what the provider reads an answer for.
func objectValues(samples []promSample, resLabel, nsLabel, ns string, names []string) map[string][]string {
	out := map[string][]string{}
	for _, s := range samples {
		obj := s.Labels[resLabel]
		if obj == "" || names != nil && !slices.Contains(names, obj) {
			continue
		}
		if nsLabel != "" && s.Labels[nsLabel] != ns {
			continue
		}
		out[obj] = append(out[obj], s.Value)
	}
	return out
}

type promSample struct {
	Labels map[string]string
	Value  string // as Prometheus wrote it: "NaN", "1.5"
}

// promQuery runs an instant query at a fixed time (both ways read the same
// instant).
func promQuery(ctx context.Context, base, query string, at time.Time) ([]promSample, error) {
	form := url.Values{"query": {query}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := promPost(ctx, base+"/api/v1/query", form, &body); err != nil {
		return nil, err
	}
	if body.Status != "success" || body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("status %s, result type %s: %s", body.Status, body.Data.ResultType, body.Error)
	}
	out := make([]promSample, len(body.Data.Result))
	for i, r := range body.Data.Result {
		v, _ := r.Value[1].(string)
		out[i] = promSample{Labels: r.Metric, Value: v}
	}
	return out, nil
}

// promSeries lists the series matching a selector.
func promSeries(ctx context.Context, base, match string) ([]model.LabelSet, error) {
	var body struct {
		Status string           `json:"status"`
		Error  string           `json:"error"`
		Data   []model.LabelSet `json:"data"`
	}
	if err := promPost(ctx, base+"/api/v1/series", url.Values{"match[]": {match}}, &body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("series %s: %s", match, body.Error)
	}
	return body.Data, nil
}

var promHTTP = &http.Client{Timeout: 30 * time.Second}

func promPost(ctx context.Context, u string, form url.Values, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := promHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return fmt.Errorf("%s: decoding the answer (HTTP %d): %w", u, resp.StatusCode, err)
	}
	return nil
}
