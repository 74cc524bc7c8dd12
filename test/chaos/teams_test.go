//go:build e2e && chaos

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// The two teams of TestTeamFaults: slowTeam's rules misbehave (a template
// bomb, then slow queries), otherTeam's are ordinary.
const (
	slowTeam  = "chaos-team-a"
	otherTeam = "chaos-team-b"
	// teamMetric is what each team's rules serve from chaos_team_value
	// (teamMilli in both namespaces) for its pod teamPod.
	teamMetric = "team_value"
	teamPod    = "p-0"
	teamMilli  = 11250
	// teamHeavyMetric is slowTeam's slow metric, from chaos_team_heavy.
	teamHeavyMetric = "team_heavy"
	// teamConfigMap is the name of each team's rules ConfigMap.
	teamConfigMap = "team-rules"
)

// Team faults settings (environment):
//
//	PROMSCALER_CHAOS_TEAM_RATE      requests per second of the other team and the cluster's rules (default 60)
//	PROMSCALER_CHAOS_TEAM_SLOW      the slow team's requests kept in flight (default 12, as in issue 32)
//	PROMSCALER_CHAOS_TEAM_HOLD      how long they are kept in flight (default 30s)
//	PROMSCALER_CHAOS_TEAM_SUBQUERY  the range:step of the slow metric's nested subqueries (default 10s:1ms)
const (
	defaultTeamRate     = 60
	defaultTeamSlow     = 12
	defaultTeamHold     = 30 * time.Second
	defaultTeamSubquery = "10s:1ms"
	// maxTeamLoadDelay is the longest the other team's new ConfigMap may
	// take to be served beside a template bomb (before: never, still 404
	// after 120 s).
	maxTeamLoadDelay = 30 * time.Second
)

// teamValueRule serves chaos_team_value as teamMetric in the ConfigMap's
// namespace.
const teamValueRule = `- seriesQuery: '{__name__="chaos_team_value"}'
  resources: {template: <<.Resource>>}
  name: {matches: ^chaos_team_value$, as: ` + teamMetric + `}
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
`

// teamHeavyRule serves chaos_team_heavy (teamHeavySeries series) as
// teamHeavyMetric through two nested subqueries over the value at the
// query's time (@ start(), so the cost does not depend on how old the series
// is): for each series Prometheus computes, at each of range/step points, the
// maximum over as many points (1e8 comparisons at 10s:1ms, about 0.8 s of a
// core here), and checks the query's deadline between series. The query
// runs past the adapter's --prometheus-timeout (10 s) and Prometheus stops
// it about then: a slow query of the shared Prometheus, as a team's heavy
// rule is.
func teamHeavyRule(subquery string) string {
	return `- seriesQuery: '{__name__="chaos_team_heavy"}'
  resources: {template: <<.Resource>>}
  name: {matches: ^chaos_team_heavy$, as: ` + teamHeavyMetric + `}
  metricsQuery: sum(max_over_time(max_over_time((<<.Series>>{<<.LabelMatchers>>} @ start())[` + subquery + `])[` + subquery + `])) by (<<.GroupBy>>)
`
}

// teamHeavySeries is how many chaos_team_heavy series the slow team has.
const teamHeavySeries = 30

// templateBomb is a metricsQuery of issue 32: a chain of depth define
// templates, each calling the previous one twice (2^depth calls, no
// output). guarded puts the call behind a condition only a request could
// take.
func templateBomb(depth int, guarded bool) string {
	var b strings.Builder
	b.WriteString(`<<define "t0">><<end>>`)
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, `<<define "t%d">><<template "t%d">><<template "t%d">><<end>>`, i, i-1, i-1)
	}
	b.WriteString(`sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`)
	call := fmt.Sprintf(`<<template "t%d">>`, depth)
	if guarded {
		call = `<<if eq .Series "x">>` + call + `<<end>>`
	}
	return strings.Replace(teamValueRule, "metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)", "metricsQuery: '"+b.String()+call+"'", 1)
}

// teamRow is one team scenario's figures.
type teamRow struct {
	name, does string
	// admin and other are the cluster's rules' requests (custom and
	// external) and the other team's during the scenario.
	admin, other window
	notes        string
}

// TestTeamFaults runs the adapter with --team-rules (and the RBAC of
// deploy/components/team-rules) and two teams' ConfigMaps in the real API
// server, under a steady load of the cluster's rules' metrics, and checks
// that one team's misbehaving rules cost the other team and the cluster's
// rules nothing:
//
//   - team-template-bomb: the slow team creates a ConfigMap whose
//     metricsQuery is a 60-deep define-template bomb (and one guarded to run
//     only at request time) beside the other team's new ConfigMap: the
//     other team's metric is served within maxTeamLoadDelay, the bombs get
//     RulesRejected events, and once deleted, the slow team's fixed
//     ConfigMap under the same name is served;
//   - team-bombs-at-restart: the adapter is restarted with two bombs among
//     the teams' ConfigMaps: every other ConfigMap is served again (before:
//     a random subset never loaded after a restart);
//   - team-slow-queries: the slow team keeps requests for a metric whose
//     query runs past the adapter's Prometheus timeout in flight (a heavy
//     query on the real, shared Prometheus) while the other team's and the
//     cluster's metrics are asked: their error rates stay at most 2 %.
func TestTeamFaults(t *testing.T) {
	rate := envInt("PROMSCALER_CHAOS_TEAM_RATE", defaultTeamRate)
	s := startStack(t, stackOptions{direct: true, teamRules: true, adapterArgs: strings.Fields(os.Getenv("PROMSCALER_CHAOS_ADAPTER_ARGS"))})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s.prepareTeams(t, ctx)
	// Not the admin: system:masters is exempt from the API servers'
	// in-flight limits, an HPA's identity is not.
	hc, err := s.metricsReader(ctx, "chaos-hpa")
	if err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(outDir(t, s), "teams-"+time.Now().UTC().Format("20060102-150405")+".md")
	var rows []teamRow
	write := func() {
		if err := os.WriteFile(table, []byte(teamTable(rows, rate)), 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Run("team-template-bomb", func(t *testing.T) {
		load := s.startMixedLoad(rate, 0, []kind{kindCustom, kindExternal}, hc, s.env.APIServerURL)
		r := s.templateBombFault(t, ctx, load)
		rows = append(rows, r)
		write()
		checkTeamRow(t, r)
	})
	t.Run("team-bombs-at-restart", func(t *testing.T) {
		r := s.bombsAtRestart(t, ctx)
		rows = append(rows, r)
		write()
	})
	t.Run("team-slow-queries", func(t *testing.T) {
		load := s.startMixedLoad(rate, 0, []kind{kindCustom, kindTeam, kindExternal}, hc, s.env.APIServerURL)
		r := s.slowTeamFault(t, ctx, load)
		rows = append(rows, r)
		write()
		checkTeamRow(t, r)
	})
	t.Logf("team faults table %s:\n%s", table, teamTable(rows, rate))
}

// checkTeamRow fails the test when more than maxHealthyErrors of the
// cluster's or the other team's requests failed, or any was wrong.
func checkTeamRow(t *testing.T, r teamRow) {
	t.Helper()
	for _, w := range []struct {
		who string
		w   window
	}{{"the cluster's rules", r.admin}, {"the other team", r.other}} {
		if w.w.total == 0 {
			continue
		}
		if share := float64(w.w.total-w.w.ok-w.w.partial) / float64(w.w.total); share > maxHealthyErrors {
			t.Errorf("%s: %d of %d requests failed (%s), want at most %.0f %%", w.who, w.w.total-w.w.ok-w.w.partial, w.w.total, w.w.errorText(), 100*maxHealthyErrors)
		}
		if w.w.wrong > 0 {
			t.Errorf("%s: %d wrong values: %q", w.who, w.w.wrong, w.w.wrongBodies)
		}
	}
}

// prepareTeams creates the two teams' namespaces, their pod and series
// (chaos_team_value in both, chaos_team_heavy in the slow team's).
func (s *stack) prepareTeams(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, ns := range []string{slowTeam, otherTeam} {
		if err := s.env.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		if err := s.createPod(ctx, ns, teamPod); err != nil {
			t.Fatal(err)
		}
		if err := s.x.Set(exporter.Series{Name: "chaos_team_value", Labels: map[string]string{"namespace": ns, "pod": teamPod}, Value: teamMilli / 1000.0}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range teamHeavySeries {
		if err := s.x.Set(exporter.Series{Name: "chaos_team_heavy", Labels: map[string]string{"namespace": slowTeam, "pod": teamPod, "i": strconv.Itoa(i)}, Value: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.prom.WaitForQuery(ctx, fmt.Sprintf(`count(chaos_team_value) + count(chaos_team_heavy) == %d`, 2+teamHeavySeries), 1, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// applyTeamRules creates (or replaces) a team's rules ConfigMap.
func (s *stack) applyTeamRules(ctx context.Context, ns, name, rules string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"promscaler.io/rules": "true"}},
		Data:       map[string]string{"rules.yaml": rules},
	}
	cms := s.env.Client.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ConfigMap %s/%s: %w", ns, name, err)
	}
	return nil
}

// waitTeamValue waits until ns's teamMetric is served correctly and
// returns when.
func (s *stack) waitTeamValue(ctx context.Context, ns string, timeout time.Duration) (time.Time, error) {
	path := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/" + teamMetric
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		body, code, err := framework.Get(ctx, s.api, s.env.APIServerURL+path)
		if err == nil && code == http.StatusOK {
			if wrong, partial := check(kindTeam, body); !wrong && !partial {
				return time.Now(), nil
			}
		}
		last = fmt.Sprintf("HTTP %d %v %.200s", code, err, body)
	}
	return time.Time{}, fmt.Errorf("%s in %s not served within %v; last: %s", teamMetric, ns, timeout, last)
}

// waitRejected waits for a RulesRejected event on ConfigMap ns/name whose
// message holds want, and returns when it was seen and its message.
func (s *stack) waitRejected(ctx context.Context, ns, name, want string, timeout time.Duration) (time.Time, string, error) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		evs, err := s.env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			continue
		}
		for _, e := range evs.Items {
			if e.Reason == "RulesRejected" && strings.Contains(e.Message, want) {
				return time.Now(), e.Message, nil
			}
		}
	}
	return time.Time{}, "", fmt.Errorf("no RulesRejected event on ConfigMap %s/%s naming %q within %v", ns, name, want, timeout)
}

// templateBombFault creates the slow team's bombs beside the other team's
// new ConfigMap, measures the other team's load delay and the events, then
// deletes the bombs and measures how long the slow team's fixed ConfigMap,
// under the bomb's name, takes to be served.
func (s *stack) templateBombFault(t *testing.T, ctx context.Context, load *loader) teamRow {
	t.Helper()
	time.Sleep(3 * time.Second) // the load settles
	start := time.Now()
	for name, guarded := range map[string]bool{teamConfigMap: false, "bomb-guarded": true} {
		if err := s.applyTeamRules(ctx, slowTeam, name, "rules:\n"+templateBomb(60, guarded)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.applyTeamRules(ctx, otherTeam, teamConfigMap, "rules:\n"+teamValueRule); err != nil {
		t.Fatal(err)
	}
	served, err := s.waitTeamValue(ctx, otherTeam, 2*time.Minute)
	if err != nil {
		t.Error(err)
	} else if d := served.Sub(start); d > maxTeamLoadDelay {
		t.Errorf("the other team's new ConfigMap served %v after it was created beside the bomb, want at most %v", d, maxTeamLoadDelay)
	}
	var notes []string
	for _, name := range []string{teamConfigMap, "bomb-guarded"} {
		at, msg, err := s.waitRejected(ctx, slowTeam, name, "template calls", time.Minute)
		if err != nil {
			t.Error(err)
			continue
		}
		notes = append(notes, fmt.Sprintf("ConfigMap %s refused %v after its creation (`%.160s`)", name, at.Sub(start).Round(10*time.Millisecond), msg))
	}
	deleted := time.Now()
	for _, name := range []string{teamConfigMap, "bomb-guarded"} {
		if err := s.env.Client.CoreV1().ConfigMaps(slowTeam).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.applyTeamRules(ctx, slowTeam, teamConfigMap, "rules:\n"+teamValueRule+teamHeavyRule(teamSubquery())); err != nil {
		t.Fatal(err)
	}
	fixed, err := s.waitTeamValue(ctx, slowTeam, 2*time.Minute)
	if err != nil {
		t.Error(err)
	}
	end := time.Now()
	time.Sleep(2 * time.Second)
	load.close()
	r := teamRow{name: "team-template-bomb", admin: load.windowOf([]kind{kindCustom, kindExternal}, start, end),
		does: "a 60-deep define-template bomb in the slow team's ConfigMap (and one guarded to run only at request time) created beside the other team's new ConfigMap; then the bombs deleted and the slow team's fixed ConfigMap created under the bomb's name"}
	r.notes = fmt.Sprintf("the other team's new ConfigMap served %s after its creation (load delay); %s; the slow team's fixed ConfigMap served %s after the bombs were deleted",
		sinceText(served, start), strings.Join(notes, "; "), sinceText(fixed, deleted))
	return r
}

// bombsAtRestart creates two more bombs in the slow team's namespace
// (beside its fixed ConfigMap and the other team's), waits until both are
// refused, restarts the adapter (SIGTERM, the same flags and port) and
// measures how long each team's ConfigMap takes to be served again: the
// informer's initial list hands the bombs to the loader with every other
// ConfigMap, in an order the test does not choose. The bombs are deleted
// at the end.
func (s *stack) bombsAtRestart(t *testing.T, ctx context.Context) teamRow {
	t.Helper()
	bombs := map[string]bool{"bomb-restart": false, "bomb-restart-guarded": true}
	for name, guarded := range bombs {
		if err := s.applyTeamRules(ctx, slowTeam, name, "rules:\n"+templateBomb(60, guarded)); err != nil {
			t.Fatal(err)
		}
	}
	for name := range bombs {
		if _, _, err := s.waitRejected(ctx, slowTeam, name, "template calls", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	old := s.adapter
	old.Process.Stop(30 * time.Second)
	start := time.Now()
	a, err := s.env.StartAdapterArgs(ctx, old.Port, old.Process.Args[1:])
	if err != nil {
		t.Fatalf("restarting the adapter: %v", err)
	}
	healthy := time.Since(start)
	s.adapter.Process = a.Process
	var notes []string
	for _, ns := range []string{otherTeam, slowTeam} {
		served, err := s.waitTeamValue(ctx, ns, 2*time.Minute)
		if err != nil {
			t.Errorf("after the restart with the bombs in place: %v", err)
		}
		notes = append(notes, fmt.Sprintf("%s's ConfigMap served %s after the restart", ns, sinceText(served, start)))
	}
	if err := s.waitCorrect(ctx, time.Minute); err != nil {
		t.Errorf("the cluster's rules after the restart: %v", err)
	}
	for name := range bombs {
		if err := s.env.Client.CoreV1().ConfigMaps(slowTeam).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return teamRow{name: "team-bombs-at-restart",
		does:  "the adapter restarted (SIGTERM, same flags) with two 60-deep bombs (one guarded) among the teams' ConfigMaps",
		notes: fmt.Sprintf("new adapter healthy after %v; %s", healthy.Round(10*time.Millisecond), strings.Join(notes, "; "))}
}

func sinceText(at, from time.Time) string {
	if at.IsZero() {
		return "never (2 min)"
	}
	return at.Sub(from).Round(10 * time.Millisecond).String()
}

func teamSubquery() string {
	if v := os.Getenv("PROMSCALER_CHAOS_TEAM_SUBQUERY"); v != "" {
		return v
	}
	return defaultTeamSubquery
}

// slowTeamFault keeps the slow team's requests for its heavy metric in
// flight (each worker asks again as soon as it has an answer) for the hold
// time, beside the load of the cluster's and the other team's metrics.
func (s *stack) slowTeamFault(t *testing.T, ctx context.Context, load *loader) teamRow {
	t.Helper()
	slow := envInt("PROMSCALER_CHAOS_TEAM_SLOW", defaultTeamSlow)
	hold := defaultTeamHold
	if v, err := time.ParseDuration(os.Getenv("PROMSCALER_CHAOS_TEAM_HOLD")); err == nil && v > 0 {
		hold = v
	}
	if _, err := s.waitTeamValue(ctx, otherTeam, time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the load settles
	team, err := s.metricsReader(ctx, "chaos-team-a")
	if err != nil {
		t.Fatal(err)
	}
	heavy := &loader{s: s, hc: team, base: s.env.APIServerURL}
	start := time.Now()
	stop := start.Add(hold)
	var workers sync.WaitGroup
	for w := range slow {
		workers.Go(func() {
			for time.Now().Before(stop) {
				r := s.askHeavy(ctx, team, w)
				heavy.mu.Lock()
				heavy.res = append(heavy.res, r)
				heavy.mu.Unlock()
			}
		})
	}
	time.Sleep(hold * 2 / 3)
	mid := s.metricsNote(ctx, "promscaler_prometheus_up", "promscaler_prometheus_requests_in_flight", "promscaler_prometheus_rejected_requests_total")
	workers.Wait()
	end := time.Now()
	time.Sleep(2 * time.Second)
	load.close()
	hw := heavy.window(start, end)
	r := teamRow{name: "team-slow-queries",
		does:  fmt.Sprintf("the slow team keeps %d requests in flight for %v, each its own query (distinct selectors), for a metric whose query (nested subqueries %s) runs past the adapter's Prometheus timeout on the shared Prometheus", slow, hold, teamSubquery()),
		admin: load.windowOf([]kind{kindCustom, kindExternal}, start, end), other: load.windowOf([]kind{kindTeam}, start, end)}
	r.notes = fmt.Sprintf("the slow team's requests: %d (ok %d, errors %s, p99 %v); %v into it: %s", hw.total, hw.ok, hw.errorText(), hw.p99.Round(time.Millisecond), hold*2/3, mid)
	if hw.total-hw.ok < hw.total/2 {
		t.Errorf("only %d of the slow team's %d requests failed: its query is not slow enough to test anything (PROMSCALER_CHAOS_TEAM_SUBQUERY)", hw.total-hw.ok, hw.total)
	}
	return r
}

// askHeavy asks for the slow team's metric as worker w: each worker's
// metricLabelSelector (i notin (w<w>), which every series matches) makes
// its query distinct, so that the workers' queries do not coalesce into
// one and Prometheus runs as many as the adapter lets through.
func (s *stack) askHeavy(ctx context.Context, hc *http.Client, w int) result {
	r := result{kind: kindTeamHeavy, start: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sel := url.QueryEscape(fmt.Sprintf("i notin (w%d)", w))
	_, code, err := framework.Get(ctx, hc, s.env.APIServerURL+kindTeamHeavy.path()+"?metricLabelSelector="+sel)
	r.end, r.status = time.Now(), code
	if err != nil {
		r.status, r.err = 0, classify(err)
	}
	return r
}

func teamTable(rows []teamRow, rate int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Team faults run %s: the adapter with --team-rules; %d req/s through the aggregator as a user with the metrics-reader ClusterRole (the cluster's rules' custom and external metrics, and the other team's metric in the slow-queries fault); load average %s.\n\n",
		time.Now().UTC().Format(time.RFC3339), rate, framework.LoadAvg())
	b.WriteString("| fault | what it does | cluster's rules: requests, errors | other team: requests, errors | notes |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.name, r.does, teamWindowText(r.admin), teamWindowText(r.other), r.notes)
	}
	return b.String()
}

func teamWindowText(w window) string {
	if w.total == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (ok %d, wrong %d), errors %s (%.1f %%), p99 %v", w.total, w.ok, w.wrong, w.errorText(),
		100*float64(w.total-w.ok-w.partial)/float64(w.total), w.p99.Round(time.Millisecond))
}
