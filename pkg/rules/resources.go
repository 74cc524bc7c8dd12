package rules

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/template"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/config"
)

// ErrNoLabelForResource is returned when a rule has no label for a
// group-resource: no override names it and there is no template.
var ErrNoLabelForResource = errors.New("no label for resource")

// NamespaceResource is the core namespaces resource: a series label mapped
// to it makes the series namespaced.
var NamespaceResource = schema.GroupResource{Resource: "namespaces"}

// groupSanitizer writes an API group the way resource templates see it:
// "networking.k8s.io" becomes "networking_k8s_io".
var groupSanitizer = strings.NewReplacer(".", "_", "-", "_")

// SanitizeGroup returns group as resource templates render it: "." and "-"
// replaced by "_".
func SanitizeGroup(group string) string { return groupSanitizer.Replace(group) }

// sentinels stand for .Group and .Resource when a resource template is
// turned into a label pattern. NUL bytes never occur in label names.
const (
	groupSentinel    = "\x00G\x00"
	resourceSentinel = "\x00R\x00"
)

// ResourceMapper maps the series labels of one rule to Kubernetes
// group-resources and back, as prometheus-adapter's resources section does:
//
//   - overrides: label -> group-resource, normalised through the RESTMapper
//     (so {resource: pod} means core "pods");
//   - template (e.g. "kube_<<.Group>>_<<.Resource>>"): rendering a
//     group-resource uses the singular resource name and the group with "."
//     and "-" written as "_"; recognising a label matches it against the
//     template turned into an anchored pattern and resolves the candidate
//     (group, resource) through the RESTMapper.
//
// Overrides win over the template in both directions. A ResourceMapper is
// safe for concurrent use; it memoises resolutions (see ForgetUnresolved).
type ResourceMapper struct {
	rest meta.RESTMapper

	overrides  map[string]schema.GroupResource // label -> resource
	byResource map[schema.GroupResource]string // resource -> label

	tmpl     *template.Template
	patterns []labelPattern

	labels    sync.Map // string label -> labelResolution
	resLabels sync.Map // schema.GroupResource -> string
}

type labelResolution struct {
	gr schema.GroupResource
	ok bool
}

// groupConstraint says which groups a template pattern may resolve to.
type groupConstraint int

const (
	anyGroup     groupConstraint = iota // template ignores .Group
	fromLabel                           // group is captured from the label
	coreOnly                            // rendering of the core group ("")
	nonCoreGroup                        // rendering with a group that does not print it
)

// labelPattern is a rendered resource template split into literal text and
// placeholders for the group and the resource.
type labelPattern struct {
	parts []patternPart
	group groupConstraint
}

type patternPart struct {
	lit  string
	kind byte // 0 literal, 'G' group, 'R' resource
}

// NewResourceMapper compiles a rule's resources section. rest resolves
// resource names; it must not be nil. Overrides naming a resource the
// RESTMapper does not know are kept as written (lower-cased) and reported in
// warnings, so that configurations for CRDs not (yet) installed still load.
func NewResourceMapper(cfg config.ResourceMapping, rest meta.RESTMapper) (m *ResourceMapper, warnings []string, err error) {
	if rest == nil {
		return nil, nil, errors.New("no RESTMapper")
	}
	m = &ResourceMapper{
		rest:       rest,
		overrides:  make(map[string]schema.GroupResource, len(cfg.Overrides)),
		byResource: make(map[schema.GroupResource]string, len(cfg.Overrides)),
	}
	var errs []error
	if cfg.Template != "" {
		if err := m.compileTemplate(cfg.Template); err != nil {
			errs = append(errs, fmt.Errorf("template: %w", err))
		}
	}
	lbls := slices.Sorted(maps.Keys(cfg.Overrides))
	for _, l := range lbls {
		o := cfg.Overrides[l]
		if err := checkLabelName(l); err != nil {
			errs = append(errs, fmt.Errorf("overrides[%s]: %w", l, err))
			continue
		}
		if o.Resource == "" {
			errs = append(errs, fmt.Errorf("overrides[%s].resource: must not be empty", l))
			continue
		}
		gr := schema.GroupResource{Group: o.Group, Resource: strings.ToLower(o.Resource)}
		if gvr, err := rest.ResourceFor(gr.WithVersion("")); err == nil {
			gr = gvr.GroupResource()
		} else {
			warnings = append(warnings, fmt.Sprintf("overrides[%s]: resource %s is not known to the API server (kept as written): %v", l, gr, err))
		}
		m.overrides[l] = gr
		if prev, dup := m.byResource[gr]; dup {
			warnings = append(warnings, fmt.Sprintf("overrides[%s]: resource %s is also mapped from label %q, which is used when rendering queries", l, gr, prev))
			continue
		}
		m.byResource[gr] = l
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return m, warnings, nil
}

func (m *ResourceMapper) compileTemplate(text string) error {
	t, err := config.NewTemplate("template", text)
	if err != nil {
		return fmt.Errorf("parsing: %w", err)
	}
	render := func(group string) (string, error) {
		return config.Render(t, &config.ResourceTemplateData{Group: group, Resource: resourceSentinel})
	}
	withGroup, err := render(groupSentinel)
	if err != nil {
		return fmt.Errorf("rendering: %w", err)
	}
	core, err := render("")
	if err != nil {
		return fmt.Errorf("rendering for the core group: %w", err)
	}
	pg := splitPattern(withGroup)
	if !pg.hasResource() {
		return errors.New("must use <<.Resource>> (printed as is) so that labels can be recognised")
	}
	switch {
	case strings.Contains(withGroup, groupSentinel):
		pg.group = fromLabel
	case withGroup != core:
		pg.group = nonCoreGroup
	default:
		pg.group = anyGroup
	}
	m.patterns = append(m.patterns, pg)
	if core != withGroup {
		pc := splitPattern(core)
		pc.group = coreOnly
		if pc.hasResource() {
			m.patterns = append(m.patterns, pc)
		}
	}
	m.tmpl = t
	return nil
}

func splitPattern(s string) labelPattern {
	var p labelPattern
	for s != "" {
		gi := strings.Index(s, groupSentinel)
		ri := strings.Index(s, resourceSentinel)
		i, kind := gi, byte('G')
		if i < 0 || (ri >= 0 && ri < i) {
			i, kind = ri, 'R'
		}
		if i < 0 {
			p.parts = append(p.parts, patternPart{lit: s})
			break
		}
		if i > 0 {
			p.parts = append(p.parts, patternPart{lit: s[:i]})
		}
		p.parts = append(p.parts, patternPart{kind: kind})
		s = s[i+len(groupSentinel):] // both sentinels have the same length
	}
	return p
}

func (p labelPattern) hasResource() bool {
	for _, pp := range p.parts {
		if pp.kind == 'R' {
			return true
		}
	}
	return false
}

// maxCandidates bounds the (group, resource) splits tried for one label.
const maxCandidates = 64

// candidates returns the (group, resource) assignments under which the
// pattern renders to label, shortest group first (prometheus-adapter's
// non-greedy match). Placeholders match non-empty text; a placeholder used
// twice must match the same text both times.
func (p labelPattern) candidates(label string) [][2]string {
	var out [][2]string
	var walk func(i int, rest string, g, r string)
	walk = func(i int, rest string, g, r string) {
		if len(out) >= maxCandidates {
			return
		}
		if i == len(p.parts) {
			if rest == "" {
				out = append(out, [2]string{g, r})
			}
			return
		}
		part := p.parts[i]
		if part.kind == 0 {
			if strings.HasPrefix(rest, part.lit) {
				walk(i+1, rest[len(part.lit):], g, r)
			}
			return
		}
		bound := g
		if part.kind == 'R' {
			bound = r
		}
		if bound != "" {
			if strings.HasPrefix(rest, bound) {
				walk(i+1, rest[len(bound):], g, r)
			}
			return
		}
		for n := 1; n <= len(rest); n++ {
			if part.kind == 'G' {
				walk(i+1, rest[n:], rest[:n], r)
			} else {
				walk(i+1, rest[n:], g, rest[:n])
			}
		}
	}
	walk(0, label, "", "")
	return out
}

// ResourceForLabel returns the group-resource a series label stands for.
// Reserved labels (starting with "__") never map to a resource.
func (m *ResourceMapper) ResourceForLabel(label string) (schema.GroupResource, bool) {
	if gr, ok := m.overrides[label]; ok {
		return gr, true
	}
	if len(m.patterns) == 0 || strings.HasPrefix(label, "__") {
		return schema.GroupResource{}, false
	}
	if v, ok := m.labels.Load(label); ok {
		r := v.(labelResolution)
		return r.gr, r.ok
	}
	gr, ok := m.resolveLabel(label)
	m.labels.Store(label, labelResolution{gr: gr, ok: ok})
	return gr, ok
}

func (m *ResourceMapper) resolveLabel(label string) (schema.GroupResource, bool) {
	for _, p := range m.patterns {
		for _, c := range p.candidates(label) {
			if gr, ok := m.resolveCandidate(p.group, c[0], c[1]); ok {
				return gr, true
			}
		}
	}
	return schema.GroupResource{}, false
}

func (m *ResourceMapper) resolveCandidate(gc groupConstraint, group, resource string) (schema.GroupResource, bool) {
	switch gc {
	case fromLabel:
		if gvr, err := m.rest.ResourceFor(schema.GroupVersionResource{Group: group, Resource: resource}); err == nil &&
			SanitizeGroup(gvr.Group) == group {
			return gvr.GroupResource(), true
		}
		// The label carries the sanitised group ("networking_k8s_io"):
		// find the resource in any group and compare sanitised names.
		return m.resourceInGroup(resource, func(g string) bool { return SanitizeGroup(g) == group })
	case coreOnly:
		return m.resourceInGroup(resource, func(g string) bool { return g == "" })
	case nonCoreGroup:
		gvr, err := m.rest.ResourceFor(schema.GroupVersionResource{Resource: resource})
		if err != nil || gvr.Group == "" {
			return schema.GroupResource{}, false
		}
		return gvr.GroupResource(), true
	default: // anyGroup, as prometheus-adapter: the RESTMapper decides
		gvr, err := m.rest.ResourceFor(schema.GroupVersionResource{Resource: resource})
		if err != nil {
			return schema.GroupResource{}, false
		}
		return gvr.GroupResource(), true
	}
}

// resourceInGroup returns the first resource named resource, of any
// group, whose group passes in.
func (m *ResourceMapper) resourceInGroup(resource string, in func(group string) bool) (schema.GroupResource, bool) {
	all, err := m.rest.ResourcesFor(schema.GroupVersionResource{Resource: resource})
	if err != nil {
		return schema.GroupResource{}, false
	}
	for _, gvr := range all {
		if in(gvr.Group) {
			return gvr.GroupResource(), true
		}
	}
	return schema.GroupResource{}, false
}

// ResourcesForSeries returns the group-resources the series' labels map to
// (sorted by group then resource, without duplicates) and whether the series
// is namespaced, i.e. one of its labels maps to the core namespaces
// resource. Only label names matter.
func (m *ResourceMapper) ResourcesForSeries(lbls model.LabelSet) ([]schema.GroupResource, bool) {
	var out []schema.GroupResource
	namespaced := false
	for l := range lbls {
		gr, ok := m.ResourceForLabel(string(l))
		if !ok {
			continue
		}
		if gr == NamespaceResource {
			namespaced = true
		}
		if !slices.Contains(out, gr) {
			out = append(out, gr)
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupResource) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Resource, b.Resource))
	})
	return out, namespaced
}

// LabelForResource returns the series label that carries the names of
// objects of the given (normalised, plural) group-resource: the override
// naming it, else the template rendered with the singular resource name and
// the sanitised group. The label is validated as a Prometheus label name.
func (m *ResourceMapper) LabelForResource(gr schema.GroupResource) (string, error) {
	if l, ok := m.byResource[gr]; ok {
		return l, nil
	}
	if m.tmpl == nil {
		return "", fmt.Errorf("%w %s: no override names it and the rule has no resources.template", ErrNoLabelForResource, gr.String())
	}
	if v, ok := m.resLabels.Load(gr); ok {
		return v.(string), nil
	}
	singular, err := m.rest.ResourceSingularizer(gr.Resource)
	if err != nil {
		return "", fmt.Errorf("%w %s: singularising %q: %w", ErrNoLabelForResource, gr.String(), gr.Resource, err)
	}
	l, err := config.Render(m.tmpl, &config.ResourceTemplateData{Group: SanitizeGroup(gr.Group), Resource: singular})
	if err != nil {
		return "", fmt.Errorf("%w %s: rendering resources.template: %w", ErrNoLabelForResource, gr.String(), err)
	}
	if err := checkLabelName(l); err != nil {
		return "", fmt.Errorf("%w %s: resources.template rendered %w", ErrNoLabelForResource, gr.String(), err)
	}
	m.resLabels.Store(gr, l)
	return l, nil
}

// ForgetUnresolved drops memoised "label maps to no resource" answers so
// that labels are resolved again, e.g. after new CRDs were installed. Call
// it at the start of a discovery cycle, not per request.
func (m *ResourceMapper) ForgetUnresolved() {
	m.labels.Range(func(k, v any) bool {
		if !v.(labelResolution).ok {
			m.labels.Delete(k)
		}
		return true
	})
}

// Overrides returns a copy of the normalised overrides, label -> resource.
func (m *ResourceMapper) Overrides() map[string]schema.GroupResource {
	out := make(map[string]schema.GroupResource, len(m.overrides))
	for k, v := range m.overrides {
		out[k] = v
	}
	return out
}

// HasTemplate reports whether the rule has a resources.template.
func (m *ResourceMapper) HasTemplate() bool { return m.tmpl != nil }
