package reload

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/rules"
)

// ruleFile is a configuration with one external rule for series, served
// with query (a metricsQuery).
func ruleFile(series, query string) string {
	return "externalRules:\n- seriesQuery: '{__name__=\"" + series + "\"}'\n  resources: {namespaced: false}\n  metricsQuery: '" + query + "'\n"
}

// server is what the adapter does with a watcher: Load on every change
// (strict for the changed file), keeping the last rule set applied.
type server struct {
	mu  sync.Mutex
	set *rules.RuleSet
}

func (s *server) apply(_ context.Context, files []rules.File, changed string) error {
	r, err := rules.Load(files, rules.Options{Mapper: kubemapper.New(), Strict: rules.Strict(false, changed), AnyBackend: true})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = r.Set
	return nil
}

// served lists "path query" for every external rule in service.
func (s *server) served() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.set.ExternalRules() {
		out = append(out, r.Path()+" "+r.MetricsQuery())
	}
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startWatcher loads sources as the adapter does at startup and returns
// the server, its metrics and a watcher primed with what was loaded.
func startWatcher(t *testing.T, sources ...string) (*server, *metrics.Metrics, *Watcher) {
	t.Helper()
	files, err := rules.Read(sources)
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{}
	if err := srv.apply(context.Background(), files, ""); err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	w, err := New(Config{Sources: sources, Apply: srv.apply, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	w.Prime(files)
	return srv, m, w
}

// checkTwice polls twice: a change is applied on the second poll seeing it.
func checkTwice(t *testing.T, w *Watcher) error {
	t.Helper()
	_, _ = w.Check(context.Background())
	_, err := w.Check(context.Background())
	return err
}

// TestReloadKeepsRuleWithQueryPrometheusRejects: issue 21. A new version
// whose metricsQuery Prometheus would reject is not swapped in; the rule's
// last good version keeps serving and the failure is counted and shown.
func TestReloadKeepsRuleWithQueryPrometheusRejects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	good := ruleFile("queue_depth", "sum(<<.Series>>{<<.LabelMatchers>>})")
	write(t, path, good)
	srv, m, w := startWatcher(t, path)

	write(t, path, ruleFile("queue_depth", "sum(<<.Series>>{<<.LabelMatchers>>)"))
	err := checkTwice(t, w)
	if err == nil || !strings.Contains(err.Error(), path+":4:") || !strings.Contains(err.Error(), "Prometheus would reject") {
		t.Errorf("reload error = %v, want the file:line and why Prometheus rejects it", err)
	}
	want := []string{"externalRules[0] sum(<<.Series>>{<<.LabelMatchers>>})"}
	if diff := cmp.Diff(want, srv.served()); diff != "" {
		t.Errorf("rules in service (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(m.ConfigReloads.WithLabelValues(metrics.OutcomeFailure)); got != 1 {
		t.Errorf("failed reloads = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.ConfigLastReloadSuccessful); got != 0 {
		t.Errorf("last_reload_successful = %v, want 0", got)
	}
	if got := testutil.ToFloat64(w.rejected.WithLabelValues(path)); got != 1 {
		t.Errorf("config_file_rejected{file} = %v, want 1", got)
	}

	// Fixed: applied.
	fixed := ruleFile("queue_depth", "max(<<.Series>>{<<.LabelMatchers>>})")
	write(t, path, fixed)
	if err := checkTwice(t, w); err != nil {
		t.Fatal(err)
	}
	want = []string{"externalRules[0] max(<<.Series>>{<<.LabelMatchers>>})"}
	if diff := cmp.Diff(want, srv.served()); diff != "" {
		t.Errorf("rules in service after the fix (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(m.ConfigLastReloadSuccessful); got != 1 {
		t.Errorf("last_reload_successful after the fix = %v, want 1", got)
	}
}

// TestDirectoryFilesReloadOnTheirOwn: issue 22 item 1. Each file of a
// directory hot-reloads on its own; a bad file keeps its last good rules
// and does not stop the others; files come and go.
func TestDirectoryFilesReloadOnTheirOwn(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "c.yaml")
	write(t, a, ruleFile("a_total", "sum(<<.Series>>)"))
	write(t, b, ruleFile("b_total", "sum(<<.Series>>)"))
	write(t, filepath.Join(dir, "notes.txt"), "not a configuration")
	srv, m, w := startWatcher(t, dir)

	steps := []struct {
		name    string
		do      func()
		wantErr string
		want    []string
	}{
		{"unchanged", func() {}, "", []string{a + ":externalRules[0] sum(<<.Series>>)", b + ":externalRules[0] sum(<<.Series>>)"}},
		{"b broken", func() { write(t, b, "externalRules:\n- seriesQuery: [\n") }, b + ":2:16: invalid YAML",
			[]string{a + ":externalRules[0] sum(<<.Series>>)", b + ":externalRules[0] sum(<<.Series>>)"}},
		{"a edited while b is broken", func() { write(t, a, ruleFile("a_total", "max(<<.Series>>)")) }, "",
			[]string{a + ":externalRules[0] max(<<.Series>>)", b + ":externalRules[0] sum(<<.Series>>)"}},
		{"c added", func() { write(t, c, ruleFile("c_total", "min(<<.Series>>)")) }, "",
			[]string{a + ":externalRules[0] max(<<.Series>>)", b + ":externalRules[0] sum(<<.Series>>)", c + ":externalRules[0] min(<<.Series>>)"}},
		{"a removed", func() {
			if err := os.Remove(a); err != nil {
				t.Fatal(err)
			}
		}, "", []string{b + ":externalRules[0] sum(<<.Series>>)", c + ":externalRules[0] min(<<.Series>>)"}},
		{"b fixed", func() { write(t, b, ruleFile("b_total", "avg(<<.Series>>)")) }, "",
			[]string{b + ":externalRules[0] avg(<<.Series>>)", c + ":externalRules[0] min(<<.Series>>)"}},
	}
	for _, s := range steps {
		s.do()
		err := checkTwice(t, w)
		if s.wantErr == "" && err != nil || s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)) {
			t.Errorf("%s: Check error %v, want %q", s.name, err, s.wantErr)
		}
		if diff := cmp.Diff(s.want, srv.served()); diff != "" {
			t.Errorf("%s: rules in service (-want +got):\n%s", s.name, diff)
		}
	}
	if got := testutil.ToFloat64(m.ConfigReloads.WithLabelValues(metrics.OutcomeFailure)); got != 1 {
		t.Errorf("failed reloads = %v, want 1 (b broken, reported once)", got)
	}
	if got := testutil.ToFloat64(m.ConfigLastReloadSuccessful); got != 1 {
		t.Errorf("last_reload_successful = %v, want 1 once b is fixed", got)
	}
}
