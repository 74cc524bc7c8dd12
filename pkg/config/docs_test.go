package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocExamples keeps docs/config.md honest: every complete YAML example
// in it (a block starting with a top-level section) loads.
func TestDocExamples(t *testing.T) {
	data, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1)
	top := regexp.MustCompile(`^(rules|externalRules|resourceRules|externalQueries):`)
	n := 0
	for _, b := range blocks {
		example := b[1]
		if !top.MatchString(example) {
			continue
		}
		n++
		first, _, _ := strings.Cut(example, "\n")
		t.Run(first, func(t *testing.T) {
			if _, err := Parse([]byte(example), "docs/config.md"); err != nil {
				t.Errorf("example does not load:\n%s\n%v", example, err)
			}
		})
	}
	if n < 4 {
		t.Errorf("found %d complete examples in docs/config.md, want at least 4", n)
	}
}
