package rules_test

import (
	"fmt"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/rules"
)

// Discovery and query rendering for the fpm example: a series is filtered,
// named, mapped to resources, and a request for two pods renders PromQL.
func Example() {
	cfg := &config.Config{Rules: []config.DiscoveryRule{{
		SeriesQuery: `{__name__="pm_status",namespace!="",pod_name!="",state="active processes"}`,
		Resources: config.ResourceMapping{Overrides: map[string]config.GroupResource{
			"namespace": {Resource: "namespace"},
			"pod_name":  {Resource: "pod"},
		}},
		Name:         config.NameMapping{As: "fpm_active_rate"},
		MetricsQuery: `sum(max_over_time(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)`,
	}}}
	rs, err := rules.Compile(cfg, kubemapper.New())
	if err != nil {
		fmt.Println(err)
		return
	}
	rule := rs.CustomRules()[0]

	series := rules.SeriesFromLabelSet(model.LabelSet{"__name__": "pm_status", "namespace": "abtest", "pod_name": "a"})
	metric, _ := rule.MetricNameForSeries(series.Name)
	resources, namespaced := rule.ResourcesForSeries(series.Labels)
	fmt.Println(rule.Path(), rule.KeepSeries(series.Name), metric, resources, namespaced)

	q, err := rule.QueryForSeries(rules.CustomRequest{
		Series:    series.Name,
		Resource:  schema.GroupResource{Resource: "pods"},
		Namespace: "abtest",
		Names:     []string{"a", "b"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(q.Expr)
	fmt.Println(q.ResourceLabel, q.NamespaceLabel)
	// Output:
	// rules[0] true fpm_active_rate [namespaces pods] true
	// sum(max_over_time(pm_status{namespace="abtest",pod_name=~"a|b"}[2m])) by (pod_name)
	// pod_name namespace
}
