package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
)

// errLocalSelector means the seriesQuery does not parse here, so matchers
// cannot be added to it; the labels strategy then lists series instead.
var errLocalSelector = errors.New("the seriesQuery cannot be extended with matchers")

// labelsUnsupported reports whether err means the backend does not take
// match[] on the label endpoints (or the seriesQuery cannot be extended):
// a rejected request (400/422) or an unknown endpoint (404).
func labelsUnsupported(err error) bool {
	if errors.Is(err, errLocalSelector) || promclient.IsBadQuery(err) {
		return true
	}
	var pe *promclient.Error
	return errors.As(err, &pe) && pe.StatusCode == http.StatusNotFound
}

// keepsName reports whether rule r produces a metric from series name n:
// the same test BuildIndex applies.
func keepsName(r *rules.Rule, n string) bool {
	if !r.KeepSeries(n) {
		return false
	}
	m, err := r.MetricNameForSeries(n)
	return err == nil && m != ""
}

// fetchLabels implements StrategyLabels for one seriesQuery. The result has
// rows per rule (see fetchResult.perRule): which labels a row carries
// depends on how the rule maps labels to resources.
func (d *Discoverer) fetchLabels(ctx context.Context, p *plan, now time.Time) (fetchResult, error) {
	sel, err := ParseSelector(p.seriesQuery)
	if err != nil {
		return fetchResult{}, fmt.Errorf("%w: %w", errLocalSelector, err)
	}
	start := now.Add(-d.maxAge)
	names, err := p.prom.LabelValues(ctx, string(model.MetricNameLabel), []string{p.seriesQuery}, start, now)
	if err != nil {
		return fetchResult{}, fmt.Errorf("listing series names for seriesQuery %q: %w", p.seriesQuery, err)
	}
	slices.Sort(names)
	names = slices.Compact(names)

	// Names no rule keeps cost nothing more.
	type job struct {
		name  string
		rules []int // indexes in p.rules of the rules keeping name
	}
	var jobs []job
	for _, n := range names {
		var ruleList []int
		for j, r := range p.rules {
			if keepsName(r, n) {
				ruleList = append(ruleList, j)
			}
		}
		if len(ruleList) > 0 {
			jobs = append(jobs, job{name: n, rules: ruleList})
		}
	}

	rows := make([][][]rules.Series, len(jobs)) // job -> rule index in job -> rows
	// The first failure cancels the other names' requests.
	g, gctx := errgroup.WithContext(ctx)
send:
	for i, jb := range jobs {
		select {
		case d.nameSlots <- struct{}{}:
		case <-gctx.Done():
			break send
		}
		g.Go(func() error {
			defer func() { <-d.nameSlots }()
			a := &nameAsker{
				sel:    sel,
				prom:   p.prom,
				scoper: d.scoper,
				name:   jb.name,
				base:   withName(sel, jb.name),
				start:  start,
				end:    now,
				values: map[string][]string{},
				labels: map[string]map[string]bool{},
			}
			out, err := a.rows(gctx, p.rules, jb.rules)
			if err != nil {
				return fmt.Errorf("discovering series %q of seriesQuery %q: %w", jb.name, p.seriesQuery, err)
			}
			rows[i] = out
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fetchResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return fetchResult{}, fmt.Errorf("discovering seriesQuery %q: %w", p.seriesQuery, err)
	}
	res := fetchResult{perRule: make(map[string][]rules.Series, len(p.rules))}
	for _, r := range p.rules {
		res.perRule[r.Path()] = []rules.Series{}
	}
	for i, jb := range jobs {
		for k, j := range jb.rules {
			path := p.rules[j].Path()
			res.perRule[path] = append(res.perRule[path], rows[i][k]...)
		}
	}
	return res, nil
}

// nameAsker asks the label endpoints about the series of one name selected
// by a seriesQuery, remembering answers so that rules of the same
// seriesQuery needing the same answer share one request. It is used by one
// goroutine.
type nameAsker struct {
	sel        *Selector
	prom       Prometheus
	scoper     Scoper
	name       string
	base       []*labels.Matcher // the seriesQuery's matchers and __name__="name"
	start, end time.Time
	values     map[string][]string
	labels     map[string]map[string]bool
}

// withName returns the selector's matchers and __name__="name", unless the
// selector already has it.
func withName(sel *Selector, name string) []*labels.Matcher {
	ms := sel.Matchers()
	for _, m := range ms {
		if m.Name == string(model.MetricNameLabel) && m.Type == labels.MatchEqual && m.Value == name {
			return ms
		}
	}
	return append(ms, labels.MustNewMatcher(labels.MatchEqual, string(model.MetricNameLabel), name))
}

// selector renders base and extra matchers as one series selector.
func (a *nameAsker) selector(extra []*labels.Matcher) string {
	return renderSelector(append(slices.Clip(a.base), extra...))
}

// renderSelector writes matchers as a series selector, all inside braces (a
// name before the braces may not be repeated as __name__ inside them).
func renderSelector(ms []*labels.Matcher) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.String())
	}
	b.WriteByte('}')
	return b.String()
}

// labelNames returns the label names of the series matching base and extra.
func (a *nameAsker) labelNames(ctx context.Context, extra ...*labels.Matcher) (map[string]bool, error) {
	sel := a.selector(extra)
	if got, ok := a.labels[sel]; ok {
		return got, nil
	}
	names, err := a.prom.LabelNames(ctx, []string{sel}, a.start, a.end)
	if err != nil {
		return nil, fmt.Errorf("listing label names of %s: %w", sel, err)
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	a.labels[sel] = set
	return set, nil
}

// labelValues returns the values of label over the series matching base
// and extra.
func (a *nameAsker) labelValues(ctx context.Context, label string, extra ...*labels.Matcher) ([]string, error) {
	sel := a.selector(extra)
	key := label + "\x00" + sel
	if got, ok := a.values[key]; ok {
		return got, nil
	}
	vals, err := a.prom.LabelValues(ctx, label, []string{sel}, a.start, a.end)
	if err != nil {
		return nil, fmt.Errorf("listing values of label %q of %s: %w", label, sel, err)
	}
	slices.Sort(vals)
	vals = slices.Compact(vals)
	a.values[key] = vals
	return vals, nil
}

// present returns the matchers selecting series that have label l: none
// when the seriesQuery already requires it (the request is then the cheaper
// one Prometheus answers from the seriesQuery's own postings).
func (a *nameAsker) present(l string) []*labels.Matcher {
	if a.sel.requires(l) {
		return nil
	}
	return []*labels.Matcher{labels.MustNewMatcher(labels.MatchNotEqual, l, "")}
}

func absent(l string) *labels.Matcher {
	return labels.MustNewMatcher(labels.MatchEqual, l, "")
}

// rows returns, for each rule rules[j] (j in which), the rows standing for
// the name's series.
func (a *nameAsker) rows(ctx context.Context, ruleList []*rules.Rule, which []int) ([][]rules.Series, error) {
	all, err := a.labelSet(ctx, ruleList, which)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		// The series went away between the two requests.
		return make([][]rules.Series, len(which)), nil
	}
	delete(all, string(model.MetricNameLabel))
	seriesLabels := make([]string, 0, len(all))
	for l := range all {
		seriesLabels = append(seriesLabels, l)
	}
	slices.Sort(seriesLabels)
	out := make([][]rules.Series, len(which))
	for k, j := range which {
		rs := &rowSet{name: a.name, seen: map[string]bool{}}
		var err error
		if ruleList[j].Kind() == rules.KindExternal {
			err = a.externalRows(ctx, ruleList[j], all, rs)
		} else {
			err = a.customRows(ctx, ruleList[j], seriesLabels, all, rs)
		}
		if err != nil {
			return nil, err
		}
		out[k] = rs.rows
	}
	return out, nil
}

// labelSet returns the label names of the name's series that the rules may
// read. When no rule has a resources.template and the seriesQuery requires
// every label the rules name (`{namespace!="",pod!=""}` with overrides for
// both), these are known without asking.
func (a *nameAsker) labelSet(ctx context.Context, ruleList []*rules.Rule, which []int) (map[string]bool, error) {
	known := map[string]bool{}
	for _, j := range which {
		r := ruleList[j]
		res := r.Resources()
		if r.Kind() == rules.KindExternal {
			if l, err := res.LabelForResource(rules.NamespaceResource); err == nil && r.Namespaced() {
				known[l] = true
			}
			continue
		}
		if res.HasTemplate() {
			return a.labelNames(ctx)
		}
		for l := range res.Overrides() {
			known[l] = true
		}
	}
	for l := range known {
		if !a.sel.requires(l) {
			return a.labelNames(ctx)
		}
	}
	known[string(model.MetricNameLabel)] = true
	return known, nil
}

// externalRows: an external rule needs the name (one row) and, when
// namespaced, the namespaces of its series.
func (a *nameAsker) externalRows(ctx context.Context, r *rules.Rule, has map[string]bool, rs *rowSet) error {
	rs.add(model.LabelSet{})
	nsLabel, err := r.Resources().LabelForResource(rules.NamespaceResource)
	if err != nil || !r.Namespaced() || !has[nsLabel] {
		return nil
	}
	vals, err := a.labelValues(ctx, nsLabel)
	if err != nil {
		return err
	}
	for _, v := range vals {
		rs.add(model.LabelSet{model.LabelName(nsLabel): model.LabelValue(v)})
	}
	return nil
}

// customRows builds rows that give BuildIndex, for rule r, exactly what the
// name's series give it. BuildIndex maps each label of a row separately to
// a resource, and a row's contribution for the resource of label L depends
// only on whether the row is namespaced (has a label mapping to the
// namespaces resource) and on the value of the rule's namespace label. So,
// per label L that r maps to a resource:
//
//   - cluster-scoped resource: a row {L}, whatever the namespaces;
//   - namespaced resource: a row {NS=v, L} per namespace v of the series
//     having L (series having NS are namespaced), and a row {L} when series
//     with L and no namespace label exist (they give the cluster-wide
//     metric).
//
// Every row carries a subset of the labels, and the namespace value, of one
// real series with the same namespacedness, so it adds nothing that series
// does not; and each series' contribution is covered by one of the rows.
func (a *nameAsker) customRows(ctx context.Context, r *rules.Rule, seriesLabels []string, has map[string]bool, rs *rowSet) error {
	res := r.Resources()
	nsLabel, err := res.LabelForResource(rules.NamespaceResource)
	if err != nil {
		nsLabel = ""
	}
	var ms []mappedLabel
	var nsLabels []string // labels of the series mapping to namespaces
	for _, l := range seriesLabels {
		gr, ok := res.ResourceForLabel(l)
		if !ok {
			continue
		}
		ms = append(ms, mappedLabel{label: l, gr: gr})
		if gr == rules.NamespaceResource {
			nsLabels = append(nsLabels, l)
		}
	}
	nsIsNamespace := nsLabel != "" && slices.Contains(nsLabels, nsLabel)
	for _, m := range ms {
		if a.scoper.ClusterScoped(m.gr) {
			rs.add(model.LabelSet{model.LabelName(m.label): "1"})
			continue
		}
		if nsLabel != "" && has[nsLabel] {
			if err := a.namespacedRows(ctx, m, nsLabel, nsLabels, nsIsNamespace, rs); err != nil {
				return err
			}
		}
		if m.gr == rules.NamespaceResource {
			continue // series with L are namespaced
		}
		if err := a.clusterWideRow(ctx, m, nsLabels, rs); err != nil {
			return err
		}
	}
	return nil
}

// mappedLabel is a series label that a rule maps to a resource.
type mappedLabel struct {
	label string
	gr    schema.GroupResource
}

// namespacedRows adds, for the namespaced series with label m, a row per
// namespace value, carrying the label that makes them namespaced (X).
func (a *nameAsker) namespacedRows(ctx context.Context, m mappedLabel, nsLabel string, nsLabels []string, nsIsNamespace bool, rs *rowSet) error {
	xs := nsLabels
	switch {
	case m.gr == rules.NamespaceResource:
		xs = []string{m.label}
	case nsIsNamespace:
		xs = []string{nsLabel}
	}
	for _, x := range xs {
		extra := a.present(m.label)
		if x != m.label && x != nsLabel {
			extra = append(extra, a.present(x)...)
		}
		vals, err := a.labelValues(ctx, nsLabel, extra...)
		if err != nil {
			return err
		}
		for _, v := range vals {
			ls := model.LabelSet{model.LabelName(m.label): "1", model.LabelName(x): "1"}
			ls[model.LabelName(nsLabel)] = model.LabelValue(v)
			rs.add(ls)
		}
	}
	return nil
}

// clusterWideRow adds a row {L} when series with label m and no label
// mapping to namespaces exist (they give the cluster-wide metric).
func (a *nameAsker) clusterWideRow(ctx context.Context, m mappedLabel, nsLabels []string, rs *rowSet) error {
	one := model.LabelSet{model.LabelName(m.label): "1"}
	if len(nsLabels) == 0 {
		rs.add(one)
		return nil
	}
	// One request per name serves every L: the label names of the series
	// without a namespace label.
	if slices.ContainsFunc(nsLabels, a.sel.requires) {
		return nil // the seriesQuery selects none
	}
	extra := make([]*labels.Matcher, len(nsLabels))
	for i, x := range nsLabels {
		extra[i] = absent(x)
	}
	got, err := a.labelNames(ctx, extra...)
	if err != nil {
		return err
	}
	if got[m.label] {
		rs.add(one)
	}
	return nil
}

// rowSet collects distinct rows of one series name.
type rowSet struct {
	name string
	seen map[string]bool
	rows []rules.Series
}

// add adds a row with the name and ls (which it keeps).
func (s *rowSet) add(ls model.LabelSet) {
	ls[model.MetricNameLabel] = model.LabelValue(s.name)
	k := ls.String()
	if s.seen[k] {
		return
	}
	s.seen[k] = true
	s.rows = append(s.rows, rules.Series{Name: s.name, Labels: ls})
}
