package discovery

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/rules"
)

// RuleSeries is the input of one rule to BuildIndex: the rule and the series
// (or grouped rows: a series name and a subset of its labels) that matched
// its seriesQuery. BuildIndex applies the rule's seriesFilters and
// name.matches itself.
//
// Only label names matter for resource mapping, and only the value of the
// rule's namespace label (see rules.ResourceMapper.LabelForResource) is read,
// so rows carrying just __name__ and the rule's resource labels give the same
// index as full series.
type RuleSeries struct {
	Rule   *rules.Rule
	Series []rules.Series
}

// Entry is what a lookup returns: the rule serving a metric and the
// Prometheus series name to render its metricsQuery with
// (rules.CustomRequest.Series / rules.ExternalRequest.Series).
type Entry struct {
	Rule       *rules.Rule
	SeriesName string
}

// String renders the entry as `rules[0] (series "pm_status")`.
func (e Entry) String() string {
	if e.Rule == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s (series %q)", e.Rule.Path(), e.SeriesName)
}

// Candidate is one (rule, series name) producing a metric for a resource,
// and the namespaces where it does so.
type Candidate struct {
	Entry
	// Namespaces lists, sorted, the namespaces where series of this
	// candidate exist. It is nil for cluster-wide entries (custom metrics of
	// cluster-scoped resources or of series without a namespace label, and
	// external metrics of rules with resources.namespaced: false).
	Namespaces []string
}

// servesNamespace reports whether the candidate answers for namespace ns
// ("" asks for a cluster-wide entry).
func (c *Candidate) servesNamespace(ns string, namespaced bool) bool {
	if !namespaced {
		return true
	}
	_, ok := slices.BinarySearch(c.Namespaces, ns)
	return ok
}

// Conflict reports two (rule, series) pairs producing the same metric for
// the same resource in the same scope. The winner is the last rule in
// configuration order, as in prometheus-adapter (for series of one rule,
// the largest series name, the last in Prometheus' answer); the other is
// shadowed there.
type Conflict struct {
	// API is rules.CustomMetricsAPI or rules.ExternalMetricsAPI.
	API string
	// GroupResource is the resource (empty for external metrics).
	GroupResource schema.GroupResource
	// Namespaced tells whether the conflicting entries are per namespace.
	Namespaced bool
	// Metric is the API metric name.
	Metric string
	// Winner serves the metric; Shadowed is hidden by it.
	Winner, Shadowed Entry
	// Namespaces lists, sorted, where both produce the metric (nil when
	// not Namespaced).
	Namespaces []string
}

// String describes the conflict for a log line.
func (c Conflict) String() string {
	what := c.Metric
	if c.API == rules.CustomMetricsAPI {
		what = fmt.Sprintf("%s for %s", c.Metric, c.GroupResource.String())
	}
	where := "cluster-wide"
	if c.Namespaced {
		where = "in namespaces " + summarize(c.Namespaces, 5)
	}
	return fmt.Sprintf("%s metric %s is produced by %s and %s %s; %s wins", c.API, what, c.Winner, c.Shadowed, where, c.Winner.Rule.Path())
}

// customKey is the scope of a custom metric: prometheus-adapter's
// provider.CustomMetricInfo.
type customKey struct {
	gr         schema.GroupResource
	namespaced bool
	metric     string
}

// Index is the result of one discovery: which (rule, series) serves each
// (API, group-resource, namespace, metric). It is immutable once built and
// safe for concurrent use; lookups do not allocate.
type Index struct {
	custom        map[customKey][]Candidate
	external      map[string][]Candidate // metric -> candidates
	customInfos   []provider.CustomMetricInfo
	externalInfos []provider.ExternalMetricInfo
	// unscoped: metric -> entries of namespaced external rules whose
	// series carry no namespace, which therefore serve no request.
	unscoped    map[string][]Entry
	conflicts   []Conflict
	ruleMetrics map[string]int
	refused     []RefusedRule
}

// DefaultMaxTeamRuleMetrics bounds the distinct metric names one team rule
// (rules.Rule.Tenant) may produce (IndexOptions.MaxTeamRuleMetrics): a
// team's rule names a few metrics; one whose seriesQuery and name.matches
// take everything (a {__name__=~".+"} rule listed 20,095 metrics, a
// 2.4 MB discovery document) serves none.
const DefaultMaxTeamRuleMetrics = 100

// RefusedRule is a team rule that produced more distinct metric names than
// the limit in one discovery: it serves none of them.
type RefusedRule struct {
	Rule           *rules.Rule
	Metrics, Limit int
}

// Error implements error: the rule, its count and the limit.
func (r RefusedRule) Error() string {
	return fmt.Sprintf("team rule %s produces %d metrics, more than the limit of %d metrics per team rule (--team-rules-max-metrics-per-rule): it serves none (narrow its seriesQuery or name.matches)",
		r.Rule.Path(), r.Metrics, r.Limit)
}

// RefusedRules returns the team rules refused for producing too many
// metrics, in the order of BuildIndex's input.
func (x *Index) RefusedRules() []RefusedRule { return slices.Clone(x.refused) }

// EmptyIndex returns an index serving nothing.
func EmptyIndex() *Index {
	return &Index{custom: map[customKey][]Candidate{}, external: map[string][]Candidate{}, ruleMetrics: map[string]int{}}
}

// Custom returns the entry serving metric for objects of gr in namespace
// ("" for cluster-scoped objects and for namespaces themselves), with the
// same scope rule as custom-metrics-apiserver's CustomMetricInfo.Namespaced
// (namespace != ""). It reports false when no rule produces the metric for
// gr in that scope.
//
// In a namespace where discovery saw no series of the metric yet (a
// workload deployed into a new namespace since the last relist), the
// winning candidate (the last rule in configuration order) serves it: the
// query tells whether values exist, as in prometheus-adapter, whose
// discovery is per metric and not per namespace. Where discovery did see
// series, the winning candidate having series there serves it.
func (x *Index) Custom(gr schema.GroupResource, namespace, metric string) (Entry, bool) {
	k := customKey{gr: gr, namespaced: namespace != "", metric: metric}
	return pick(x.custom[k], namespace, k.namespaced)
}

// pick returns the first candidate (winner order) with series in
// namespace, else the first that may serve it: a team rule (see
// rules.Rule.ServesNamespace) never serves another namespace, not even
// one without discovered series.
func pick(cs []Candidate, namespace string, namespaced bool) (Entry, bool) {
	for i := range cs {
		if cs[i].Rule.ServesNamespace(namespace) && cs[i].servesNamespace(namespace, namespaced && cs[i].Rule.Namespaced()) {
			return cs[i].Entry, true
		}
	}
	for i := range cs {
		if cs[i].Rule.ServesNamespace(namespace) {
			return cs[i].Entry, true
		}
	}
	return Entry{}, false
}

// CustomCandidates returns every (rule, series) producing metric for gr in
// the given scope, the winner first (the last rule in configuration order
// first). Tools use it to
// explain shadowing; the provider uses Custom.
func (x *Index) CustomCandidates(gr schema.GroupResource, namespaced bool, metric string) []Candidate {
	return slices.Clone(x.custom[customKey{gr: gr, namespaced: namespaced, metric: metric}])
}

// External returns the entry serving external metric for a request in
// namespace: the last rule in configuration order that is not namespaced
// (resources.namespaced: false) or has series of the metric in namespace;
// in a namespace where discovery saw no series of the metric yet, the last
// rule producing it (see Custom).
func (x *Index) External(namespace, metric string) (Entry, bool) {
	return pick(x.external[metric], namespace, true)
}

// ExternalCandidates returns every (rule, series) producing external metric,
// the winner first (the last rule in configuration order first).
func (x *Index) ExternalCandidates(metric string) []Candidate {
	return slices.Clone(x.external[metric])
}

// ExternalUnscoped returns the entries of namespaced external rules
// (resources.namespaced true, the default) that discovered external metric
// in series carrying no namespace label, in configuration order: such a
// rule answers no request, because each request is in a namespace and its
// series are in none. Used to say why a metric is not served.
func (x *Index) ExternalUnscoped(metric string) []Entry {
	return slices.Clone(x.unscoped[metric])
}

// CustomMetrics returns every custom metric the index serves, sorted (by
// group, resource, metric, cluster-wide first). The slice is shared: do not
// modify it. A namespaced metric is listed when it exists in at least one
// namespace.
func (x *Index) CustomMetrics() []provider.CustomMetricInfo { return x.customInfos }

// ExternalMetrics returns every external metric the index serves, sorted by
// name. The slice is shared: do not modify it.
func (x *Index) ExternalMetrics() []provider.ExternalMetricInfo { return x.externalInfos }

// Conflicts returns the conflicts found while building the index, sorted
// by API, resource, metric and rules.
func (x *Index) Conflicts() []Conflict { return slices.Clone(x.conflicts) }

// ConflictCount returns the number of distinct (resource, metric) pairs
// with at least one conflict, for api (rules.CustomMetricsAPI or
// rules.ExternalMetricsAPI).
func (x *Index) ConflictCount(api string) int {
	n := 0
	for i, c := range x.conflicts {
		if c.API != api {
			continue
		}
		if i > 0 {
			p := x.conflicts[i-1]
			if p.API == c.API && p.GroupResource == c.GroupResource && p.Metric == c.Metric {
				continue
			}
		}
		n++
	}
	return n
}

// RuleMetrics returns how many distinct metrics (per resource and scope for
// custom rules) the rule with the given path ("rules[0]") produces in the
// index, shadowed or not.
func (x *Index) RuleMetrics(path string) int { return x.ruleMetrics[path] }

// Scoper tells whether a group-resource is cluster-scoped. Custom metrics of
// cluster-scoped resources are served without a namespace even when their
// series carry a namespace label (node-exporter series scraped from a pod).
type Scoper interface {
	ClusterScoped(gr schema.GroupResource) bool
}

// defaultClusterScoped are the resources prometheus-adapter treats as
// cluster-scoped; DefaultScoper also answers for namespaces.
var defaultClusterScoped = map[schema.GroupResource]bool{
	{Resource: "namespaces"}:        true,
	{Resource: "nodes"}:             true,
	{Resource: "persistentvolumes"}: true,
}

// DefaultScoper knows the core cluster-scoped resources (namespaces, nodes,
// persistentvolumes), as prometheus-adapter does. Prefer MapperScoper,
// which also knows cluster-scoped custom resources.
type DefaultScoper struct{}

// ClusterScoped implements Scoper.
func (DefaultScoper) ClusterScoped(gr schema.GroupResource) bool { return defaultClusterScoped[gr] }

// MapperScoper asks a RESTMapper for a resource's scope, falling back to
// DefaultScoper for resources the mapper does not know.
type MapperScoper struct {
	Mapper meta.RESTMapper
}

// ClusterScoped implements Scoper.
func (m MapperScoper) ClusterScoped(gr schema.GroupResource) bool {
	if m.Mapper == nil {
		return DefaultScoper{}.ClusterScoped(gr)
	}
	gvk, err := m.Mapper.KindFor(gr.WithVersion(""))
	if err != nil {
		return DefaultScoper{}.ClusterScoped(gr)
	}
	mapping, err := m.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return DefaultScoper{}.ClusterScoped(gr)
	}
	return mapping.Scope.Name() == meta.RESTScopeNameRoot
}

// IndexOptions tune BuildIndex.
type IndexOptions struct {
	// Scoper decides which resources are cluster-scoped; nil means
	// DefaultScoper.
	Scoper Scoper
	// MaxTeamRuleMetrics bounds the distinct metric names of one team
	// rule; one producing more serves none (Index.RefusedRules). 0 means
	// DefaultMaxTeamRuleMetrics; negative, no bound.
	MaxTeamRuleMetrics int
}

// candidateBuilder accumulates one candidate's namespaces.
type candidateBuilder struct {
	rule       *rules.Rule
	series     string
	namespaces map[string]struct{}
}

type builder struct {
	maxTeam  int
	refused  []RefusedRule
	scoper   Scoper
	scopes   map[schema.GroupResource]bool
	custom   map[customKey]map[candKey]*candidateBuilder
	external map[string]map[candKey]*candidateBuilder
}

type candKey struct {
	rule   *rules.Rule
	series string
}

// nameResult memoises a rule's naming of one series name.
type nameResult struct {
	metric string
	ok     bool
}

// BuildIndex builds the index of the series discovered for each rule. It is
// pure and deterministic: the same input gives the same index whatever the
// order of rules or series in it, because winners are chosen by
// configuration order (custom and external rules separately, the last rule
// first, then the largest series name first). Series dropped by a rule's seriesFilters or
// name.matches, and series none of whose labels maps to a resource, produce
// nothing.
//
// Namespaces are read from the label the rule maps to the core namespaces
// resource (rules.ResourceMapper.LabelForResource). A custom metric is
// namespaced when its series carry that label, unless the resource is
// cluster-scoped (opts.Scoper); series of a namespaced rule whose namespace
// label is empty exist in no namespace and are not served.
func BuildIndex(in []RuleSeries, opts IndexOptions) *Index {
	b := &builder{
		maxTeam:  opts.MaxTeamRuleMetrics,
		scoper:   opts.Scoper,
		scopes:   map[schema.GroupResource]bool{},
		custom:   map[customKey]map[candKey]*candidateBuilder{},
		external: map[string]map[candKey]*candidateBuilder{},
	}
	if b.scoper == nil {
		b.scoper = DefaultScoper{}
	}
	if b.maxTeam == 0 {
		b.maxTeam = DefaultMaxTeamRuleMetrics
	}
	for _, rs := range in {
		if rs.Rule == nil {
			continue
		}
		b.addRule(rs.Rule, rs.Series)
	}
	x := b.finish()
	x.refused = b.refused
	return x
}

func (b *builder) clusterScoped(gr schema.GroupResource) bool {
	v, ok := b.scopes[gr]
	if !ok {
		v = b.scoper.ClusterScoped(gr)
		b.scopes[gr] = v
	}
	return v
}

func (b *builder) addRule(r *rules.Rule, series []rules.Series) {
	names := map[string]nameResult{}
	if r.Tenant() != "" && b.maxTeam > 0 {
		if n := nameAll(r, series, names); n > b.maxTeam {
			b.refused = append(b.refused, RefusedRule{Rule: r, Metrics: n, Limit: b.maxTeam})
			return
		}
	}
	nsLabel := ""
	if l, err := r.Resources().LabelForResource(rules.NamespaceResource); err == nil {
		nsLabel = l
	}
	lr := labelResolver{m: r.Resources(), cache: map[model.LabelName]labelResource{}}
	var buf []schema.GroupResource
	for _, s := range series {
		nr := nameSeries(r, s.Name, names)
		if !nr.ok {
			continue
		}
		ns := ""
		if nsLabel != "" {
			ns = string(s.Labels[model.LabelName(nsLabel)])
		}
		if ns != "" && !r.ServesNamespace(ns) {
			// A team rule's series of another namespace (its seriesQuery
			// is confined: a backend ignoring match[]). Rows without the
			// label (discovery does not ask for it for rules that are
			// not namespaced) are the confined seriesQuery's.
			continue
		}
		if r.Kind() == rules.KindExternal {
			b.addExternal(r, s.Name, nr.metric, ns)
			continue
		}
		resources, namespaced := lr.resources(s.Labels, buf[:0])
		buf = resources
		for _, gr := range resources {
			k := customKey{gr: gr, namespaced: namespaced && !b.clusterScoped(gr), metric: nr.metric}
			if !k.namespaced && r.Tenant() != "" {
				continue // a team rule serves the objects of its namespace only
			}
			c := b.candidate(b.customMap(k), r, s.Name)
			if k.namespaced && ns != "" {
				c.namespaces[ns] = struct{}{}
			}
		}
	}
}

// nameSeries is r's metric name for series name, memoised in names.
func nameSeries(r *rules.Rule, name string, names map[string]nameResult) nameResult {
	nr, seen := names[name]
	if !seen {
		if r.KeepSeries(name) {
			m, err := r.MetricNameForSeries(name)
			nr = nameResult{metric: m, ok: err == nil && m != ""}
		}
		names[name] = nr
	}
	return nr
}

// nameAll names every series (nameSeries) and returns the number of
// distinct metric names.
func nameAll(r *rules.Rule, series []rules.Series, names map[string]nameResult) int {
	metrics := map[string]struct{}{}
	for _, s := range series {
		if nr := nameSeries(r, s.Name, names); nr.ok {
			metrics[nr.metric] = struct{}{}
		}
	}
	return len(metrics)
}

// labelResource is a memoised ResourceMapper.ResourceForLabel answer.
type labelResource struct {
	gr schema.GroupResource
	ok bool
}

// labelResolver is rules.Rule.ResourcesForSeries with a per-build cache in
// a plain map and no allocation per series: discovery maps many rows with the
// same few label names.
type labelResolver struct {
	m     *rules.ResourceMapper
	cache map[model.LabelName]labelResource
}

// resources appends to buf the distinct resources the labels map to, in
// ResourcesForSeries' order, and whether one of them is namespaces.
func (l *labelResolver) resources(lbls model.LabelSet, buf []schema.GroupResource) ([]schema.GroupResource, bool) {
	namespaced := false
	for name := range lbls {
		lr, ok := l.cache[name]
		if !ok {
			lr.gr, lr.ok = l.m.ResourceForLabel(string(name))
			l.cache[name] = lr
		}
		if !lr.ok {
			continue
		}
		if lr.gr == rules.NamespaceResource {
			namespaced = true
		}
		if !slices.Contains(buf, lr.gr) {
			buf = append(buf, lr.gr)
		}
	}
	return buf, namespaced
}

func (b *builder) addExternal(r *rules.Rule, series, metric, ns string) {
	m, ok := b.external[metric]
	if !ok {
		m = map[candKey]*candidateBuilder{}
		b.external[metric] = m
	}
	c := b.candidate(m, r, series)
	if r.Namespaced() && ns != "" {
		c.namespaces[ns] = struct{}{}
	}
}

func (b *builder) customMap(k customKey) map[candKey]*candidateBuilder {
	m, ok := b.custom[k]
	if !ok {
		m = map[candKey]*candidateBuilder{}
		b.custom[k] = m
	}
	return m
}

func (b *builder) candidate(m map[candKey]*candidateBuilder, r *rules.Rule, series string) *candidateBuilder {
	ck := candKey{rule: r, series: series}
	c, ok := m[ck]
	if !ok {
		c = &candidateBuilder{rule: r, series: series, namespaces: map[string]struct{}{}}
		m[ck] = c
	}
	return c
}

// finish freezes the candidates (sorted, namespaces as sorted slices),
// drops namespaced candidates present in no namespace, and computes the
// metric lists and conflicts.
func (b *builder) finish() *Index {
	x := &Index{
		custom:      make(map[customKey][]Candidate, len(b.custom)),
		external:    make(map[string][]Candidate, len(b.external)),
		ruleMetrics: map[string]int{},
	}
	for k, m := range b.custom {
		cs, _ := freeze(m, func(*rules.Rule) bool { return k.namespaced })
		if len(cs) == 0 {
			continue
		}
		x.custom[k] = cs
		x.customInfos = append(x.customInfos, provider.CustomMetricInfo{GroupResource: k.gr, Namespaced: k.namespaced, Metric: k.metric})
		countRules(x.ruleMetrics, cs)
		x.conflicts = append(x.conflicts, conflicts(rules.CustomMetricsAPI, k.gr, k.namespaced, k.metric, cs)...)
	}
	for metric, m := range b.external {
		cs, unscoped := freeze(m, (*rules.Rule).Namespaced)
		if len(unscoped) > 0 {
			if x.unscoped == nil {
				x.unscoped = map[string][]Entry{}
			}
			x.unscoped[metric] = unscoped
		}
		if len(cs) == 0 {
			continue
		}
		x.external[metric] = cs
		x.externalInfos = append(x.externalInfos, provider.ExternalMetricInfo{Metric: metric})
		countRules(x.ruleMetrics, cs)
		x.conflicts = append(x.conflicts, externalConflicts(metric, cs)...)
	}
	slices.SortFunc(x.customInfos, compareInfo)
	slices.SortFunc(x.externalInfos, func(a, b provider.ExternalMetricInfo) int { return strings.Compare(a.Metric, b.Metric) })
	slices.SortFunc(x.conflicts, compareConflict)
	return x
}

func countRules(counts map[string]int, cs []Candidate) {
	var last *rules.Rule
	for _, c := range cs { // sorted by rule: count each rule once per key
		if c.Rule != last {
			counts[c.Rule.Path()]++
			last = c.Rule
		}
	}
}

// freeze turns candidates into a slice in winner order, namespaces as
// sorted slices; namespaced(rule) says whether a candidate is scoped by
// namespace. Namespaced candidates present in no namespace are returned
// apart, sorted like candidates.
func freeze(m map[candKey]*candidateBuilder, namespaced func(*rules.Rule) bool) (cs []Candidate, unscoped []Entry) {
	cs = make([]Candidate, 0, len(m))
	for _, c := range m {
		var nss []string
		if namespaced(c.rule) {
			if len(c.namespaces) == 0 {
				unscoped = append(unscoped, Entry{Rule: c.rule, SeriesName: c.series})
				continue
			}
			nss = slices.Sorted(maps.Keys(c.namespaces))
		}
		cs = append(cs, Candidate{Entry: Entry{Rule: c.rule, SeriesName: c.series}, Namespaces: nss})
	}
	slices.SortFunc(cs, compareCandidate)
	slices.SortFunc(unscoped, func(a, b Entry) int { return compareCandidate(Candidate{Entry: a}, Candidate{Entry: b}) })
	return cs, unscoped
}

func compareCandidate(a, b Candidate) int {
	if c := cmp.Compare(a.Rule.Kind(), b.Rule.Kind()); c != 0 {
		return c
	}
	// The last rule wins, as in prometheus-adapter, whose registry keeps
	// the last (rule, series) it is given for a metric.
	if c := cmp.Compare(b.Rule.Order(), a.Rule.Order()); c != 0 {
		return c
	}
	return strings.Compare(b.SeriesName, a.SeriesName)
}

func compareInfo(a, b provider.CustomMetricInfo) int {
	if c := strings.Compare(a.GroupResource.Group, b.GroupResource.Group); c != 0 {
		return c
	}
	if c := strings.Compare(a.GroupResource.Resource, b.GroupResource.Resource); c != 0 {
		return c
	}
	if c := strings.Compare(a.Metric, b.Metric); c != 0 {
		return c
	}
	if a.Namespaced == b.Namespaced {
		return 0
	}
	if !a.Namespaced {
		return -1
	}
	return 1
}

func compareConflict(a, b Conflict) int {
	return cmp.Or(
		strings.Compare(a.API, b.API),
		strings.Compare(a.GroupResource.Group, b.GroupResource.Group),
		strings.Compare(a.GroupResource.Resource, b.GroupResource.Resource),
		strings.Compare(a.Metric, b.Metric),
		cmp.Compare(boolInt(a.Namespaced), boolInt(b.Namespaced)),
		compareCandidate(Candidate{Entry: a.Winner}, Candidate{Entry: b.Winner}),
		compareCandidate(Candidate{Entry: a.Shadowed}, Candidate{Entry: b.Shadowed}),
	)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// conflicts finds, for candidates in winner order, where a later candidate
// is hidden by an earlier one.
func conflicts(api string, gr schema.GroupResource, namespaced bool, metric string, cs []Candidate) []Conflict {
	if len(cs) < 2 {
		return nil
	}
	var out []Conflict
	if !namespaced {
		for _, c := range cs[1:] {
			out = append(out, Conflict{API: api, GroupResource: gr, Metric: metric, Winner: cs[0].Entry, Shadowed: c.Entry})
		}
		return out
	}
	owner := map[string]int{} // namespace -> index of its winner
	for j := range cs {
		out = shadowedNamespaces(out, Conflict{API: api, GroupResource: gr, Metric: metric}, cs, j, owner)
	}
	return out
}

// shadowedNamespaces appends to out, for candidate j, one conflict (base
// with the winner, the shadowed entry and the namespaces) per earlier
// candidate owning some of its namespaces, in the candidates' order, and
// records j as the owner of the others.
func shadowedNamespaces(out []Conflict, base Conflict, cs []Candidate, j int, owner map[string]int) []Conflict {
	byWinner := map[int][]string{}
	for _, ns := range cs[j].Namespaces {
		if i, taken := owner[ns]; taken {
			byWinner[i] = append(byWinner[i], ns)
			continue
		}
		owner[ns] = j
	}
	for _, i := range slices.Sorted(maps.Keys(byWinner)) {
		c := base
		c.Namespaced, c.Winner, c.Shadowed, c.Namespaces = true, cs[i].Entry, cs[j].Entry, byWinner[i]
		out = append(out, c)
	}
	return out
}

// externalConflicts is conflicts for external metrics, where namespaced and
// cluster-wide rules mix: a cluster-wide candidate hides every later one.
func externalConflicts(metric string, cs []Candidate) []Conflict {
	if len(cs) < 2 {
		return nil
	}
	var out []Conflict
	owner := map[string]int{}
	wide := -1 // first cluster-wide candidate
	for j, c := range cs {
		if wide >= 0 {
			out = append(out, Conflict{API: rules.ExternalMetricsAPI, Metric: metric, Namespaced: c.Namespaces != nil, Winner: cs[wide].Entry, Shadowed: c.Entry, Namespaces: c.Namespaces})
			continue
		}
		if c.Namespaces == nil {
			wide = j
			byWinner := map[int][]string{}
			for ns, i := range owner {
				byWinner[i] = append(byWinner[i], ns)
			}
			for _, i := range slices.Sorted(maps.Keys(byWinner)) {
				slices.Sort(byWinner[i])
				out = append(out, Conflict{API: rules.ExternalMetricsAPI, Metric: metric, Namespaced: true, Winner: cs[i].Entry, Shadowed: c.Entry, Namespaces: byWinner[i]})
			}
			continue
		}
		out = shadowedNamespaces(out, Conflict{API: rules.ExternalMetricsAPI, Metric: metric}, cs, j, owner)
	}
	return out
}

// summarize joins at most n values, with a count of the rest.
func summarize(vs []string, n int) string {
	if len(vs) <= n {
		return "[" + strings.Join(vs, ",") + "]"
	}
	return fmt.Sprintf("[%s,... %d more]", strings.Join(vs[:n], ","), len(vs)-n)
}
