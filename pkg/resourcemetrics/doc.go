// Package resourcemetrics serves the resource metrics API (metrics.k8s.io
// v1beta1: PodMetrics and NodeMetrics, what `kubectl top` and the HPA's
// `type: Resource` metrics read) from Prometheus, as metrics-server would
// from kubelets.
//
// The pieces, each usable on its own:
//
//   - Source renders the configuration's resourceRules (containerQuery,
//     nodeQuery, through pkg/rules, with .Window) and turns the Prometheus
//     answers into PodMetrics and NodeMetrics: one CPU and one memory query
//     per namespace, run in parallel, samples grouped by pod and container
//     in the adapter.
//   - The pods (Running only) and nodes reported are read from the
//     adapter's object cache (objectcache.Cache, through Objects), which
//     the custom metrics path lists from too: one watch of each, and no
//     request lists from the API server.
//   - API holds the REST storage of podmetrics and nodemetrics (get, list,
//     label and field selectors, table output) and installs the group on a
//     generic API server; OpenAPIDefinitions and SetOpenAPIConfig provide the
//     OpenAPI models the API server needs for it.
//
// What is reported follows metrics-server; see docs/resource-metrics.md for
// the rules (pods missing a container's sample are left out, invalid samples
// skip their container, and so on).
package resourcemetrics
