package rules

import (
	"path/filepath"
	"testing"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
)

// Every valid configuration fixture of pkg/config (prometheus-adapter's
// published examples among them) compiles against the built-in mapper, and
// every custom rule renders a query for the resources its labels name.
func TestCompileConfigFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "config", "testdata", "valid", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("no configuration fixtures in pkg/config/testdata/valid")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := config.Load(f)
			if err != nil {
				t.Fatalf("config.Load: %v", err)
			}
			rs, err := Compile(cfg, kubemapper.New())
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			for _, w := range rs.Warnings() {
				t.Logf("warning: %s", w)
			}
			for _, r := range rs.CustomRules() {
				targets := r.Resources().Overrides()
				if r.Resources().HasTemplate() {
					targets["(template)"] = pods
				}
				for l, gr := range targets {
					req := CustomRequest{Series: "some_series", Resource: gr, Names: []string{"a", "b"}}
					if gr != NamespaceResource {
						if _, err := r.LabelForResource(NamespaceResource); err == nil {
							req.Namespace = "default"
						}
					}
					q, err := r.QueryForSeries(req)
					if err != nil {
						t.Errorf("%s: query for %s (label %s): %v", r.Path(), gr, l, err)
						continue
					}
					if q.ResourceLabel == "" {
						t.Errorf("%s: query for %s has no resource label", r.Path(), gr)
					}
				}
			}
			for _, r := range rs.ExternalRules() {
				if _, err := r.QueryForExternalSeries(ExternalRequest{Series: "some_series"}); err != nil {
					t.Errorf("%s: %v", r.Path(), err)
				}
			}
		})
	}
}
