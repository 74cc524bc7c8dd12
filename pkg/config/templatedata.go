package config

// The variables a query template may use. They are part of the file format:
// validation executes every template against these types so that a reference
// to an unknown variable is reported at load time, and pkg/rules renders
// with exactly these types.

// QueryTemplateData is what a rule's metricsQuery (and the resource rules'
// containerQuery/nodeQuery, and externalQueries' query) is rendered with.
type QueryTemplateData struct {
	// Series is the series name, e.g. "http_requests_total".
	Series string
	// LabelMatchers is the comma-separated PromQL matchers of the request:
	// metric-selector matchers, then namespace, then the resource matcher.
	LabelMatchers string
	// LabelValuesByName maps a label name to its requested values joined by
	// "|", as requested (not regex-escaped, as in prometheus-adapter), e.g.
	// {"pod": "a|b", "deployment": "api.v2"}.
	LabelValuesByName map[string]string
	// GroupBy is the comma-separated labels to group by, e.g. "pod".
	GroupBy string
	// GroupBySlice is GroupBy as a slice.
	GroupBySlice []string
	// Window is the resource rules' window (e.g. "5m"); empty elsewhere.
	Window string
}

// ResourceTemplateData is what resources.template is rendered with.
type ResourceTemplateData struct {
	// Group is the API group, "" for the core group.
	Group string
	// Resource is the singular resource name, e.g. "pod".
	Resource string
}
