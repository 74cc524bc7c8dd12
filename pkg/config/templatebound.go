package config

import (
	"fmt"
	"text/template"
	"text/template/parse"
)

// Bounds on what one execution of a query template may do, checked when
// the template is parsed (at load, before any request): with recursion
// refused and range only over the request's data, they bound a render's
// work, so a template renders in microseconds whatever its text, at load
// and at request time alike (issue 32: a chain of define templates, each
// calling the previous one twice, made 2^depth calls and pinned a core for
// hours).
const (
	// MaxTemplateCalls is the most {{template}} calls one execution can
	// make, counting the calls the called templates make.
	MaxTemplateCalls = 1000
	// MaxRangeDepth is the most ranges one execution can nest, through
	// template calls too (a range over .GroupBySlice is one).
	MaxRangeDepth = 2
)

// checkBounds refuses a template (already free of recursion) whose
// execution from its root would exceed MaxTemplateCalls or MaxRangeDepth.
func checkBounds(t *template.Template) *templateProblem {
	trees := map[string]*parse.ListNode{}
	for _, sub := range t.Templates() {
		if sub.Tree != nil {
			trees[sub.Name()] = sub.Tree.Root
		}
	}
	b := &bounds{trees: trees, calls: map[string]int{}, depth: map[string]int{}}
	root := t.Name()
	if n := b.callsOf(root); n > MaxTemplateCalls {
		return &templateProblem{Col: -1, Msg: fmt.Sprintf(
			"the template makes more than %d template calls (counting the calls of the templates it calls, as a chain of define templates each calling the previous one several times does); at most %d are allowed",
			MaxTemplateCalls, MaxTemplateCalls)}
	}
	if d := b.depthOf(root); d > MaxRangeDepth {
		return &templateProblem{Col: -1, Msg: fmt.Sprintf("the template nests %d ranges (through template calls too); at most %d are allowed", d, MaxRangeDepth)}
	}
	return nil
}

// bounds memoizes each named template's calls and range depth.
type bounds struct {
	trees        map[string]*parse.ListNode
	calls, depth map[string]int
}

// callsOf counts the template calls executing name makes, saturating just
// above MaxTemplateCalls.
func (b *bounds) callsOf(name string) int {
	if n, ok := b.calls[name]; ok {
		return n
	}
	n := 0
	walkTemplates(b.trees[name], func(callee string) {
		n = min(n+1+b.callsOf(callee), MaxTemplateCalls+1)
	})
	b.calls[name] = n
	return n
}

// depthOf is the deepest nesting of ranges executing name reaches.
func (b *bounds) depthOf(name string) int {
	if d, ok := b.depth[name]; ok {
		return d
	}
	d := b.listDepth(b.trees[name])
	b.depth[name] = d
	return d
}

func (b *bounds) listDepth(n parse.Node) int {
	d := 0
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return 0
		}
		for _, c := range n.Nodes {
			d = max(d, b.listDepth(c))
		}
	case *parse.TemplateNode:
		d = b.depthOf(n.Name)
	case *parse.IfNode:
		d = max(b.listDepth(n.List), b.listDepth(n.ElseList))
	case *parse.WithNode:
		d = max(b.listDepth(n.List), b.listDepth(n.ElseList))
	case *parse.RangeNode:
		d = max(1+b.listDepth(n.List), b.listDepth(n.ElseList))
	}
	return d
}

// walkTemplates calls f with the name of every {{template}} call under n,
// in every branch.
func walkTemplates(n *parse.ListNode, f func(string)) {
	for _, name := range templateCalls(n, nil) {
		f(name)
	}
}
