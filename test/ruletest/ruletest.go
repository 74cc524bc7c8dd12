// Package ruletest compiles rules files for tests: a YAML configuration
// parsed as test.yaml and compiled with the built-in RESTMapper of the
// standard resources, failing the test on any error.
package ruletest

import (
	"testing"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/rules"
)

// Compile parses yml as test.yaml and compiles it with kubemapper's mapper.
func Compile(t testing.TB, yml string) *rules.RuleSet {
	t.Helper()
	cfg, err := config.Parse([]byte(yml), "test.yaml")
	if err != nil {
		t.Fatalf("parsing config: %v", err)
	}
	rs, err := rules.Compile(cfg, kubemapper.New())
	if err != nil {
		t.Fatalf("compiling config: %v", err)
	}
	return rs
}
