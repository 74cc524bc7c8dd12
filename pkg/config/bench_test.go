package config

import (
	"os"
	"testing"
)

// BenchmarkParse measures loading the Helm chart's default rules, a typical
// configuration (run on every reload of the ConfigMap).
func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("testdata/valid/helm-chart-default-rules.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, "config.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
