package reload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/rules"
)

// TestEmptiedRulesReload: issue 32 item 5. A reload that takes the
// configuration from some rules to none (a truncated file, a comment-only
// file, a directory emptied) is refused unless allowed, and is reported and
// counted either way; an empty configuration at start stays valid.
func TestEmptiedRulesReload(t *testing.T) {
	rule := ruleFile("queue_depth", "sum(<<.Series>>{<<.LabelMatchers>>})")
	tests := []struct {
		name  string
		start string // the file's content at start
		// empty empties the configuration in dir (file: dir/config.yaml).
		empty func(t *testing.T, file string)
		allow bool
		// wantRules: rules in service after; wantOutcome: the emptied
		// counter's outcome incremented ("" none).
		wantRules   int
		wantOutcome string
	}{
		{name: "truncated", start: rule, empty: func(t *testing.T, f string) { write(t, f, "") }, wantRules: 1, wantOutcome: emptiedRefused},
		{name: "comment only", start: rule, empty: func(t *testing.T, f string) { write(t, f, "# emptied\n") }, wantRules: 1, wantOutcome: emptiedRefused},
		{name: "empty lists", start: rule, empty: func(t *testing.T, f string) { write(t, f, "rules: []\nexternalRules: []\n") }, wantRules: 1, wantOutcome: emptiedRefused},
		{name: "directory emptied", start: rule, empty: removeFile, wantRules: 1, wantOutcome: emptiedRefused},
		{name: "truncated, allowed", start: rule, allow: true, empty: func(t *testing.T, f string) { write(t, f, "") }, wantRules: 0, wantOutcome: emptiedApplied},
		{name: "directory emptied, allowed", start: rule, allow: true, empty: removeFile, wantRules: 0, wantOutcome: emptiedApplied},
		{name: "empty at start, still empty", start: "# nothing yet\n", empty: func(t *testing.T, f string) { write(t, f, "") }, wantRules: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "config.yaml")
			write(t, file, tt.start)
			var reports []error
			srv, m, w := startWatcherWith(t, Config{Sources: []string{dir}, AllowEmptyRules: tt.allow,
				Report: func(_ string, err error) { reports = append(reports, err) }})
			tt.empty(t, file)
			err := checkTwice(t, w)
			if got := len(srv.set.ExternalRules()); got != tt.wantRules {
				t.Errorf("rules in service = %d, want %d (reload error: %v)", got, tt.wantRules, err)
			}
			for _, o := range []string{emptiedRefused, emptiedApplied} {
				want := 0.0
				if o == tt.wantOutcome {
					want = 1
				}
				if got := testutil.ToFloat64(w.emptied.WithLabelValues(o)); got != want {
					t.Errorf("config_rules_emptied_total{outcome=%q} = %v, want %v", o, got, want)
				}
			}
			reported := len(reports) == 1 && errors.Is(reports[0], ErrRulesEmptied)
			if reported != (tt.wantOutcome != "") {
				t.Errorf("reports = %v; want one wrapping ErrRulesEmptied: %v", reports, tt.wantOutcome != "")
			}
			refused := tt.wantOutcome == emptiedRefused
			if got := testutil.ToFloat64(m.ConfigLastReloadSuccessful) == 0; got != refused {
				t.Errorf("last reload failed: %v, want %v", got, refused)
			}
		})
	}
}

func removeFile(t *testing.T, f string) {
	t.Helper()
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
}

// startWatcherWith is startWatcher with cfg's sources, report and flags.
func startWatcherWith(t *testing.T, cfg Config) (*server, *metrics.Metrics, *Watcher) {
	t.Helper()
	files, err := rules.Read(cfg.Sources)
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{}
	if err := srv.apply(context.Background(), files, ""); err != nil {
		t.Fatal(err)
	}
	cfg.Apply, cfg.Metrics = srv.apply, metrics.New()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Prime(files)
	return srv, cfg.Metrics, w
}
