// Package explain answers "which PromQL would the adapter send for this
// request, and if none, why not": it looks a request up in a discovery
// index built from the series each rule discovered and, when nothing serves
// it, walks every rule to say where the metric was lost (no series matched
// the seriesQuery, a series filter dropped it, name.matches did not match,
// no label maps to the resource, the namespace has no series, another rule
// shadows it). It backs "adapter explain".
package explain

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/rules"
)

// ErrNotServed is returned (wrapped) when no rule serves the request.
var ErrNotServed = errors.New("metric not served")

// Request is the API request to explain.
type Request struct {
	// External asks about external.metrics.k8s.io; else custom.
	External bool
	// Metric is the API metric name.
	Metric string
	// Resource is the normalised group-resource (custom metrics only).
	Resource schema.GroupResource
	// Namespace of the objects (custom) or of the request (external); ""
	// for cluster-scoped objects.
	Namespace string
	// Names are the object names (custom only); none means every object
	// (the query has no matcher on the object label when another matcher
	// narrows it, else label!="").
	Names []string
	// MetricSelector is the metric label selector; nil means everything.
	MetricSelector labels.Selector
}

// Input is what discovery saw.
type Input struct {
	// Rules is the compiled configuration.
	Rules *rules.RuleSet
	// Series are the series each rule's seriesQuery selected (from
	// discovery.MatchSeries offline, or from Prometheus).
	Series []discovery.RuleSeries
	// All, when known (offline), is every series available, used to say
	// why a seriesQuery selected nothing. Nil when unknown.
	All []model.LabelSet
	// Scoper decides cluster-scoped resources; nil means the default.
	Scoper discovery.Scoper
}

// Result is a rendered query and how it was produced.
type Result struct {
	// Query is the rendered query.
	Query rules.Query
	// Source names what produced it: a rule path and series, or an
	// externalQueries entry.
	Source string
	// Notes are human-readable lines for stderr: which rule and series
	// produced the query, shadowed rules, hints.
	Notes []string
}

// Explain renders the query req would send, or returns an error wrapping
// ErrNotServed whose message lists, one per line, why no rule serves it.
func Explain(in Input, req Request) (*Result, error) {
	if in.Rules == nil {
		return nil, errors.New("no rule set")
	}
	idx := discovery.BuildIndex(in.Series, discovery.IndexOptions{Scoper: in.Scoper})
	var res *Result
	var err error
	if req.External {
		res, err = explainExternal(in, idx, req)
	} else {
		res, err = explainCustom(in, idx, req)
	}
	if err == nil && res.Query.MaxSampleAge > 0 {
		res.Notes = append(res.Notes, SampleAgeNote(res.Source, res.Query.MaxSampleAge))
	}
	return res, err
}

// SampleAgeNote says what maximum sample age a query is sent with and
// whose it is (the rule's, source naming it, or the backend's).
func SampleAgeNote(whose string, age time.Duration) string {
	return fmt.Sprintf("maxSampleAge %s (%s): a sample older is no value (sent as lookback_delta=%gs and checked on the answer's timestamps)",
		model.Duration(age), whose, age.Seconds())
}

func explainCustom(in Input, idx *discovery.Index, req Request) (*Result, error) {
	what := fmt.Sprintf("custom metric %q for %s", req.Metric, req.Resource.String())
	if req.Namespace != "" {
		what += fmt.Sprintf(" in namespace %q", req.Namespace)
	} else {
		what += " (cluster-wide)"
	}
	entry, ok := idx.Custom(req.Resource, req.Namespace, req.Metric)
	if !ok {
		return nil, notServed(what, customReasons(in, idx, req))
	}
	cr := rules.CustomRequest{
		Series:         entry.SeriesName,
		Resource:       req.Resource,
		Namespace:      req.Namespace,
		Names:          req.Names,
		AllObjects:     len(req.Names) == 0,
		MetricSelector: req.MetricSelector,
	}
	q, err := entry.Rule.QueryForSeries(cr)
	if err != nil {
		return nil, fmt.Errorf("%s is served by %s but its query does not render: %w", what, entry, err)
	}
	res := &Result{Query: q, Source: entry.String()}
	res.Notes = append(res.Notes, fmt.Sprintf("%s: served by %s", what, entry))
	if req.Namespace != "" && !seenIn(idx.CustomCandidates(req.Resource, true, req.Metric), req.Namespace) {
		res.Notes = append(res.Notes, newNamespaceNote(req.Namespace))
	}
	res.Notes = append(res.Notes, sharingNote(entry.Rule, entry.SeriesName, req))
	if cr.AllObjects {
		res.Notes = append(res.Notes, fmt.Sprintf("no --names given: the query asks for every object (whatever %s is), as for a request over many objects; the adapter keeps the ones requested", q.ResourceLabel))
	}
	for _, c := range idx.CustomCandidates(req.Resource, req.Namespace != "", req.Metric) {
		if c.Entry == entry {
			continue
		}
		if req.Namespace == "" || slices.Contains(c.Namespaces, req.Namespace) {
			res.Notes = append(res.Notes, fmt.Sprintf("also produced by %s, shadowed by %s (the last rule in the configuration wins, as in prometheus-adapter)", c.Entry, entry.Rule.Path()))
		}
	}
	return res, nil
}

func explainExternal(in Input, idx *discovery.Index, req Request) (*Result, error) {
	what := fmt.Sprintf("external metric %q in namespace %q", req.Metric, req.Namespace)
	if q, ok := in.Rules.ExternalQuery(req.Metric); ok {
		rendered, err := q.Query(rules.ExternalRequest{Namespace: req.Namespace, MetricSelector: req.MetricSelector})
		if err != nil {
			return nil, fmt.Errorf("%s is served by %s but its query does not render: %w", what, q.Path(), err)
		}
		res := &Result{Query: rendered, Source: q.Path()}
		res.Notes = append(res.Notes, fmt.Sprintf("%s: served by %s (a fixed query, no discovery)", what, q.Path()))
		if e, ok := idx.External(req.Namespace, req.Metric); ok {
			res.Notes = append(res.Notes, fmt.Sprintf("also produced by %s, shadowed by %s (externalQueries win over externalRules)", e, q.Path()))
		}
		return res, nil
	}
	entry, ok := idx.External(req.Namespace, req.Metric)
	if !ok {
		return nil, notServed(what, externalReasons(in, req))
	}
	q, err := entry.Rule.QueryForExternalSeries(rules.ExternalRequest{Series: entry.SeriesName, Namespace: req.Namespace, MetricSelector: req.MetricSelector})
	if err != nil {
		return nil, fmt.Errorf("%s is served by %s but its query does not render: %w", what, entry, err)
	}
	res := &Result{Query: q, Source: entry.String()}
	res.Notes = append(res.Notes, fmt.Sprintf("%s: served by %s", what, entry))
	if !entry.Rule.Namespaced() {
		res.Notes = append(res.Notes, fmt.Sprintf("%s has resources.namespaced: false: the request namespace is not applied", entry.Rule.Path()))
	} else if !seenIn(idx.ExternalCandidates(req.Metric), req.Namespace) {
		res.Notes = append(res.Notes, newNamespaceNote(req.Namespace))
	}
	for _, c := range idx.ExternalCandidates(req.Metric) {
		if c.Entry == entry {
			continue
		}
		if !c.Rule.Namespaced() || slices.Contains(c.Namespaces, req.Namespace) {
			res.Notes = append(res.Notes, fmt.Sprintf("also produced by %s, shadowed by %s (the last rule in the configuration wins, as in prometheus-adapter)", c.Entry, entry.Rule.Path()))
		}
	}
	return res, nil
}

// seenIn reports whether discovery saw series of a candidate in namespace.
func seenIn(cs []discovery.Candidate, namespace string) bool {
	for _, c := range cs {
		if slices.Contains(c.Namespaces, namespace) {
			return true
		}
	}
	return false
}

// newNamespaceNote says that a metric is served in a namespace where
// discovery saw none of its series (see discovery.Index.Custom).
func newNamespaceNote(namespace string) string {
	return fmt.Sprintf("no series of it were discovered in namespace %q: it is served by the last rule producing it, and the query decides whether values exist (a namespace created since the last relist)", namespace)
}

func notServed(what string, reasons []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is not served", what)
	for _, r := range reasons {
		b.WriteString("\n  ")
		b.WriteString(r)
	}
	return fmt.Errorf("%w: %s", ErrNotServed, b.String())
}

// seriesByName groups a rule's series by series name, in name order.
func seriesByName(series []rules.Series) ([]string, map[string][]rules.Series) {
	by := map[string][]rules.Series{}
	var names []string
	for _, s := range series {
		if _, ok := by[s.Name]; !ok {
			names = append(names, s.Name)
		}
		by[s.Name] = append(by[s.Name], s)
	}
	slices.Sort(names)
	return names, by
}

// ruleSeries returns the series discovered for r.
func ruleSeries(in Input, r *rules.Rule) []rules.Series {
	for _, rs := range in.Series {
		if rs.Rule == r {
			return rs.Series
		}
	}
	return nil
}

// nameStage follows a rule's series up to naming: it returns the series
// producing metric, and reasons for the rule when none does.
func nameStage(in Input, r *rules.Rule, metric string) ([]rules.Series, []string) {
	series := ruleSeries(in, r)
	if len(series) == 0 {
		return nil, []string{fmt.Sprintf("%s: no series matched seriesQuery %s%s", r.Path(), r.SeriesQuery(), closest(in.All, r.SeriesQuery()))}
	}
	names, by := seriesByName(series)
	var dropped, produced []string
	var out []rules.Series
	for _, n := range names {
		if why := r.DropReason(n); why != "" {
			dropped = append(dropped, fmt.Sprintf("%s: series %q dropped: %s", r.Path(), n, why))
			continue
		}
		m, err := r.MetricNameForSeries(n)
		if err != nil {
			dropped = append(dropped, fmt.Sprintf("%s: series %q: %v", r.Path(), n, err))
			continue
		}
		if m == metric {
			out = append(out, by[n]...)
			continue
		}
		produced = append(produced, m)
	}
	if len(out) > 0 {
		return out, nil
	}
	var reasons []string
	if len(produced) > 0 {
		slices.Sort(produced)
		produced = slices.Compact(produced)
		reasons = append(reasons, fmt.Sprintf("%s: name.matches/as turn its series names into %s, not %q", r.Path(), summarize(produced, 8), metric))
	}
	if len(dropped) > 3 {
		reasons = append(reasons, dropped[:3]...)
		reasons = append(reasons, fmt.Sprintf("%s: ... and %d more series names dropped", r.Path(), len(dropped)-3))
	} else {
		reasons = append(reasons, dropped...)
	}
	return nil, reasons
}

// closest says, when every series is known, which matcher of the
// seriesQuery the most series fail.
func closest(all []model.LabelSet, seriesQuery string) string {
	if all == nil {
		return ""
	}
	sel, err := discovery.ParseSelector(seriesQuery)
	if err != nil {
		return fmt.Sprintf(" (%v)", err)
	}
	if len(all) == 0 {
		return " (the series file is empty)"
	}
	counts := map[string]int{}
	for _, ls := range all {
		if m, failed := sel.FailedMatcher(ls); failed {
			counts[m.String()]++
		}
	}
	best, n := "", 0
	for m, c := range counts {
		if c > n || c == n && m < best {
			best, n = m, c
		}
	}
	return fmt.Sprintf(" (of %d series, %d fail %s)", len(all), n, best)
}

func customReasons(in Input, idx *discovery.Index, req Request) []string {
	var reasons []string
	for _, r := range in.Rules.CustomRules() {
		series, why := nameStage(in, r, req.Metric)
		if series == nil {
			reasons = append(reasons, why...)
			continue
		}
		reasons = append(reasons, resourceStage(r, series, req)...)
	}
	scoper := in.Scoper
	if scoper == nil {
		scoper = discovery.DefaultScoper{}
	}
	if req.Namespace != "" && scoper.ClusterScoped(req.Resource) {
		reasons = append(reasons, fmt.Sprintf("%s is cluster-scoped: its metrics are served without a namespace (drop --namespace)", req.Resource.String()))
	}
	if len(in.Rules.CustomRules()) == 0 {
		reasons = append(reasons, "the configuration has no rules (custom metrics)")
	}
	var served []string
	for _, info := range idx.CustomMetrics() {
		if info.GroupResource == req.Resource && info.Namespaced == (req.Namespace != "") {
			served = append(served, info.Metric)
		}
	}
	if len(served) > 0 {
		reasons = append(reasons, fmt.Sprintf("metrics served for %s: %s", req.Resource.String(), summarize(served, 10)))
	}
	return reasons
}

// resourceStage says why series named for the metric do not serve the
// requested resource and namespace.
func resourceStage(r *rules.Rule, series []rules.Series, req Request) []string {
	resLabel, labelErr := r.LabelForResource(req.Resource)
	nsLabel, _ := r.LabelForResource(rules.NamespaceResource)
	var withResource []rules.Series
	mapped := map[string]string{}
	var unmapped []string
	for _, s := range series {
		grs, _ := r.ResourcesForSeries(s.Labels)
		if slices.Contains(grs, req.Resource) {
			withResource = append(withResource, s)
		}
		for l := range s.Labels {
			if l == model.MetricNameLabel {
				continue
			}
			if gr, ok := r.Resources().ResourceForLabel(string(l)); ok {
				mapped[string(l)] = gr.String()
			} else if !slices.Contains(unmapped, string(l)) {
				unmapped = append(unmapped, string(l))
			}
		}
	}
	if len(withResource) == 0 {
		msg := fmt.Sprintf("%s: no label of the %d series named for %q maps to %s", r.Path(), len(series), req.Metric, req.Resource.String())
		if labelErr == nil {
			msg += fmt.Sprintf(" (the rule's label for %s is %q, which the series lack)", req.Resource.String(), resLabel)
		} else {
			msg += fmt.Sprintf(" (%v)", labelErr)
		}
		var ms []string
		for l, gr := range mapped {
			ms = append(ms, l+"->"+gr)
		}
		slices.Sort(ms)
		slices.Sort(unmapped)
		msg += fmt.Sprintf("; labels mapping to resources: %s; labels mapping to no resource: %s", summarize(ms, 8), summarize(unmapped, 8))
		return []string{msg}
	}
	if req.Namespace == "" {
		for _, s := range withResource {
			if _, nsd := r.ResourcesForSeries(s.Labels); !nsd {
				return nil // served cluster-wide: cannot happen when not found, but stay quiet
			}
		}
		return []string{fmt.Sprintf("%s: the series for %s carry a namespace label (%q): ask with --namespace", r.Path(), req.Resource.String(), nsLabel)}
	}
	var nss []string
	for _, s := range withResource {
		if v := string(s.Labels[model.LabelName(nsLabel)]); v != "" && !slices.Contains(nss, v) {
			nss = append(nss, v)
		}
	}
	if len(nss) == 0 {
		if nsLabel == "" {
			return []string{fmt.Sprintf("%s: no label maps to namespaces, so %s is served cluster-wide only (drop --namespace)", r.Path(), req.Resource.String())}
		}
		return []string{fmt.Sprintf("%s: the series for %s have no namespace label %q, so they are served cluster-wide only (drop --namespace)", r.Path(), req.Resource.String(), nsLabel)}
	}
	slices.Sort(nss)
	return []string{fmt.Sprintf("%s: series for %s exist in namespaces %s, not in %q", r.Path(), req.Resource.String(), summarize(nss, 8), req.Namespace)}
}

func externalReasons(in Input, req Request) []string {
	var reasons []string
	for _, r := range in.Rules.ExternalRules() {
		series, why := nameStage(in, r, req.Metric)
		if series == nil {
			reasons = append(reasons, why...)
			continue
		}
		if !r.Namespaced() {
			continue // would have been served
		}
		nsLabel, err := r.LabelForResource(rules.NamespaceResource)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: namespaced (the default) but no label maps to namespaces: %v; set resources.namespaced: false or map the namespace label", r.Path(), err))
			continue
		}
		var nss []string
		for _, s := range series {
			if v := string(s.Labels[model.LabelName(nsLabel)]); v != "" && !slices.Contains(nss, v) {
				nss = append(nss, v)
			}
		}
		if len(nss) == 0 {
			reasons = append(reasons, fmt.Sprintf("%s: namespaced (the default) but the series have no %q label; set resources.namespaced: false to serve them in every namespace", r.Path(), nsLabel))
			continue
		}
		slices.Sort(nss)
		reasons = append(reasons, fmt.Sprintf("%s: series exist in namespaces %s, not in %q", r.Path(), summarize(nss, 8), req.Namespace))
	}
	if len(in.Rules.ExternalRules()) == 0 {
		reasons = append(reasons, "the configuration has no externalRules and no externalQueries entry of that name")
	}
	return reasons
}

func summarize(vs []string, n int) string {
	if len(vs) == 0 {
		return "none"
	}
	if len(vs) <= n {
		return strings.Join(vs, ", ")
	}
	return fmt.Sprintf("%s, ... (%d more)", strings.Join(vs[:n], ", "), len(vs)-n)
}

// sharingNote says whether the adapter answers the request from a shared
// evaluation (provider.SharedConfig) or per request, and why.
func sharingNote(r *rules.Rule, series string, req Request) string {
	if req.Namespace == "" {
		return "shared evaluation: no, answered per request (a cluster-wide request already reads every object)"
	}
	sr := rules.SharedRequest{Series: series, Resource: req.Resource, MetricSelector: req.MetricSelector}
	if err := r.Sharing(sr); err != nil {
		return "shared evaluation: no, always answered per request: " + err.Error()
	}
	q, err := r.SharedQuery(sr)
	if err != nil {
		return "shared evaluation: no, always answered per request: " + err.Error()
	}
	return "shared evaluation: yes, once several namespaces ask within a sync period the adapter answers from " + q.Expr + " (sliced by " + q.NamespaceLabel + ", " + q.ResourceLabel + "), objects it lacks per request"
}
