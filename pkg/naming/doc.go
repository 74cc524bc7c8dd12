// Package naming compiles promscaler's configuration into rules ready for
// serving: for each discovery rule, its series filters, metric naming
// (name.matches / name.as), label <-> Kubernetes resource mapping
// (resources.overrides / resources.template) and query rendering
// (metricsQuery with << >> delimiters), plus the externalQueries and
// resourceRules renderers and the conversion of label selectors to PromQL
// label matchers.
//
// Behaviour follows prometheus-adapter's documented semantics, except that
// every value put into a query is quoted as one PromQL string literal and
// every object name joined into a regular expression is regex-escaped, so
// no label value or object name can change a query's meaning.
//
// Entry point: Compile(cfg, mapper) returns a RuleSet. Everything in this
// package is immutable after construction and safe for concurrent use.
package naming
