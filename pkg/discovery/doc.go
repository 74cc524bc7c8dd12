// Package discovery finds which metrics the adapter serves: it runs each
// rule's seriesQuery against Prometheus once at start and then every relist
// interval (Discoverer), and builds from the answers an immutable Index of
// (API, group-resource, namespace, metric) -> (rule, series name), published
// atomically so request goroutines never see a half-built index and never
// wait for discovery.
//
// BuildIndex is the pure part: series per rule in, Index out. It is what the
// offline tools (adapter check-config, adapter explain) use on a saved
// /api/v1/series answer, with MatchSeries deciding which saved series each
// rule's seriesQuery selects.
//
// When two rules produce the same metric for the same resource (and
// namespace), the last rule in configuration order wins, as in
// prometheus-adapter (custom rules and external rules are ordered
// separately; within one rule, the largest series name wins); every such
// case is reported by Index.Conflicts, naming both rules.
package discovery
