package config

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/promscaler/promscaler/internal/truncate"
)

// Validate checks the configuration and returns every error found, in file
// order (each with its path and, for a parsed configuration, its position).
// Parse already calls it; call it again after changing a Config in code.
func (c *Config) Validate() ErrorList {
	return c.check().errs
}

// Warnings returns the harmless oddities of the configuration: things that
// prometheus-adapter accepts and that still load, but are probably not what
// was meant (e.g. resources.namespaced on a custom-metrics rule, a rule
// without metricsQuery).
func (c *Config) Warnings() ErrorList {
	return c.check().warns
}

// QueryErrors returns the queries of the configuration that Prometheus
// would reject, checked with Prometheus's own PromQL parser: a seriesQuery
// that is not a series selector, a query template whose rendering (with
// sample values) does not parse. prometheus-adapter loads such a file, and
// so does Parse; the caller decides: the adapter loads it with a warning at
// startup (refuses it with --strict) and refuses it on reload, keeping the
// rules in service, and check-config fails on it.
func (c *Config) QueryErrors() ErrorList {
	return c.check().rejects
}

// IsNamespaced reports whether an external rule applies the request
// namespace as a matcher: true unless namespaced is set to false.
func (m *ResourceMapping) IsNamespaced() bool {
	return m.Namespaced == nil || *m.Namespaced
}

// IsNamespaced reports whether the request namespace is added as a matcher:
// false unless namespaced is set to true.
func (q *ExternalQuery) IsNamespaced() bool {
	return q.Namespaced != nil && *q.Namespaced
}

// DefaultNamespaceLabel is the label an external query matches the request
// namespace against when namespaceLabel is not set.
const DefaultNamespaceLabel = "namespace"

// NamespaceLabelOrDefault returns namespaceLabel, or DefaultNamespaceLabel.
func (q *ExternalQuery) NamespaceLabelOrDefault() string {
	if q.NamespaceLabel == "" {
		return DefaultNamespaceLabel
	}
	return q.NamespaceLabel
}

// Paths of the top-level sections, for IndexPath and KeyPath.
const (
	PathRules           = "rules"
	PathExternalRules   = "externalRules"
	PathResourceRules   = "resourceRules"
	PathExternalQueries = "externalQueries"
)

type checker struct {
	c       *Config
	errs    ErrorList
	warns   ErrorList
	rejects ErrorList // queries Prometheus would reject: see QueryErrors
}

func (ch *checker) errorf(path, hint, format string, args ...any) *Error {
	e := ch.c.ErrorAt(path, format, args...)
	e.Hint = hint
	ch.errs = append(ch.errs, e)
	return e
}

// atKey moves e to the key of path, for problems with the key itself.
func (ch *checker) atKey(e *Error, path string) {
	if ch.c.Source == nil {
		return
	}
	if pos, ok := ch.c.Source.Keys[path]; ok {
		e.Line, e.Column = pos.Line, pos.Column
	}
}

func (ch *checker) warnf(path, hint, format string, args ...any) {
	e := ch.c.ErrorAt(path, format, args...)
	e.Hint = hint
	ch.warns = append(ch.warns, e)
}

func (ch *checker) rejectf(path, hint, format string, args ...any) {
	e := ch.c.ErrorAt(path, format, args...)
	e.Hint = hint
	ch.rejects = append(ch.rejects, e)
}

func (c *Config) check() *checker {
	ch := &checker{c: c}
	if c == nil {
		return ch
	}
	for i := range c.Rules {
		ch.rule(IndexPath(PathRules, i), &c.Rules[i], false)
	}
	for i := range c.ExternalRules {
		ch.rule(IndexPath(PathExternalRules, i), &c.ExternalRules[i], true)
	}
	if c.ResourceRules != nil {
		ch.resourceRules(PathResourceRules, c.ResourceRules)
	}
	seen := map[string]string{}
	for i := range c.ExternalQueries {
		p := IndexPath(PathExternalQueries, i)
		ch.externalQuery(p, &c.ExternalQueries[i])
		name := c.ExternalQueries[i].Name
		if name == "" {
			continue
		}
		if first, dup := seen[name]; dup {
			where := first
			if pos, ok := c.Position(KeyPath(first, "name")); ok && pos.Line > 0 {
				where = fmt.Sprintf("%s (line %d)", first, pos.Line)
			}
			ch.errorf(KeyPath(p, "name"), "", "duplicate external query name %q, already used by %s", name, where)
			continue
		}
		seen[name] = p
	}
	sortList(ch.errs)
	sortList(ch.warns)
	sortList(ch.rejects)
	return ch
}

// templateError reports a template problem at the exact place inside the
// value when the source holds it verbatim, else at the value.
func (ch *checker) templateError(path, text string, p *templateProblem) {
	e := ch.errorf(path, "", "%s", p.Msg)
	if ch.c.Source == nil || p.Line < 1 {
		return
	}
	start, ok := ch.c.Source.Content[path]
	if !ok {
		return
	}
	lines := strings.Split(text, "\n")
	if p.Line > len(lines) {
		return
	}
	e.Line = start.Line + p.Line - 1
	e.Column = start.Column
	if p.Col >= 0 && p.Col <= len(lines[p.Line-1]) {
		e.Column += len([]rune(lines[p.Line-1][:p.Col]))
	}
}

func (ch *checker) queryTemplate(path, name, text string, kind queryKind, window string) {
	p, rejected := checkQueryTemplate(name, text, kind, window)
	if p != nil {
		ch.templateError(path, text, p)
	} else if rejected != "" {
		ch.rejectf(path, "", "%s", rejected)
	}
}

func (ch *checker) rule(path string, r *DiscoveryRule, external bool) {
	if strings.TrimSpace(r.SeriesQuery) == "" {
		ch.errorf(KeyPath(path, "seriesQuery"), `e.g. seriesQuery: '{__name__=~"^http_requests_.*",namespace!="",pod!=""}'`,
			"seriesQuery is required: it is the Prometheus series selector used to discover the metrics")
	}
	if strings.TrimSpace(r.SeriesQuery) != "" {
		if err := CheckSeriesSelector(r.SeriesQuery); err != nil {
			ch.rejectf(KeyPath(path, "seriesQuery"), `a series selector such as '{__name__=~"^http_.*",namespace!=""}'`,
				"Prometheus would reject seriesQuery as a series selector: %v", err)
		}
	}
	for j, f := range r.SeriesFilters {
		ch.filter(IndexPath(KeyPath(path, "seriesFilters"), j), f)
	}
	ch.mapping(KeyPath(path, "resources"), &r.Resources, external, false)
	ch.name(KeyPath(path, "name"), r.Name)
	ch.fixedSeriesName(path, r)
	qp := KeyPath(path, "metricsQuery")
	if strings.TrimSpace(r.MetricsQuery) == "" {
		ch.warnf(qp, "set metricsQuery explicitly",
			"metricsQuery is not set; promscaler uses %s (prometheus-adapter would send an empty query, which Prometheus rejects)", DefaultMetricsQuery)
	} else {
		ch.queryTemplate(qp, "metricsQuery", r.MetricsQuery, discoveryQuery, "")
	}
	if external {
		ch.externalNamespace(path, r)
	}
	ch.quantity(KeyPath(path, "defaultValue"), r.DefaultValue)
	ch.maxSampleAge(KeyPath(path, "maxSampleAge"), r.MaxSampleAge)
}

// externalNamespace warns about a namespaced external rule (the default)
// that maps no label to namespaces: a request in a namespace cannot be
// matched to its series, so it serves nothing there.
func (ch *checker) externalNamespace(path string, r *DiscoveryRule) {
	m := &r.Resources
	if !m.IsNamespaced() || m.Template != "" {
		return
	}
	for _, gr := range m.Overrides {
		if gr.Group == "" && singular(strings.ToLower(gr.Resource)) == "namespace" {
			return
		}
	}
	ch.warnf(KeyPath(path, "resources"), `map the label, e.g. resources: {overrides: {namespace: {resource: namespace}}}, or set resources.namespaced: false`,
		"this external rule is namespaced (resources.namespaced is not false) but no label maps to namespaces, so requests in a namespace cannot select its series")
}

var (
	// bareNameRE finds the metric name of "name{...}" selectors.
	bareNameRE = regexp.MustCompile(`^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{|$)`)
	// exactNameRE finds an equality matcher on __name__.
	exactNameRE = regexp.MustCompile(`(?:^|[{,\s])__name__\s*=\s*("(?:[^"\\]|\\.)*")`)
)

// fixedSeriesName warns when seriesQuery selects a single series name
// that the rule's own filters or name.matches then reject: such a rule
// serves nothing, whatever Prometheus holds.
func (ch *checker) fixedSeriesName(path string, r *DiscoveryRule) {
	name := ""
	if m := bareNameRE.FindStringSubmatch(r.SeriesQuery); m != nil {
		name = m[1]
	} else if m := exactNameRE.FindStringSubmatch(r.SeriesQuery); m != nil {
		unq, err := strconv.Unquote(m[1])
		if err != nil {
			return
		}
		name = unq
	}
	if name == "" {
		return
	}
	for j, f := range r.SeriesFilters {
		expr, keep := f.Is, true
		if expr == "" {
			expr, keep = f.IsNot, false
		}
		re, err := regexp.Compile(expr)
		if err != nil || expr == "" || f.Is != "" && f.IsNot != "" {
			continue
		}
		if re.MatchString(name) != keep {
			ch.warnf(IndexPath(KeyPath(path, "seriesFilters"), j), "",
				"this filter drops %q, the only series name seriesQuery selects, so the rule serves no metric", name)
			return
		}
	}
	if r.Name.Matches == "" {
		return
	}
	if re, err := regexp.Compile(r.Name.Matches); err == nil && !re.MatchString(name) {
		ch.warnf(KeyPath(KeyPath(path, "name"), "matches"), "",
			"name.matches does not match %q, the only series name seriesQuery selects, so the rule serves no metric", name)
	}
}

func (ch *checker) filter(path string, f RegexFilter) {
	switch {
	case f.Is != "" && f.IsNot != "":
		ch.errorf(path, "split it into two filters", "a series filter sets both is and isNot; set exactly one")
	case f.Is == "" && f.IsNot == "":
		ch.errorf(path, "", "a series filter needs is or isNot (a regular expression over the series name)")
	case f.Is != "":
		ch.regex(KeyPath(path, "is"), f.Is)
	default:
		ch.regex(KeyPath(path, "isNot"), f.IsNot)
	}
}

func (ch *checker) regex(path, expr string) *regexp.Regexp {
	re, err := regexp.Compile(expr)
	if err != nil {
		ch.errorf(path, "the syntax is Go's RE2 (no look-around or back-references)",
			"invalid regular expression %q: %s", truncate.String(expr, 80), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		return nil
	}
	return re
}

func (ch *checker) mapping(path string, m *ResourceMapping, external, resourceRule bool) {
	if m.Template != "" {
		if p := checkResourceTemplate(m.Template); p != nil {
			ch.templateError(KeyPath(path, "template"), m.Template, p)
		}
	}
	keys := slices.Sorted(maps.Keys(m.Overrides))
	op := KeyPath(path, "overrides")
	for _, label := range keys {
		gr := m.Overrides[label]
		p := KeyPath(op, label)
		if !model.LegacyValidation.IsValidLabelName(label) {
			ch.warnf(p, "", "%q is not a valid Prometheus label name, so no series can carry it", label)
			ch.atKey(ch.warns[len(ch.warns)-1], p)
		}
		if strings.TrimSpace(gr.Resource) == "" {
			ch.errorf(KeyPath(p, "resource"), `e.g. `+label+`: {resource: "pod"}`, "override of label %q names no resource", label)
		}
	}
	byResource := map[string][]string{}
	for _, label := range keys {
		gr := m.Overrides[label]
		if strings.TrimSpace(gr.Resource) == "" {
			continue
		}
		k := strings.ToLower(gr.Group) + "/" + singular(strings.ToLower(gr.Resource))
		byResource[k] = append(byResource[k], label)
	}
	for _, label := range keys {
		gr := m.Overrides[label]
		k := strings.ToLower(gr.Group) + "/" + singular(strings.ToLower(gr.Resource))
		if labels := byResource[k]; len(labels) > 1 && labels[0] == label {
			ch.warnf(op, "keep one override per resource",
				"labels %s all map to %s, so which one a query matches on is ambiguous", strings.Join(labels, ", "), groupResource(gr))
		}
	}
	if m.Namespaced != nil && !external {
		what := "rules (custom metrics)"
		if resourceRule {
			what = "resourceRules"
		}
		ch.warnf(KeyPath(path, "namespaced"), "remove it, or move the rule to externalRules",
			"namespaced only applies to externalRules; it has no effect on %s", what)
	}
	if !external && !resourceRule && m.Template == "" && len(m.Overrides) == 0 {
		ch.warnf(path, `e.g. resources: {template: "<<.Resource>>"} or overrides`,
			"resources maps no label to a Kubernetes resource (no template, no overrides), so this rule serves no metric")
	}
}

// singular strips the plural ending of a resource name well enough to tell
// "pod" and "pods", "ingress" and "ingresses" apart from distinct resources.
func singular(r string) string {
	switch {
	case strings.HasSuffix(r, "sses"), strings.HasSuffix(r, "xes"), strings.HasSuffix(r, "ches"):
		return strings.TrimSuffix(r, "es")
	case strings.HasSuffix(r, "ies"):
		return strings.TrimSuffix(r, "ies") + "y"
	case strings.HasSuffix(r, "s") && !strings.HasSuffix(r, "ss"):
		return strings.TrimSuffix(r, "s")
	}
	return r
}

func groupResource(gr GroupResource) string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}

// nameRefRE matches the $name / ${name} references of a regexp expansion
// template the way regexp.Expand reads them.
var nameRefRE = regexp.MustCompile(`\$(?:\{([a-zA-Z0-9_]+)\}|([a-zA-Z0-9_]+)|\$)`)

func (ch *checker) name(path string, n NameMapping) {
	matches := n.Matches
	if matches == "" {
		matches = ".*"
	}
	re := ch.regex(KeyPath(path, "matches"), matches)
	if re == nil {
		return
	}
	if n.As == "" {
		if re.NumSubexp() > 1 {
			ch.errorf(KeyPath(path, "as"), `e.g. as: "${1}_${2}"`,
				"name.matches has %d capture groups, so as is required (it defaults to $0 with no group and $1 with one)", re.NumSubexp())
		}
		return
	}
	names := re.SubexpNames()
	for _, m := range nameRefRE.FindAllStringSubmatch(n.As, -1) {
		ref := m[1] + m[2]
		if ref == "" { // "$$"
			continue
		}
		if isNumber(ref) {
			if len(ref) > 8 || atoi(ref) > re.NumSubexp() {
				ch.errorf(KeyPath(path, "as"), "",
					"as refers to capture group %s, but name.matches %q has %d", ref, matches, re.NumSubexp())
			}
			continue
		}
		found := false
		for _, sn := range names {
			if sn == ref {
				found = true
			}
		}
		if !found {
			hint := ""
			if i := strings.IndexFunc(ref, func(r rune) bool { return r < '0' || r > '9' }); m[2] != "" && i > 0 {
				hint = fmt.Sprintf("$%s is read as one group name; write ${%s}%s", ref, ref[:i], ref[i:])
			}
			ch.errorf(KeyPath(path, "as"), hint,
				"as refers to capture group %q, which name.matches %q does not define", ref, matches)
		}
	}
}

func isNumber(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

func (ch *checker) quantity(path string, v *string) {
	if v == nil {
		return
	}
	if err := checkQuantity(*v); err != nil {
		ch.errorf(path, `e.g. "0", "1.5", "100m", "2Ki"`, "defaultValue %q is not a Kubernetes quantity: %v", truncate.String(*v, 40), err)
	}
}

// Bounds on a defaultValue checked before resource.ParseQuantity, whose
// time grows with the decimal exponent (a few characters such as
// "1e-99999999" keep it busy for minutes).
const (
	maxQuantityLen      = 64
	maxQuantityExponent = 64
)

var quantityExpRE = regexp.MustCompile(`[eE]([+-]?[0-9]+)$`)

func checkQuantity(s string) error {
	if len(s) > maxQuantityLen {
		return fmt.Errorf("longer than %d characters", maxQuantityLen)
	}
	if m := quantityExpRE.FindStringSubmatch(s); m != nil {
		exp := strings.TrimLeft(m[1], "+-")
		if exp = strings.TrimLeft(exp, "0"); len(exp) > 2 || exp != "" && atoi(exp) > maxQuantityExponent {
			return fmt.Errorf("exponent out of range (at most e%d)", maxQuantityExponent)
		}
	}
	if _, err := resource.ParseQuantity(s); err != nil {
		if errors.Is(err, resource.ErrFormatWrong) {
			return errors.New("expected a number with an optional suffix")
		}
		return err
	}
	return nil
}

func (ch *checker) resourceRules(path string, r *ResourceRules) {
	window := r.Window
	if r.Window != "" {
		if _, err := model.ParseDuration(r.Window); err != nil {
			ch.errorf(KeyPath(path, "window"), `a Prometheus duration such as "1m" or "5m30s"`,
				"window %q is not a duration", truncate.String(r.Window, 40))
			window = "1m" // keep checking the templates as if it were set
		}
	}
	ch.resourceRule(KeyPath(path, "cpu"), &r.CPU, window)
	ch.resourceRule(KeyPath(path, "memory"), &r.Memory, window)
}

func (ch *checker) resourceRule(path string, r *ResourceRule, window string) {
	if r.ContainerQuery == "" && r.NodeQuery == "" && r.ContainerLabel == "" &&
		r.Resources.Template == "" && len(r.Resources.Overrides) == 0 && r.Resources.Namespaced == nil {
		ch.errorf(path, "", "is required when resourceRules is set (containerQuery, nodeQuery, resources, containerLabel)")
		return
	}
	for _, q := range []struct{ key, text string }{{"containerQuery", r.ContainerQuery}, {"nodeQuery", r.NodeQuery}} {
		p := KeyPath(path, q.key)
		if strings.TrimSpace(q.text) == "" {
			ch.errorf(p, "", "%s is required", q.key)
			continue
		}
		ch.queryTemplate(p, q.key, q.text, resourceQuery, window)
	}
	ch.mapping(KeyPath(path, "resources"), &r.Resources, false, true)
	if r.Resources.Template == "" && len(r.Resources.Overrides) == 0 {
		ch.errorf(KeyPath(path, "resources"), `e.g. resources: {overrides: {node: {resource: node}, namespace: {resource: namespace}, pod: {resource: pod}}}`,
			"resources must map series labels to nodes, namespaces and pods (template or overrides)")
	}
	if r.ContainerLabel == "" {
		ch.warnf(KeyPath(path, "containerLabel"), `usually containerLabel: container`,
			"containerLabel is not set, so the containers of a pod cannot be told apart")
	} else if !model.LegacyValidation.IsValidLabelName(r.ContainerLabel) {
		ch.errorf(KeyPath(path, "containerLabel"), "", "%q is not a valid Prometheus label name", r.ContainerLabel)
	}
}

// externalMetricNameRE is what promscaler accepts as an external metric
// name: a Prometheus metric name, plus '-' and '.', which Kubernetes
// resource names commonly use.
var externalMetricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:.\-]*$`)

func (ch *checker) externalQuery(path string, q *ExternalQuery) {
	np := KeyPath(path, "name")
	switch {
	case q.Name == "":
		ch.errorf(np, "", "name is required: the external metric name the query is served as")
	case !externalMetricNameRE.MatchString(q.Name):
		ch.errorf(np, "letters, digits, '_', ':', '-' and '.', not starting with a digit, '-' or '.'",
			"%q is not a valid external metric name", truncate.String(q.Name, 60))
	}
	qp := KeyPath(path, "query")
	if strings.TrimSpace(q.Query) == "" {
		ch.errorf(qp, `e.g. query: 'sum(queue_depth{<<.LabelMatchers>>})'`, "query is required")
	} else {
		ch.queryTemplate(qp, "query", q.Query, discoveryQuery, "")
	}
	if q.NamespaceLabel != "" {
		if !model.LegacyValidation.IsValidLabelName(q.NamespaceLabel) {
			ch.errorf(KeyPath(path, "namespaceLabel"), "", "%q is not a valid Prometheus label name", q.NamespaceLabel)
		} else if !q.IsNamespaced() {
			ch.warnf(KeyPath(path, "namespaceLabel"), "set namespaced: true to use it",
				"namespaceLabel has no effect because namespaced is not true")
		}
	}
	ch.quantity(KeyPath(path, "defaultValue"), q.DefaultValue)
	ch.maxSampleAge(KeyPath(path, "maxSampleAge"), q.MaxSampleAge)
}
