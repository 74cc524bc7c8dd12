package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
)

// Each compiled rule, externalQueries entry and resourceRules knows its
// backend; without the key it is the default backend.
func TestCompiledBackends(t *testing.T) {
	cfg, err := config.Parse([]byte(`rules:
- seriesQuery: 'a{namespace!="",pod!=""}'
  resources: {template: <<.Resource>>}
- seriesQuery: 'b{namespace!="",pod!=""}'
  resources: {template: <<.Resource>>}
  backend: thanos
externalRules:
- seriesQuery: 'c'
  resources: {namespaced: false}
  backend: mimir
externalQueries:
- {name: d, query: vector(1)}
- {name: e, query: vector(1), backend: vm}
resourceRules:
  cpu: {containerQuery: 'sum(a)', nodeQuery: 'sum(a)', resources: {overrides: {node: {resource: node}}}}
  memory: {containerQuery: 'sum(a)', nodeQuery: 'sum(a)', resources: {overrides: {node: {resource: node}}}}
`), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Compile(cfg, kubemapper.New())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{"resourceRules": rs.ResourceRules().Backend()}
	for _, r := range rs.Rules() {
		got[r.Path()] = r.Backend()
	}
	for _, q := range rs.ExternalQueries() {
		got[q.Path()] = q.Backend()
	}
	want := map[string]string{
		"rules[0]": "default", "rules[1]": "thanos", "externalRules[0]": "mimir",
		"externalQueries[0]": "default", "externalQueries[1]": "vm", "resourceRules": "default",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("backends (-want +got):\n%s", d)
	}
}
