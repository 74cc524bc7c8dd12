package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestListFiles(t *testing.T) {
	dir := t.TempDir()
	mk := func(rel, content string) string {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	single := mk("single.yaml", "")
	// A ConfigMap volume: keys are links into ..data, itself a link to a
	// hidden versioned directory.
	cm := filepath.Join(dir, "cm")
	mk("cm/..2026_12_01/b.yaml", "")
	mk("cm/..2026_12_01/a.yaml", "")
	mk("cm/..2026_12_01/notes.txt", "")
	for _, l := range [][2]string{{"..2026_12_01", "..data"}, {"..data/b.yaml", "b.yaml"}, {"..data/a.yaml", "a.yaml"}, {"..data/notes.txt", "notes.txt"}} {
		if err := os.Symlink(l[0], filepath.Join(cm, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(cm, "sub.yaml"), 0o755); err != nil { // a directory is not a file
		t.Fatal(err)
	}
	got, err := ListFiles([]string{single, cm, single, filepath.Join(cm, "a.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{single, filepath.Join(cm, "a.yaml"), filepath.Join(cm, "b.yaml")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListFiles (-want +got):\n%s", diff)
	}
	missing := filepath.Join(dir, "nope.yaml")
	if _, err := ListFiles([]string{single, missing}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing source: error %v, want one naming it", err)
	}
}
