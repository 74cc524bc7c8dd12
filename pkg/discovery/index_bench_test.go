package discovery

import (
	"fmt"
	"testing"

	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/ruletest"
)

// benchSeries returns rows for the seed rule: pods pods spread over
// namespaces namespaces.
func benchSeries(pods, namespaces int) []rules.Series {
	out := make([]rules.Series, 0, pods)
	for i := range pods {
		out = append(out, ser("pm_status",
			"namespace", fmt.Sprintf("ns-%d", i%namespaces),
			"pod_name", fmt.Sprintf("pod-%d", i),
			"state", "active processes"))
	}
	return out
}

func BenchmarkBuildIndex(b *testing.B) {
	rs := ruletest.Compile(b, seedConfig)
	for _, n := range []int{1_000, 100_000} {
		in := []RuleSeries{{Rule: rs.CustomRules()[0], Series: benchSeries(n, 100)}}
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				BuildIndex(in, IndexOptions{})
			}
		})
	}
}

func BenchmarkIndexCustom(b *testing.B) {
	rs := ruletest.Compile(b, seedConfig)
	x := BuildIndex([]RuleSeries{{Rule: rs.CustomRules()[0], Series: benchSeries(10_000, 1_000)}}, IndexOptions{})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := x.Custom(pods, "ns-500", "fpm_active_rate"); !ok {
			b.Fatal("not found")
		}
	}
}
