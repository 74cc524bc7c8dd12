package rules

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/pkg/config"
)

// Core resources queried by resource rules.
var (
	podResource  = schema.GroupResource{Resource: "pods"}
	nodeResource = schema.GroupResource{Resource: "nodes"}
)

// ResourceRules is the compiled resourceRules section (metrics.k8s.io).
type ResourceRules struct {
	// CPU and Memory are the per-resource rules.
	CPU, Memory *ResourceRule
	window      string
	backend     string
}

// Backend returns the name of the backend the CPU and memory queries are
// sent to.
func (r *ResourceRules) Backend() string { return r.backend }

// Window returns the configured window as written (e.g. "5m"; "" when
// unset). It is rendered as .Window.
func (r *ResourceRules) Window() string { return r.window }

// ResourceRule is one compiled resource rule (cpu or memory).
type ResourceRule struct {
	path           string
	containerQuery *config.QueryTemplate
	nodeQuery      *config.QueryTemplate
	resources      *ResourceMapper
	containerLabel string
	window         string
}

// ResourceRequest is what a resource metrics query is rendered for.
type ResourceRequest struct {
	// Namespace of the pods; "" for all namespaces. Ignored for nodes.
	Namespace string
	// Names of the pods or nodes; see CustomRequest.Names.
	Names []string
	// AllObjects asks for every pod (in Namespace) or node, without a name
	// matcher; see CustomRequest.AllObjects.
	AllObjects bool
}

// Path returns the rule's place in the configuration, e.g.
// "resourceRules.cpu".
func (r *ResourceRule) Path() string { return r.path }

// ContainerLabel returns the label carrying container names ("" if unset).
func (r *ResourceRule) ContainerLabel() string { return r.containerLabel }

// Resources returns the rule's label <-> resource mapper.
func (r *ResourceRule) Resources() *ResourceMapper { return r.resources }

// ContainerQuery renders containerQuery for pods: matchers namespace then
// pod, grouped by the pod label then the container label.
func (r *ResourceRule) ContainerQuery(req ResourceRequest) (Query, error) {
	ms, resLabel, nsLabel, err := objectMatchers(r.resources, nil, podResource, req.Namespace, req.Names, req.AllObjects)
	if err != nil {
		return Query{}, fmt.Errorf("%s: %w", r.path, err)
	}
	groupBy := []string{resLabel}
	if r.containerLabel != "" {
		groupBy = append(groupBy, r.containerLabel)
	}
	in := renderInput{matchers: ms, groupBy: groupBy, window: r.window}
	if req.AllObjects {
		in.allObjects = resLabel
	}
	expr, err := renderQuery(r.containerQuery, in)
	if err != nil {
		return Query{}, fmt.Errorf("%s.containerQuery: %w", r.path, err)
	}
	return Query{Expr: expr, ResourceLabel: resLabel, NamespaceLabel: nsLabel}, nil
}

// NodeQuery renders nodeQuery for nodes, grouped by the node label.
func (r *ResourceRule) NodeQuery(req ResourceRequest) (Query, error) {
	ms, resLabel, _, err := objectMatchers(r.resources, nil, nodeResource, "", req.Names, req.AllObjects)
	if err != nil {
		return Query{}, fmt.Errorf("%s: %w", r.path, err)
	}
	in := renderInput{matchers: ms, groupBy: []string{resLabel}, window: r.window}
	if req.AllObjects {
		in.allObjects = resLabel
	}
	expr, err := renderQuery(r.nodeQuery, in)
	if err != nil {
		return Query{}, fmt.Errorf("%s.nodeQuery: %w", r.path, err)
	}
	return Query{Expr: expr, ResourceLabel: resLabel}, nil
}

func compileResourceRules(c *config.ResourceRules, rest meta.RESTMapper) (*ResourceRules, []string, error) {
	cpu, wc, errc := compileResourceRule("resourceRules.cpu", c.CPU, c.Window, rest)
	mem, wm, errm := compileResourceRule("resourceRules.memory", c.Memory, c.Window, rest)
	if err := errors.Join(errc, errm); err != nil {
		return nil, nil, err
	}
	return &ResourceRules{CPU: cpu, Memory: mem, window: c.Window, backend: config.BackendOrDefault(c.Backend)}, append(wc, wm...), nil
}

func compileResourceRule(path string, c config.ResourceRule, window string, rest meta.RESTMapper) (*ResourceRule, []string, error) {
	r := &ResourceRule{path: path, containerLabel: c.ContainerLabel, window: window}
	var errs []error
	for _, q := range []struct {
		field string
		text  string
		dst   **config.QueryTemplate
	}{
		{"containerQuery", c.ContainerQuery, &r.containerQuery},
		{"nodeQuery", c.NodeQuery, &r.nodeQuery},
	} {
		if strings.TrimSpace(q.text) == "" {
			errs = append(errs, fmt.Errorf("%s.%s: must not be empty", path, q.field))
			continue
		}
		t, err := config.ParseQueryTemplate(q.field, q.text)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", path, q.field, err))
			continue
		}
		*q.dst = t
	}
	if c.ContainerLabel != "" {
		if err := checkLabelName(c.ContainerLabel); err != nil {
			errs = append(errs, fmt.Errorf("%s.containerLabel: %w", path, err))
		}
	}
	res, warns, err := compileResources(path, c.Resources, rest)
	errs = append(errs, err)
	r.resources = res
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return r, warns, nil
}
