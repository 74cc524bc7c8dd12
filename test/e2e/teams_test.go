//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// teamRulesA are namespace tm-a's rules: the usual query, and queries that
// try to read namespace tm-b (another metric, or, on(), a subquery, no
// matchers). tm_secret is 50 in tm-a and 10000 in tm-b: any answer holding
// tm-b's data shows it.
const teamRulesA = `rules:
- seriesQuery: '{__name__="tm_requests"}'
  resources: {template: <<.Resource>>}
  name: {matches: ^tm_requests$, as: team_requests}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
- seriesQuery: '{__name__="tm_requests"}'
  resources: {template: <<.Resource>>}
  name: {matches: ^tm_requests$, as: team_other_metric}
  metricsQuery: sum(tm_secret) by (<<.GroupBy>>)
- seriesQuery: '{__name__="tm_requests"}'
  resources: {template: <<.Resource>>}
  name: {matches: ^tm_requests$, as: team_or}
  metricsQuery: sum(tm_secret{pod="none"}) by (<<.GroupBy>>) or sum(tm_secret) by (<<.GroupBy>>)
- seriesQuery: '{__name__="tm_requests"}'
  resources: {template: <<.Resource>>}
  name: {matches: ^tm_requests$, as: team_on}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) + on() group_left() sum(tm_secret)
- seriesQuery: '{__name__="tm_requests"}'
  resources: {template: <<.Resource>>}
  name: {matches: ^tm_requests$, as: team_subquery}
  metricsQuery: max_over_time(sum(tm_secret) by (<<.GroupBy>>)[1m:10s])
externalRules:
- seriesQuery: '{__name__="tm_requests"}'
  resources: {template: <<.Resource>>, namespaced: false}
  name: {matches: ^tm_requests$, as: team_external}
  metricsQuery: sum(tm_secret)
`

// TestTeamRules runs team rules (--team-rules) through the aggregator, a
// real Prometheus with series in namespaces tm-a and tm-b, and ConfigMaps
// in the real API server, with the RBAC of deploy/components/team-rules:
// a rule of tm-a serves tm-a's values, never tm-b's whatever its text,
// serves nothing in tm-b or in a namespace without series, and a bad
// ConfigMap gets an event and keeps its last good rules; the cluster-wide
// rules keep serving every namespace.
func TestTeamRules(t *testing.T) {
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	ctx := ctxFor(t, 5*time.Minute)
	must := fatalOn(t)
	for ns, v := range map[string]float64{"tm-a": 5, "tm-b": 1000} {
		must(x.Set(exporter.Series{Name: "tm_requests", Labels: map[string]string{"namespace": ns, "pod": "web"}, Value: v}))
		must(x.Set(exporter.Series{Name: "tm_secret", Labels: map[string]string{"namespace": ns, "pod": "web"}, Value: v * 10}))
	}
	for _, ns := range []string{"tm-a", "tm-b", "tm-new"} {
		must(env.EnsureNamespace(ctx, ns))
		_, err := env.CreateReadyPods(ctx, ns, map[string]string{"app": "web"}, time.Minute, time.Minute, "web")
		must(err)
	}
	_, err := prom.WaitForQuery(ctx, `count(tm_requests) + count(tm_secret) == 4`, 1, time.Minute)
	must(err)

	// The cluster-wide rules: tm_requests as tm_requests_cluster, everywhere.
	clusterConfig := filepath.Join(t.TempDir(), "config.yaml")
	must(os.WriteFile(clusterConfig, []byte(`rules:
- seriesQuery: '{__name__="tm_requests"}'
  resources: {template: <<.Resource>>}
  name: {matches: ^tm_requests$, as: tm_requests_cluster}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
`), 0o644))
	// The adapter runs with the component's RBAC on top of the base's.
	if out, err := env.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(env.RepoRoot, "deploy", "components", "team-rules", "rbac.yaml")); err != nil {
		t.Fatalf("applying the team rules RBAC: %v\n%s", err, out)
	}
	cms := env.Client.CoreV1().ConfigMaps("tm-a")
	teamCM := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "team-rules", Namespace: "tm-a", Labels: map[string]string{"promscaler.io/rules": "true"}},
		Data:       map[string]string{"rules.yaml": teamRulesA},
	}
	_, err = cms.Create(ctx, teamCM, metav1.CreateOptions{})
	must(err)
	env.MustStartAdapter(t, framework.AdapterConfig{
		ConfigFile: clusterConfig, PrometheusURL: prom.URL,
		ExtraArgs: []string{"--team-rules"},
	})

	podRef := func(ns string) objectRef { return objectRef{Kind: "Pod", APIVersion: "v1", Namespace: ns} }
	podValue := func(ns, metric, want string) func(context.Context) error {
		return func(ctx context.Context) error {
			a := getAnswer(ctx, env, cmV1beta2+"/namespaces/"+ns+"/pods/web/"+metric)
			got, err := customValuesV1beta2(a, metric, podRef(ns))
			if err != nil {
				return fmt.Errorf("%s in %s: %w (%s)", metric, ns, err, a.body)
			}
			return diffValues(map[string]string{"web": want}, got)
		}
	}
	notFound := func(path string) error {
		return getAnswer(ctx, env, path).wantError(http.StatusNotFound, metav1.StatusReasonNotFound)
	}

	eventually(t, ctx, time.Minute, "team_requests served in tm-a", podValue("tm-a", "team_requests", "5"))

	t.Run("a team rule serves its namespace's values only, whatever its text", func(t *testing.T) {
		for metric, want := range map[string]string{
			"team_requests":     "5",
			"team_other_metric": "50",
			"team_or":           "50",
			"team_on":           "55",
			"team_subquery":     "50",
		} {
			// The subquery needs a few of its steps after the first scrape.
			eventually(t, ctx, 30*time.Second, metric+" in tm-a", podValue("tm-a", metric, want))
		}
		a := getAnswer(ctx, env, emV1beta1+"/namespaces/tm-a/team_external")
		got, err := externalValues(a, "team_external")
		if err == nil {
			err = diffValues(map[string]string{"": "50"}, got)
		}
		if err != nil {
			t.Errorf("team_external in tm-a: %v (%s)", err, a.body)
		}
	})

	t.Run("nothing served in another namespace", func(t *testing.T) {
		for _, ns := range []string{"tm-b", "tm-new"} {
			for _, metric := range []string{"team_requests", "team_other_metric", "team_on"} {
				if err := notFound(cmV1beta2 + "/namespaces/" + ns + "/pods/web/" + metric); err != nil {
					t.Errorf("%s in %s: %v", metric, ns, err)
				}
				if err := notFound(cmV1beta2 + "/namespaces/" + ns + "/pods/*/" + metric); err != nil {
					t.Errorf("%s for every pod of %s: %v", metric, ns, err)
				}
			}
			if err := notFound(emV1beta1 + "/namespaces/" + ns + "/team_external"); err != nil {
				t.Errorf("team_external in %s: %v", ns, err)
			}
		}
	})

	t.Run("a selector naming another namespace is refused", func(t *testing.T) {
		// != is not a metric label selector operator: a 400 before any
		// query (its notin form is refused as another namespace).
		bad := getAnswer(ctx, env, cmV1beta2+"/namespaces/tm-a/pods/web/team_requests"+"?metricLabelSelector="+strings.TrimPrefix(sel("namespace!=tm-a"), "?labelSelector="))
		if err := bad.wantError(http.StatusBadRequest, metav1.StatusReasonBadRequest, "not supported"); err != nil {
			t.Errorf("metricLabelSelector namespace!=tm-a: %v", err)
		}
		for _, s := range []string{"namespace=tm-b", "namespace in (tm-a,tm-b)", "namespace notin (tm-a)"} {
			a := getAnswer(ctx, env, cmV1beta2+"/namespaces/tm-a/pods/web/team_requests"+"?metricLabelSelector="+strings.TrimPrefix(sel(s), "?labelSelector="))
			if err := a.wantError(http.StatusForbidden, metav1.StatusReasonForbidden, "cannot be confined"); err != nil {
				t.Errorf("metricLabelSelector %s: %v", s, err)
			}
			if strings.Contains(string(a.body), "tm_secret") || strings.Contains(string(a.body), "sum(") {
				t.Errorf("the refusal shows the query: %s", a.body)
			}
		}
	})

	t.Run("cluster-wide rules serve every namespace", func(t *testing.T) {
		for ns, want := range map[string]string{"tm-a": "5", "tm-b": "1000"} {
			eventually(t, ctx, 30*time.Second, "tm_requests_cluster in "+ns, podValue(ns, "tm_requests_cluster", want))
		}
	})

	t.Run("a bad ConfigMap gets an event and keeps its last good rules", func(t *testing.T) {
		cm, err := cms.Get(ctx, "team-rules", metav1.GetOptions{})
		must(err)
		cm.Data["rules.yaml"] = strings.Replace(teamRulesA, "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)\n- seriesQuery",
			"sum(tm_secret{namespace=\"tm-b\"}) by (<<.GroupBy>>)\n- seriesQuery", 1)
		if cm.Data["rules.yaml"] == teamRulesA {
			t.Fatal("the test's edit did not change the rules")
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		must(err)
		regex := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "team-regex", Namespace: "tm-a", Labels: map[string]string{"promscaler.io/rules": "true"}},
			Data: map[string]string{"rules.yaml": `rules:
- seriesQuery: '{__name__="tm_secret",namespace=~".+"}'
  resources: {template: <<.Resource>>}
  name: {matches: ^tm_secret$, as: team_regex}
`},
		}
		_, err = cms.Create(ctx, regex, metav1.CreateOptions{})
		must(err)
		for name, want := range map[string]string{
			"team-rules": `rules[0].metricsQuery`,
			"team-regex": `rules[0].seriesQuery`,
		} {
			eventually(t, ctx, 30*time.Second, "a RulesRejected event on "+name, func(ctx context.Context) error {
				evs, err := env.Client.CoreV1().Events("tm-a").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
				if err != nil {
					return err
				}
				for _, e := range evs.Items {
					if e.Reason == "RulesRejected" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, want) && strings.Contains(e.Message, "cannot be confined") {
						return nil
					}
				}
				return fmt.Errorf("no RulesRejected event naming %s among %d events", want, len(evs.Items))
			})
		}
		// The last good rules keep serving, on every request for a while.
		deadline := time.Now().Add(5 * time.Second)
		for n := 0; time.Now().Before(deadline); n++ {
			if err := podValue("tm-a", "team_requests", "5")(ctx); err != nil {
				t.Fatalf("request %d after the rejected version: %v", n, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := notFound(cmV1beta2 + "/namespaces/tm-a/pods/web/team_regex"); err != nil {
			t.Errorf("team_regex: %v", err)
		}
	})
}
