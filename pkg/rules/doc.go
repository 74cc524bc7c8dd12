// Package naming compiles promscaler's configuration into rules ready for
// serving: for each discovery rule, its series filters, metric naming
// (name.matches / name.as), label <-> Kubernetes resource mapping
// (resources.overrides / resources.template) and query rendering
// (metricsQuery with << >> delimiters), plus the externalQueries and
// resourceRules renderers and the conversion of label selectors to PromQL
// label matchers.
//
// Entry point: Compile(cfg, mapper) returns a RuleSet. Everything in this
// package is immutable after construction (apart from memoised label
// resolutions) and safe for concurrent use.
//
// # Semantics
//
// Behaviour follows prometheus-adapter's documented semantics:
//
//   - A series is kept when it passes every seriesFilters entry in order
//     and matches name.matches (when set); its metric name is name.as
//     expanded with regexp.Regexp.ExpandString ($1, ${1}_per_second, named
//     groups); as defaults to $0 without a capture group, $1 with one.
//   - A label maps to a resource through an override, else through the
//     template: "kube_<<.Group>>_<<.Resource>>" recognises
//     kube_apps_deployment and kube_networking_k8s_io_ingress (groups are
//     written with "." and "-" as "_"; resources singular), resolved
//     through the RESTMapper. A series is namespaced when one of its labels
//     maps to namespaces.
//   - .LabelMatchers of a custom query is the metric selector's matchers
//     (sorted by label), then namespace="ns", then the resource matcher:
//     label="name" for one object, label=~"a|b" for several. With
//     CustomRequest.AllObjects there is no resource matcher (label!="" is
//     costly in Prometheus), unless no other matcher requires a value, in
//     which case it is label!="" so that .LabelMatchers is never empty.
//     .GroupBy is the resource's label. External
//     queries have the selector matchers then, for namespaced rules, the
//     namespace matcher, and an empty .GroupBy.
//
// Rule.SharedQuery renders a custom rule's query for every object of a
// namespaced resource in every namespace, grouped by the namespace and
// resource labels, so that one query answers many requests; Rule.Sharing
// (with SharedEquivalent, over the parsed PromQL) says whether slicing that
// answer is provably what the per-request query answers, or why not.
//
// It differs where prometheus-adapter is unsafe:
//
//   - Every value is rendered as one PromQL string literal (Go/PromQL
//     escaping), and every value joined into a regular expression of
//     .LabelMatchers (object names, "in"/"notin" values) is escaped with
//     regexp.QuoteMeta, so no label value, namespace or object name can
//     change a query's meaning.
//   - .LabelValuesByName values are, as in prometheus-adapter, the
//     requested values joined with "|", not regex-escaped (so that
//     deployment="<<index .LabelValuesByName "deployment">>" finds
//     "api.v2"), only escaped for use between double quotes; with
//     AllObjects the resource label's entry is ".+".
//   - Label names are validated as Prometheus label names, series names as
//     classic metric names; selector operators gt and lt are refused with
//     ErrUnsupportedOperator.
package rules
