package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/internal/truncate"
)

// templateProblem is a problem found in a template (see TemplateError).
type templateProblem = TemplateError

var (
	tmplLocRE     = regexp.MustCompile(`^template: [^:]*:(\d+)(?::(\d+))?: `)
	execAtRE      = regexp.MustCompile(`^executing "[^"]*" at <([^>]*)>: `)
	unknownFRE    = regexp.MustCompile(`can't evaluate field (\w+) in type \*?config\.\w+`)
	dataDepExec   = regexp.MustCompile(`error calling (index|slice): `)
	undefinedFnRE = regexp.MustCompile(`^function "(\w+)" not defined`)
)

// wordIndex returns the byte index of word in line as a whole identifier
// (so that "join" is not found inside "adjoin"), or -1.
func wordIndex(line, word string) int {
	for off := 0; ; {
		i := strings.Index(line[off:], word)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(word)
		before := i == 0 || !isWordByte(line[i-1])
		after := end == len(line) || !isWordByte(line[end])
		if before && after && (i == 0 || line[i-1] != '.') {
			return i
		}
		off = end
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// splitTemplateError separates text/template's "template: name:L:C: " prefix.
func splitTemplateError(err error) templateProblem {
	msg := err.Error()
	p := templateProblem{}
	if m := tmplLocRE.FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		if m[2] != "" {
			p.Col, _ = strconv.Atoi(m[2])
		} else {
			p.Col = -1
		}
		msg = msg[len(m[0]):]
	} else {
		p.Col = -1
	}
	p.Msg = msg
	return p
}

// parseTemplate parses text and rejects constructs that could make
// rendering unbounded.
func parseTemplate(name, text string) (*template.Template, *templateProblem) {
	t, err := template.New(name).Delims(LeftDelim, RightDelim).Option("missingkey=zero").Parse(text)
	if err != nil {
		p := splitTemplateError(err)
		// Parse errors carry a line only; find the named function or the
		// quoted character on that line for a column.
		if lines := strings.Split(text, "\n"); p.Col < 0 && p.Line >= 1 && p.Line <= len(lines) {
			if m := undefinedFnRE.FindStringSubmatch(p.Msg); m != nil {
				p.Col = wordIndex(lines[p.Line-1], m[1])
			}
		}
		p.Msg = "template does not parse: " + p.Msg
		return nil, &p
	}
	calls := map[string][]string{}
	for _, sub := range t.Templates() {
		if sub.Tree == nil {
			continue
		}
		if p := checkRanges(sub.Tree.Root, text); p != nil {
			return nil, p
		}
		calls[sub.Name()] = templateCalls(sub.Tree.Root, nil)
	}
	if cycle := findCycle(calls); cycle != "" {
		return nil, &templateProblem{Msg: fmt.Sprintf("template %q calls itself; recursion is not allowed in query templates", cycle), Col: -1}
	}
	if p := checkBounds(t); p != nil {
		return nil, p
	}
	return t, nil
}

// templateCalls lists the names of the templates invoked ({{template "x"}})
// under n.
func templateCalls(n parse.Node, out []string) []string {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return out
		}
		for _, c := range n.Nodes {
			out = templateCalls(c, out)
		}
	case *parse.TemplateNode:
		out = append(out, n.Name)
	case *parse.IfNode:
		out = templateCalls(n.ElseList, templateCalls(n.List, out))
	case *parse.RangeNode:
		out = templateCalls(n.ElseList, templateCalls(n.List, out))
	case *parse.WithNode:
		out = templateCalls(n.ElseList, templateCalls(n.List, out))
	}
	return out
}

// findCycle returns the name of a template that can reach itself through
// template calls, or "".
func findCycle(calls map[string][]string) string {
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	var visit func(name string) string
	visit = func(name string) string {
		switch state[name] {
		case active:
			return name
		case done:
			return ""
		}
		state[name] = active
		for _, c := range calls[name] {
			if found := visit(c); found != "" {
				return found
			}
		}
		state[name] = done
		return ""
	}
	names := slices.Sorted(maps.Keys(calls))
	for _, name := range names {
		if found := visit(name); found != "" {
			return found
		}
	}
	return ""
}

// checkRanges rejects "range" over anything but data (a field, a variable's
// field, or a call of index/slice): ranging over an integer would let a
// template spin for as long as it likes.
func checkRanges(n parse.Node, text string) *templateProblem {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if p := checkRanges(c, text); p != nil {
				return p
			}
		}
	case *parse.IfNode:
		return firstProblem(checkRanges(n.List, text), checkRanges(n.ElseList, text))
	case *parse.WithNode:
		return firstProblem(checkRanges(n.List, text), checkRanges(n.ElseList, text))
	case *parse.RangeNode:
		if !rangesOverData(n.Pipe) {
			line, col := offsetToLineCol(text, int(n.Position()))
			return &templateProblem{
				Msg:  fmt.Sprintf("range over %q is not allowed: a query template may only range over its data (e.g. .GroupBySlice)", n.Pipe.String()),
				Line: line, Col: col,
			}
		}
		return firstProblem(checkRanges(n.List, text), checkRanges(n.ElseList, text))
	}
	return nil
}

func firstProblem(ps ...*templateProblem) *templateProblem {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

func rangesOverData(pipe *parse.PipeNode) bool {
	if pipe == nil || len(pipe.Cmds) == 0 {
		return false
	}
	last := pipe.Cmds[len(pipe.Cmds)-1]
	if len(last.Args) == 0 {
		return false
	}
	switch a := last.Args[0].(type) {
	case *parse.FieldNode, *parse.ChainNode, *parse.DotNode:
		return true
	case *parse.VariableNode:
		return len(a.Ident) > 1 // $.GroupBySlice, $x.Field
	case *parse.IdentifierNode:
		return a.Ident == "index" || a.Ident == "slice"
	case *parse.PipeNode:
		return rangesOverData(a)
	}
	return false
}

func offsetToLineCol(text string, off int) (line, col int) {
	if off > len(text) {
		off = len(text)
	}
	before := text[:off]
	line = 1 + strings.Count(before, "\n")
	col = off - (strings.LastIndexByte(before, '\n') + 1)
	return line, col
}

// execTemplate renders t with data. Errors that depend on the request (an
// index out of range) are not problems of the configuration and are
// ignored; the others are reported with the variables that exist.
func execTemplate(t *template.Template, data any, fields string) (string, *templateProblem) {
	out, err := render(t, data, 256)
	if err == nil {
		return out, nil
	}
	if errors.Is(err, ErrQueryTooLong) {
		return "", &templateProblem{Msg: fmt.Sprintf("template renders more than %d bytes", MaxQueryBytes), Col: -1}
	}
	p := splitTemplateError(err)
	if dataDepExec.MatchString(p.Msg) {
		return out, nil
	}
	at := ""
	if m := execAtRE.FindStringSubmatch(p.Msg); m != nil {
		at = m[1]
		p.Msg = p.Msg[len(m[0]):]
	}
	if m := unknownFRE.FindStringSubmatch(p.Msg); m != nil {
		p.Msg = fmt.Sprintf("template uses .%s, which does not exist; it may use %s", m[1], fields)
		return "", &p
	}
	if at != "" {
		p.Msg = fmt.Sprintf("template fails at <%s>: %s", at, p.Msg)
	} else {
		p.Msg = "template fails: " + p.Msg
	}
	return "", &p
}

// Sample data validation renders templates with. Values are non-empty so
// that templates indexing into them do not fail for lack of data.
func sampleQueryData(window string) *QueryTemplateData {
	return &QueryTemplateData{
		Series:            "series_name",
		LabelMatchers:     `namespace="default",pod=~"a|b"`,
		LabelValuesByName: map[string]string{"namespace": "default", "pod": "a|b"},
		GroupBy:           "pod",
		GroupBySlice:      []string{"pod"},
		Window:            window,
	}
}

var (
	queryFields    = fieldList(reflect.TypeOf(QueryTemplateData{}), "")
	resourceFields = fieldList(reflect.TypeOf(ResourceTemplateData{}), "")
)

func fieldList(t reflect.Type, skip string) string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if n := t.Field(i).Name; n != skip {
			names = append(names, "."+n)
		}
	}
	return strings.Join(names, ", ")
}

// queryKind says where a query template is used, which decides whether
// .Window means anything.
type queryKind int

const (
	discoveryQuery queryKind = iota // rules, externalRules, externalQueries: .Window is always empty
	resourceQuery                   // resourceRules: .Window is resourceRules.window
)

// checkQueryTemplate parses and test-renders a query template. It returns
// the problem that makes it unusable, or else why Prometheus would reject
// the query it renders (an empty string when it would not).
func checkQueryTemplate(name, text string, kind queryKind, window string) (*templateProblem, string) {
	out, p := renderQueryTemplate(name, text, kind, window)
	if p != nil {
		return p, ""
	}
	if err := CheckPromQL(out); err != nil {
		return nil, fmt.Sprintf("Prometheus would reject the query this template renders: %v; rendered with sample values: %s", err, truncate.String(strings.Join(strings.Fields(out), " "), 200))
	}
	return nil, ""
}

func renderQueryTemplate(name, text string, kind queryKind, window string) (string, *templateProblem) {
	t, p := parseTemplate(name, text)
	if p != nil {
		return "", p
	}
	fields := queryFields
	if kind == discoveryQuery {
		fields = fieldList(reflect.TypeOf(QueryTemplateData{}), "Window")
	}
	out, p := execTemplate(t, sampleQueryData(window), fields)
	if p != nil {
		return "", p
	}
	if strings.TrimSpace(out) == "" {
		return "", &templateProblem{Msg: "template renders an empty query", Col: -1}
	}
	// Does the output depend on .Window? Render again with another value.
	other := "17m"
	if window == other {
		other = "19m"
	}
	alt, p := execTemplate(t, sampleQueryData(other), fields)
	if p == nil && alt != out {
		switch {
		case kind == discoveryQuery:
			return "", &templateProblem{Msg: ".Window is only set for resourceRules; here it is always empty", Col: -1}
		case window == "":
			return "", &templateProblem{Msg: "template uses .Window but resourceRules.window is not set, so it would render empty", Col: -1}
		}
	}
	return out, nil
}

// checkResourceTemplate parses and test-renders resources.template: it must
// use .Resource (or every resource would map to one label) and render valid
// label names.
func checkResourceTemplate(text string) *templateProblem {
	t, p := parseTemplate("template", text)
	if p != nil {
		return p
	}
	var outs []string
	for _, d := range []ResourceTemplateData{
		{Group: "", Resource: "pod"},
		{Group: "", Resource: "namespace"},
		{Group: "apps", Resource: "deployment"},
		{Group: "networking_k8s_io", Resource: "ingress"},
	} {
		out, p := execTemplate(t, &d, resourceFields)
		if p != nil {
			return p
		}
		if !model.LegacyValidation.IsValidLabelName(out) {
			return &templateProblem{
				Msg: fmt.Sprintf("template renders %q for group %q resource %q, which is not a valid Prometheus label name", out, d.Group, d.Resource),
				Col: -1,
			}
		}
		outs = append(outs, out)
	}
	if outs[0] == outs[1] {
		return &templateProblem{Msg: "template does not use .Resource, so every resource would map to the same label", Col: -1}
	}
	return nil
}
