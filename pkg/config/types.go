// Package config owns promscaler's configuration file: the prometheus-adapter
// rule format (accepted unchanged) plus promscaler's optional additions,
// strict decoding and validation with source positions.
package config

// Config is the whole adapter configuration file. Its field names and YAML
// keys are prometheus-adapter's, so existing ConfigMaps load unchanged.
type Config struct {
	// Rules produce custom metrics (custom.metrics.k8s.io).
	Rules []DiscoveryRule `yaml:"rules,omitempty"`
	// ExternalRules produce external metrics (external.metrics.k8s.io).
	ExternalRules []DiscoveryRule `yaml:"externalRules,omitempty"`
	// ResourceRules produce resource metrics (metrics.k8s.io).
	ResourceRules *ResourceRules `yaml:"resourceRules,omitempty"`

	// ExternalQueries is a promscaler addition: external metrics served from a
	// fixed PromQL query, without discovery (prometheus-adapter#31).
	ExternalQueries []ExternalQuery `yaml:"externalQueries,omitempty"`

	// NaNAsZero is a promscaler addition: whether a sample whose value is
	// NaN (a 0/0 ratio, the quantile of an empty summary) is answered as 0,
	// as prometheus-adapter does; nil means true. false answers such a
	// sample as no value (left out of lists, 404 alone). A rule's or
	// externalQueries entry's own nanAsZero overrides it. ±Inf is never a
	// value.
	NaNAsZero *bool `yaml:"nanAsZero,omitempty"`

	// Source says where each key was written when the configuration was
	// parsed from a file (nil for configurations built in code). It is not
	// part of the file format.
	Source *Source `yaml:"-"`
}

// DiscoveryRule describes how to discover a set of metrics from Prometheus
// series and how to query them.
type DiscoveryRule struct {
	// SeriesQuery is the Prometheus series selector used for discovery.
	SeriesQuery string `yaml:"seriesQuery"`
	// SeriesFilters further filter discovered series names.
	SeriesFilters []RegexFilter `yaml:"seriesFilters,omitempty"`
	// Resources maps series labels to Kubernetes resources.
	Resources ResourceMapping `yaml:"resources,omitempty"`
	// Name maps series names to metric names.
	Name NameMapping `yaml:"name,omitempty"`
	// MetricsQuery is the Go template (with << >> delimiters) of the query
	// sent for each API request.
	MetricsQuery string `yaml:"metricsQuery,omitempty"`

	// DefaultValue is a promscaler addition: when set, a request whose query
	// returns no series for an object answers this value instead of "not
	// found" (prometheus-adapter#584). A Prometheus error is never replaced.
	DefaultValue *string `yaml:"defaultValue,omitempty"`

	// NaNAsZero is a promscaler addition overriding Config.NaNAsZero for
	// this rule; nil means the global setting.
	NaNAsZero *bool `yaml:"nanAsZero,omitempty"`

	// Backend is a promscaler addition: the name of the Prometheus-compatible
	// backend the rule discovers its series in and queries (--backends-config);
	// "" (and "default") is the backend of the --prometheus-* flags.
	Backend string `yaml:"backend,omitempty"`

	// MaxSampleAge is a promscaler addition: a Prometheus duration (e.g.
	// "2m"); a sample older than it is no value, so the request answers
	// as if the series had none. Empty means the backend's
	// (--prometheus-max-sample-age, max_sample_age; off by default).
	MaxSampleAge string `yaml:"maxSampleAge,omitempty"`
}

// RegexFilter keeps series whose name matches Is, or drops those matching
// IsNot. Exactly one of the two is set.
type RegexFilter struct {
	// Is keeps the series whose name matches this regular expression.
	Is string `yaml:"is,omitempty"`
	// IsNot drops the series whose name matches this regular expression.
	IsNot string `yaml:"isNot,omitempty"`
}

// ResourceMapping maps series labels to Kubernetes group-resources.
type ResourceMapping struct {
	// Template is a Go template over .Group and .Resource producing a label
	// name, e.g. "kube_<<.Resource>>".
	Template string `yaml:"template,omitempty"`
	// Overrides maps a label name to a group-resource.
	Overrides map[string]GroupResource `yaml:"overrides,omitempty"`
	// Namespaced, for external rules, says whether the namespace of the
	// request is applied as a matcher. nil means true.
	Namespaced *bool `yaml:"namespaced,omitempty"`
}

// GroupResource names a Kubernetes resource; Group "" is the core group.
type GroupResource struct {
	// Group is the API group, e.g. "apps"; "" for the core group.
	Group string `yaml:"group,omitempty"`
	// Resource is the resource, singular or plural ("pod" or "pods").
	Resource string `yaml:"resource"`
}

// NameMapping turns a series name into a metric name.
type NameMapping struct {
	// Matches is a regular expression over the series name; empty means ".*".
	Matches string `yaml:"matches,omitempty"`
	// As is the Go regexp expansion template; empty means "$0" without a
	// capture group and "$1" with one.
	As string `yaml:"as,omitempty"`
}

// ResourceRules configure resource metrics (CPU and memory).
type ResourceRules struct {
	// CPU serves CPU usage, in cores.
	CPU ResourceRule `yaml:"cpu"`
	// Memory serves memory usage, in bytes.
	Memory ResourceRule `yaml:"memory"`
	// Window is the Prometheus duration (e.g. "5m") handed to the templates
	// as .Window and reported as the API window.
	Window string `yaml:"window,omitempty"`
	// Backend is a promscaler addition: the backend the CPU and memory
	// queries are sent to, as DiscoveryRule.Backend.
	Backend string `yaml:"backend,omitempty"`
}

// ResourceRule configures one resource (CPU or memory).
type ResourceRule struct {
	// ContainerQuery is the query template for the containers of pods.
	ContainerQuery string `yaml:"containerQuery"`
	// NodeQuery is the query template for nodes.
	NodeQuery string `yaml:"nodeQuery"`
	// Resources maps series labels to nodes, namespaces and pods.
	Resources ResourceMapping `yaml:"resources"`
	// ContainerLabel is the label holding the container name.
	ContainerLabel string `yaml:"containerLabel,omitempty"`
}

// ExternalQuery is a promscaler addition: an external metric answered by a
// fixed PromQL template, with no discovery.
type ExternalQuery struct {
	// Name is the external metric name served.
	Name string `yaml:"name"`
	// Query is a PromQL template; it may use <<.LabelMatchers>> (the
	// request's label selector, plus the namespace matcher when namespaced)
	// and the other rendering variables.
	Query string `yaml:"query"`
	// Namespaced says whether the request namespace is added as a
	// `namespace` matcher; nil means false.
	Namespaced *bool `yaml:"namespaced,omitempty"`
	// NamespaceLabel is the label carrying the namespace; default "namespace".
	NamespaceLabel string `yaml:"namespaceLabel,omitempty"`
	// DefaultValue, when set, is answered when the query returns nothing.
	DefaultValue *string `yaml:"defaultValue,omitempty"`
	// NaNAsZero overrides Config.NaNAsZero for this entry; nil means the
	// global setting.
	NaNAsZero *bool `yaml:"nanAsZero,omitempty"`
	// Backend is the backend the query is sent to, as DiscoveryRule.Backend.
	Backend string `yaml:"backend,omitempty"`
	// MaxSampleAge is as DiscoveryRule.MaxSampleAge.
	MaxSampleAge string `yaml:"maxSampleAge,omitempty"`
}

// NaNIsZero resolves a rule's or externalQueries entry's nanAsZero
// (own, may be nil) against the global one: whether a NaN sample is
// answered as 0.
func (c *Config) NaNIsZero(own *bool) bool {
	switch {
	case own != nil:
		return *own
	case c != nil && c.NaNAsZero != nil:
		return *c.NaNAsZero
	default:
		return true
	}
}
