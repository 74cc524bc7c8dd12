package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnknownBackends(t *testing.T) {
	const file = `rules:
- seriesQuery: '{__name__="a",namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
- seriesQuery: '{__name__="b",namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  backend: thanos
- seriesQuery: '{__name__="c",namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  backend: default
externalRules:
- seriesQuery: '{__name__="d"}'
  resources: {namespaced: false}
  backend: mimir
externalQueries:
- name: e
  query: vector(1)
  backend: vm
resourceRules:
  cpu: {containerQuery: 'sum(a)', nodeQuery: 'sum(a)', resources: {overrides: {node: {resource: node}}}}
  memory: {containerQuery: 'sum(a)', nodeQuery: 'sum(a)', resources: {overrides: {node: {resource: node}}}}
  backend: thanoss
`
	cfg, err := Parse([]byte(file), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		known []string
		want  []string
	}{{
		name:  "every name defined",
		known: []string{"thanos", "mimir", "vm", "thanoss"},
	}, {
		name:  "three unknown, each at its key",
		known: []string{"thanos"},
		want: []string{
			`rules.yaml:13:12: externalRules[0].backend: unknown backend "mimir" (defined: default, thanos) (hint: define it in --backends-config, or remove the key to use the --prometheus-* flags' backend)`,
			`rules.yaml:17:12: externalQueries[0].backend: unknown backend "vm" (defined: default, thanos) (hint: define it in --backends-config, or remove the key to use the --prometheus-* flags' backend)`,
			`rules.yaml:21:12: resourceRules.backend: unknown backend "thanoss" (defined: default, thanos) (hint: define it in --backends-config, or remove the key to use the --prometheus-* flags' backend)`,
		},
	}, {
		name: "no backends file: only default",
		want: []string{
			`rules.yaml:6:12: rules[1].backend: unknown backend "thanos" (defined: default) (hint: define it in --backends-config, or remove the key to use the --prometheus-* flags' backend)`,
			`rules.yaml:13:12: externalRules[0].backend: unknown backend "mimir" (defined: default) (hint: define it in --backends-config, or remove the key to use the --prometheus-* flags' backend)`,
			`rules.yaml:17:12: externalQueries[0].backend: unknown backend "vm" (defined: default) (hint: define it in --backends-config, or remove the key to use the --prometheus-* flags' backend)`,
			`rules.yaml:21:12: resourceRules.backend: unknown backend "thanoss" (defined: default) (hint: define it in --backends-config, or remove the key to use the --prometheus-* flags' backend)`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range cfg.UnknownBackends(tt.known) {
				got = append(got, e.Error())
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
	if got := []string{BackendOrDefault(cfg.Rules[0].Backend), BackendOrDefault(cfg.Rules[1].Backend)}; !cmp.Equal(got, []string{"default", "thanos"}) {
		t.Errorf("BackendOrDefault: %v", got)
	}
}

// A file without backend keys parses as before: every rule on the
// default backend.
func TestNoBackendKeyIsDefault(t *testing.T) {
	cfg, err := Parse([]byte("rules:\n- seriesQuery: 'a{pod!=\"\"}'\n  resources: {template: <<.Resource>>}\n"), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Rules[0].Backend; b != "" {
		t.Errorf("backend %q, want unset", b)
	}
	if errs := cfg.UnknownBackends(nil); len(errs) != 0 {
		t.Errorf("errors: %v", errs)
	}
	if _, err := Parse([]byte("rules:\n- seriesQuery: 'a'\n  backnd: x\n"), "r.yaml"); err == nil || !strings.Contains(err.Error(), "backnd") {
		t.Errorf("a misspelt key is refused: %v", err)
	}
}
