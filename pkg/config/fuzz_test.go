package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gopkg.in/yaml.v3"
)

// FuzzParse checks that Parse never panics, that a failure is always a
// non-empty ErrorList of described problems, and that a configuration that
// parses validates again identically, also after a round trip through YAML.
// Seeds: every fixture under testdata/valid and testdata/invalid (plus the
// corpus under testdata/fuzz/FuzzParse).
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"valid", "invalid"} {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if cfg != nil {
				t.Fatal("Parse returned a configuration along with an error")
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is not a non-empty ErrorList: %#v", err)
			}
			for _, e := range list {
				if e == nil || e.Msg == "" {
					t.Fatalf("empty problem in %v", list)
				}
			}
			return
		}
		if errs := cfg.Validate(); len(errs) != 0 {
			t.Fatalf("Parse succeeded but Validate reports:\n%v", errs)
		}
		for _, e := range cfg.QueryErrors() {
			if e.Msg == "" || e.Path == "" || e.Line < 1 {
				t.Fatalf("query error without a message, path or line: %#v", e)
			}
		}
		w1, w2 := cfg.Warnings(), cfg.Warnings()
		if diff := cmp.Diff(w1, w2); diff != "" {
			t.Fatalf("Warnings() is not deterministic:\n%s", diff)
		}

		// Written back as YAML, the configuration parses to the same values.
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshalling a parsed configuration: %v", err)
		}
		again, err := Parse(out, "again.yaml")
		if err != nil {
			var raw any
			if yaml.Unmarshal(out, &raw) != nil {
				// yaml.v3 itself cannot read back what it wrote: a string
				// whose first line starts with one space and which ends in
				// a newline (" 0\n") is written as a block scalar with an
				// indentation indicator it then refuses. The encoder's bug,
				// not the parser's; the configuration is never marshalled
				// outside tests.
				return
			}
			t.Fatalf("re-parsing the marshalled configuration failed:\n%v\n--- marshalled:\n%s", err, out)
		}
		if diff := cmp.Diff(cfg, again, cmpopts.IgnoreFields(Config{}, "Source"), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the configuration (-first +again):\n%s", diff)
		}
	})
}
