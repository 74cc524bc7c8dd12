package naming

import (
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/promscaler/promscaler/pkg/config"
)

// ErrEmptyQuery is returned when a query template renders to nothing but
// white space.
var ErrEmptyQuery = errors.New("query template rendered an empty query")

// MaxQueryBytes bounds what a query template may render; a template that
// writes more (e.g. a runaway range) fails instead of exhausting memory.
const MaxQueryBytes = 16 << 20

// QueryTemplate is a parsed metricsQuery (or containerQuery, nodeQuery,
// externalQueries query): a Go text/template with << >> delimiters rendered
// with config.QueryTemplateData. Only the Go template builtins (index, len,
// printf, eq, ...) are available, as in prometheus-adapter. A QueryTemplate
// is immutable and safe for concurrent use.
type QueryTemplate struct {
	text string
	tmpl *template.Template
}

// ParseQueryTemplate parses text as a query template.
func ParseQueryTemplate(text string) (*QueryTemplate, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("query template is empty")
	}
	t, err := template.New("query").Delims(config.LeftDelim, config.RightDelim).Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing query template: %w", err)
	}
	return &QueryTemplate{text: text, tmpl: t}, nil
}

// Text returns the template source.
func (q *QueryTemplate) Text() string { return q.text }

// Execute renders the template. A template error (e.g. index out of range)
// or an output that is only white space is an error.
func (q *QueryTemplate) Execute(data *config.QueryTemplateData) (string, error) {
	w := limitedBuilder{max: MaxQueryBytes}
	w.sb.Grow(len(q.text) + 2*len(data.LabelMatchers) + len(data.Series))
	if err := q.tmpl.Execute(&w, data); err != nil {
		return "", fmt.Errorf("rendering query template: %w", err)
	}
	out := w.sb.String()
	if strings.TrimSpace(out) == "" {
		return "", ErrEmptyQuery
	}
	return out, nil
}

var errQueryTooLong = fmt.Errorf("query longer than %d bytes", MaxQueryBytes)

// limitedBuilder is a strings.Builder that refuses to grow beyond max.
type limitedBuilder struct {
	sb  strings.Builder
	max int
}

func (w *limitedBuilder) Write(p []byte) (int, error) {
	if w.sb.Len()+len(p) > w.max {
		return 0, errQueryTooLong
	}
	return w.sb.Write(p)
}
