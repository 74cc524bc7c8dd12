// Package resourcetest holds fixtures shared by the resource metrics tests:
// the unit tests of pkg/resourcemetrics (against a fake Prometheus) and the
// end-to-end tests (against a real one) read the same rules.
package resourcetest

import "fmt"

// CAdvisorRules returns prometheus-adapter's documented resourceRules over
// cAdvisor series (container_cpu_usage_seconds_total and
// container_memory_working_set_bytes; node totals are the series with
// id="/"), with the given window (a Prometheus duration such as "5m"). The
// text ends with the line "  window: <window>".
func CAdvisorRules(window string) string {
	return fmt.Sprintf(`
resourceRules:
  cpu:
    containerQuery: sum(rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>, container!=""}[<<.Window>>])) by (<<.GroupBy>>)
    nodeQuery: sum(rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>, id="/"}[<<.Window>>])) by (<<.GroupBy>>)
    resources:
      overrides:
        node: {resource: node}
        namespace: {resource: namespace}
        pod: {resource: pod}
    containerLabel: container
  memory:
    containerQuery: sum(container_memory_working_set_bytes{<<.LabelMatchers>>, container!=""}) by (<<.GroupBy>>)
    nodeQuery: sum(container_memory_working_set_bytes{<<.LabelMatchers>>, id="/"}) by (<<.GroupBy>>)
    resources:
      overrides:
        node: {resource: node}
        namespace: {resource: namespace}
        pod: {resource: pod}
    containerLabel: container
  window: %s
`, window)
}
