package kedaconvert

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"

	"github.com/promscaler/promscaler/pkg/config"
)

// composite converts scalingModifiers: one external metric whose query is
// the formula over the triggers' queries, replacing the triggers'
// External metrics (the cpu and memory metrics stay), as KEDA's
// composite-metric does. A formula PromQL cannot express is noted and the
// triggers are kept as separate metrics.
func (c *converter) composite(m *ScalingModifier, metrics []autoscalingv2.MetricSpec) []autoscalingv2.MetricSpec {
	const path = "spec.advanced.scalingModifiers"
	backend, ok := c.oneBackend()
	if !ok {
		c.note(path, "not converted: the triggers query different backends, and one query cannot read both; the triggers stay separate metrics")
		return metrics
	}
	terms := map[string]string{}
	for _, t := range c.external {
		if t.name != "" {
			terms[t.name] = term(t)
		}
	}
	query, err := FormulaToPromQL(m.Formula, terms)
	if err != nil {
		c.note(path+".formula", "not converted: %v; the triggers stay separate metrics (the HPA takes the highest proposal)", err)
		return metrics
	}
	if err := config.CheckPromQL(query); err != nil {
		c.note(path+".formula", "not converted: the PromQL it gives is rejected: %v", err)
		return metrics
	}
	target, ok := c.target3(path, m.MetricType, m.Target, path+".target")
	if !ok {
		return metrics
	}
	name := c.metricName("composite")
	// The triggers' own entries are replaced by the composite one.
	c.queries = append(c.queries[:0], config.ExternalQuery{Name: name, Query: query, DefaultValue: ptr.To("0"), Backend: backend})
	out := []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name}, Target: target,
	}}}
	for _, s := range metrics {
		if s.Type != autoscalingv2.ExternalMetricSourceType {
			out = append(out, s)
		}
	}
	return out
}

// term is a trigger's query as one label-free sample: KEDA reads a single
// value; with ignoreNullValues no result is 0.
func term(t promTrigger) string {
	if t.ignoreNull {
		return fmt.Sprintf("(sum(%s) or vector(0))", t.query)
	}
	return fmt.Sprintf("sum(%s)", t.query)
}

// formulaFuncs are the functions of KEDA's formula language (expr) that
// PromQL has with the same meaning on one sample.
var formulaFuncs = map[string]string{"abs": "abs", "ceil": "ceil", "floor": "floor", "round": "round"}

// FormulaToPromQL translates a scalingModifiers formula into PromQL, each
// trigger name replaced by terms[name]. Only what both languages spell the
// same is translated: numbers, trigger names, + - * / %, parentheses,
// unary minus, abs, ceil, floor, round. Anything else (conditionals,
// comparisons, ** or ^, other functions) is an error saying what.
func FormulaToPromQL(formula string, terms map[string]string) (string, error) {
	if strings.Contains(formula, "?") || strings.Contains(formula, "**") {
		return "", fmt.Errorf("formula %q: conditionals and ** have no PromQL equivalent here", formula)
	}
	expr, err := parser.ParseExpr(formula)
	if err != nil {
		return "", fmt.Errorf("formula %q: only arithmetic on trigger names is converted: %v", formula, err)
	}
	used := false
	out, err := translate(expr, terms, &used)
	if err != nil {
		return "", fmt.Errorf("formula %q: %w", formula, err)
	}
	if !used {
		return "", fmt.Errorf("formula %q: uses no trigger", formula)
	}
	return out, nil
}

func translate(e ast.Expr, terms map[string]string, used *bool) (string, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.INT && e.Kind != token.FLOAT {
			return "", fmt.Errorf("%s: not a number", e.Value)
		}
		return e.Value, nil
	case *ast.Ident:
		q, ok := terms[e.Name]
		if !ok {
			return "", fmt.Errorf("no named prometheus trigger %q", e.Name)
		}
		*used = true
		return q, nil
	case *ast.ParenExpr:
		x, err := translate(e.X, terms, used)
		return "(" + x + ")", err
	case *ast.UnaryExpr:
		if e.Op != token.SUB && e.Op != token.ADD {
			return "", fmt.Errorf("operator %s: not converted", e.Op)
		}
		x, err := translate(e.X, terms, used)
		return e.Op.String() + x, err
	case *ast.BinaryExpr:
		switch e.Op {
		case token.ADD, token.SUB, token.MUL, token.QUO, token.REM:
		default:
			return "", fmt.Errorf("operator %s: not converted", e.Op)
		}
		x, err := translate(e.X, terms, used)
		if err != nil {
			return "", err
		}
		y, err := translate(e.Y, terms, used)
		return x + " " + e.Op.String() + " " + y, err
	case *ast.CallExpr:
		return translateCall(e, terms, used)
	}
	return "", fmt.Errorf("%T: not converted", e)
}

func translateCall(e *ast.CallExpr, terms map[string]string, used *bool) (string, error) {
	id, ok := e.Fun.(*ast.Ident)
	if !ok || formulaFuncs[id.Name] == "" || len(e.Args) != 1 {
		return "", fmt.Errorf("function call: only abs, ceil, floor and round of one argument are converted")
	}
	inner := false
	x, err := translate(e.Args[0], terms, &inner)
	if err != nil {
		return "", err
	}
	if !inner {
		return "", fmt.Errorf("%s of a constant: not converted", id.Name)
	}
	*used = true
	return formulaFuncs[id.Name] + "(" + x + ")", nil
}
