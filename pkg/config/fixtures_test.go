package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/promscaler/promscaler/test/golden"
)

func fixtures(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no fixtures in testdata/%s", dir)
	}
	return files
}

// TestValidFixtures loads prometheus-adapter's published configurations (and
// promscaler's own examples) unchanged; their warnings and query errors are
// golden files.
func TestValidFixtures(t *testing.T) {
	for _, file := range fixtures(t, "valid") {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			cfg, err := Load(file)
			if err != nil {
				t.Fatalf("Load(%s) failed:\n%v", file, err)
			}
			if n := len(cfg.Rules) + len(cfg.ExternalRules) + len(cfg.ExternalQueries); n == 0 && cfg.ResourceRules == nil {
				t.Fatalf("Load(%s) returned an empty configuration", file)
			}
			if errs := cfg.Validate(); len(errs) != 0 {
				t.Fatalf("Validate() after a successful Load: %v", errs)
			}
			var warnings string
			for _, w := range cfg.Warnings() {
				warnings += w.Error() + "\n"
			}
			for _, e := range cfg.QueryErrors() {
				warnings += "query error: " + e.Error() + "\n"
			}
			golden.Check(t, strings.TrimSuffix(file, ".yaml")+".warn", []byte(warnings))
		})
	}
}

// TestInvalidFixtures checks that each invalid configuration gives exactly
// the errors of its golden .err file, each with a position.
func TestInvalidFixtures(t *testing.T) {
	files := fixtures(t, "invalid")
	if len(files) < 30 {
		t.Errorf("only %d invalid fixtures; the suite promises at least 30", len(files))
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			cfg, err := Load(file)
			if err == nil {
				t.Fatalf("Load(%s) succeeded, want errors", file)
			}
			if cfg != nil {
				t.Errorf("Load returned a configuration along with errors")
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList", err)
			}
			for _, e := range list {
				if e.Line < 1 {
					t.Errorf("error without a line: %v", e)
				}
				if e.File != file {
					t.Errorf("error names file %q, want %q", e.File, file)
				}
			}
			golden.Check(t, strings.TrimSuffix(file, ".yaml")+".err", []byte(err.Error()+"\n"))
		})
	}
}
