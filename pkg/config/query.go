package config

import (
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/prometheus/prometheus/promql/parser"
)

// This file owns query templates: their delimiters, the data they are
// rendered with (templatedata.go), how they are parsed, the default
// metricsQuery, the bound on what they render, and the PromQL check of what
// they render. Validation (this package) and serving (pkg/rules) both go
// through it.

// Template delimiters of every template in the file (metricsQuery,
// containerQuery, nodeQuery, externalQueries query, resources.template), as
// in prometheus-adapter: they keep PromQL's braces free.
const (
	LeftDelim  = "<<"
	RightDelim = ">>"
)

// DefaultMetricsQuery is the query a rule without metricsQuery is served
// with. prometheus-adapter sends the empty string in that case, which
// Prometheus rejects on every request; promscaler uses the form of its
// config generator's "non-cumulative" rules instead, and Warnings says so.
const DefaultMetricsQuery = "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"

// MetricsQueryOrDefault returns the rule's metricsQuery, or
// DefaultMetricsQuery when it is empty or blank. It is the only place the
// default is applied: Parse keeps the value as written.
func (r *DiscoveryRule) MetricsQueryOrDefault() string {
	if strings.TrimSpace(r.MetricsQuery) == "" {
		return DefaultMetricsQuery
	}
	return r.MetricsQuery
}

// MaxQueryBytes bounds what a template may render, at validation and when
// serving: a template that writes more (a runaway range, a huge printf
// width) fails instead of exhausting memory. Prometheus would refuse such
// a query long before this size anyway.
const MaxQueryBytes = 1 << 20

// Rendering errors; test with errors.Is.
var (
	// ErrEmptyQuery is returned when a query template renders to nothing
	// but white space.
	ErrEmptyQuery = errors.New("query template rendered an empty query")
	// ErrQueryTooLong is returned when a template would render more than
	// MaxQueryBytes.
	ErrQueryTooLong = fmt.Errorf("query longer than %d bytes", MaxQueryBytes)
)

// TemplateError is a template that cannot be used: it does not parse, or
// it could render without bound. Line (1-based) and Col (0-based byte
// offset) locate the problem inside the template text when known (0 and -1
// otherwise).
type TemplateError struct {
	Msg       string
	Line, Col int
}

func (e *TemplateError) Error() string { return e.Msg }

// NewTemplate parses text with the file's delimiters and the options
// promscaler renders with (a missing map key renders as the zero value).
// It refuses what could make rendering unbounded: a range over anything
// but the template's data, and templates calling themselves. Its errors
// are *TemplateError.
func NewTemplate(name, text string) (*template.Template, error) {
	t, p := parseTemplate(name, text)
	if p != nil {
		return nil, p
	}
	return t, nil
}

// QueryTemplate is a parsed query template (metricsQuery, containerQuery,
// nodeQuery, externalQueries query) rendered with QueryTemplateData. Only
// the Go template builtins (index, len, printf, eq, ...) are available, as
// in prometheus-adapter. A QueryTemplate is immutable and safe for
// concurrent use.
type QueryTemplate struct {
	text string
	tmpl *template.Template
}

// ParseQueryTemplate parses text as a query template named name (the key
// it comes from, e.g. "metricsQuery"). An empty text is an error. Its
// errors are *TemplateError.
func ParseQueryTemplate(name, text string) (*QueryTemplate, error) {
	if strings.TrimSpace(text) == "" {
		return nil, &TemplateError{Msg: "query template is empty", Col: -1}
	}
	t, err := NewTemplate(name, text)
	if err != nil {
		return nil, err
	}
	return &QueryTemplate{text: text, tmpl: t}, nil
}

// Text returns the template source.
func (q *QueryTemplate) Text() string { return q.text }

// Execute renders the template. A template error (e.g. an index out of
// range), an output longer than MaxQueryBytes (ErrQueryTooLong) or one that
// is only white space (ErrEmptyQuery) is an error.
func (q *QueryTemplate) Execute(data *QueryTemplateData) (string, error) {
	out, err := render(q.tmpl, data, len(q.text)+2*len(data.LabelMatchers)+len(data.Series))
	if err != nil {
		if errors.Is(err, ErrQueryTooLong) {
			return "", err
		}
		return "", fmt.Errorf("rendering query template: %w", err)
	}
	if strings.TrimSpace(out) == "" {
		return "", ErrEmptyQuery
	}
	return out, nil
}

// Render executes a template of NewTemplate with data, as promscaler
// renders every template of the file: an output longer than MaxQueryBytes
// is ErrQueryTooLong.
func Render(t *template.Template, data any) (string, error) {
	return render(t, data, 64)
}

// render executes t into a buffer of at most MaxQueryBytes. On failure the
// partial output is returned with the error.
func render(t *template.Template, data any, sizeHint int) (string, error) {
	w := limitedWriter{}
	w.b.Grow(min(sizeHint, MaxQueryBytes))
	err := t.Execute(&w, data)
	if w.tooLong {
		// text/template wraps the writer's error: report the bound itself.
		return "", ErrQueryTooLong
	}
	return w.b.String(), err
}

type limitedWriter struct {
	b       strings.Builder
	tooLong bool
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > MaxQueryBytes {
		w.tooLong = true
		return 0, ErrQueryTooLong
	}
	return w.b.Write(p)
}

// promql is Prometheus's own PromQL parser, accepting everything a
// Prometheus server accepts with any feature flag (experimental functions,
// fill modifiers, UTF-8 names): a query it rejects, every Prometheus
// rejects.
var promql = parser.NewParser(parser.Options{
	EnableExperimentalFunctions: true,
	EnableBinopFillModifiers:    true,
	EnableUnquotedUTF8Names:     true,
})

// CheckPromQL reports why Prometheus would reject expr as a query, or nil.
func CheckPromQL(expr string) error {
	_, err := promql.ParseExpr(expr)
	return promqlError(err)
}

// CheckSeriesSelector reports why Prometheus would reject sel as a series
// selector (the match[] of /api/v1/series, which seriesQuery is), or nil.
func CheckSeriesSelector(sel string) error {
	_, err := promql.ParseMetricSelector(sel)
	return promqlError(err)
}

// promqlError shortens the parser's errors to their first problem: they
// quote the whole input, which the caller already names.
func promqlError(err error) error {
	if err == nil {
		return nil
	}
	var errs parser.ParseErrors
	if errors.As(err, &errs) && len(errs) > 0 {
		e := errs[0]
		return fmt.Errorf("%s (at character %d)", e.Err, int(e.PositionRange.Start)+1)
	}
	return err
}
