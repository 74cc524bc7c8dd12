package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxFileSize bounds what Load reads; configurations are a few kilobytes.
const maxFileSize = 16 << 20

// Load reads, parses and validates the configuration file at path. Its
// errors are an ErrorList (see Parse) or an I/O error wrapping the
// os error.
func Load(path string) (*Config, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse decodes and validates a configuration. filename is only used in
// error messages. Decoding is strict: an unknown or duplicate key, or a value
// of the wrong kind, is an error. An empty document is a valid configuration
// with no rules.
//
// On failure the error is an ErrorList holding every problem found, each
// with its path, line and column (YAML syntax errors stop decoding, so they
// come without the problems decoding and validation would find), and the
// returned Config is nil. Harmless oddities are not
// errors, see (*Config).Warnings; nor are queries Prometheus would reject,
// see (*Config).QueryErrors.
//
// Values are kept as written: the documented defaults are applied by their
// readers (DiscoveryRule.MetricsQueryOrDefault,
// ResourceMapping.IsNamespaced, ...).
func Parse(data []byte, filename string) (cfg *Config, err error) {
	defer func() {
		// The YAML library is not ours; whatever it does, a caller gets an
		// error, never a panic.
		if r := recover(); r != nil {
			cfg = nil
			err = ErrorList{{File: filename, Msg: fmt.Sprintf("internal error while parsing: %v", r)}}
		}
	}()

	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &Config{Source: newSource(filename)}, nil
		}
		return nil, syntaxErrors(data, filename, err)
	}
	d := newDecoder(filename, data)
	c := &Config{}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if !isNull(root) {
		if rr := d.resolve(root); rr != nil && rr.Kind != yaml.MappingNode {
			d.fail(root, "", "", "the configuration must be a mapping with keys such as rules, externalRules, resourceRules; got %s", kindName(rr))
		} else {
			d.decode(root, reflect.ValueOf(c).Elem(), "")
			configMapHint(d, root)
		}
	}
	// prometheus-adapter reads the first document only; so do we, but a
	// second one is reported since it is certainly not what was meant.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.errorf(&extra, "", "put all rules in one document", "the file holds more than one YAML document; only the first would be read")
	} else if !errors.Is(err, io.EOF) {
		d.errs = append(d.errs, syntaxErrors(data, filename, err)...)
	}
	c.Source = d.src

	errs := d.errs
	for _, e := range c.Validate() {
		if !d.isBad(e.Path) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		sortList(errs)
		return nil, errs
	}
	return c, nil
}

// isBad reports whether p is at or below a path whose value could not be
// decoded: validation errors there would only repeat the decoding error.
func (d *decoder) isBad(p string) bool {
	for _, b := range d.bad {
		if b != "" && hasPathPrefix(p, b) {
			return true
		}
	}
	return false
}

// configMapHint adds a hint when the file is a whole Kubernetes ConfigMap
// manifest instead of the configuration it carries.
func configMapHint(d *decoder, root *yaml.Node) {
	root = d.resolve(root)
	if root == nil || root.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "kind" && root.Content[i+1].Value == "ConfigMap" {
			for _, e := range d.errs {
				if e.Path == "kind" || e.Path == "apiVersion" || e.Path == "data" || e.Path == "metadata" {
					e.Hint = "this is a Kubernetes ConfigMap; give the adapter the content of its data key (e.g. config.yaml), not the manifest"
				}
			}
			return
		}
	}
}

var (
	yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)
	// blockScalarRE matches a line whose value is a block scalar: "key: |",
	// "- >-", "key: |2 # comment".
	blockScalarRE = regexp.MustCompile(`(^|:|-)\s+[|>][-+0-9]*\s*(#.*)?$`)
)

// syntaxErrors turns a YAML library error into an Error with a line and a
// column. The library reports the line where the enclosing construct
// started, which is often far from the mistake, and no column; so the
// position is found again by parsing ever longer prefixes of the input: the
// first prefix that fails with the same problem ends at the mistake. As the
// library stops at the first mistake, the other lines are then scanned for
// the well-known ones (see findMistake), so that a file with the same
// mistake in several rules gets it reported for each.
func syntaxErrors(data []byte, filename string, err error) ErrorList {
	msg := err.Error()
	problem := strings.TrimPrefix(yamlLineRE.ReplaceAllString(msg, ""), "yaml: ")
	first := &Error{File: filename, Msg: "invalid YAML: " + problem}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		first.Line, _ = strconv.Atoi(m[1])
	}
	if len(data) > 1<<20 {
		return ErrorList{first}
	}
	if line, col, ok := locateSyntaxError(data, problem); ok {
		first.Line, first.Column = line, col
	}
	out := ErrorList{first}
	blockParent := -1 // indentation of the key owning the block scalar we are in
	for i, text := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(text)
		indent := len(text) - len(strings.TrimLeft(text, " "))
		if blockParent >= 0 {
			if trimmed == "" || indent > blockParent {
				continue // content of a | or > block: not YAML syntax
			}
			blockParent = -1
		}
		if blockScalarRE.MatchString(text) {
			blockParent = indent
		}
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		m, ok := findMistake(text)
		if !ok {
			continue
		}
		if i+1 == first.Line {
			first.Msg = fmt.Sprintf("%s (%s)", m.msg, problem)
			first.Hint = m.hint
			first.Column = m.col
			continue
		}
		out = append(out, &Error{File: filename, Line: i + 1, Column: m.col, Msg: m.msg, Hint: m.hint})
	}
	sortList(out)
	return out
}

// failsWith reports whether parsing data fails with the given problem.
func failsWith(data []byte, problem string) bool {
	var n yaml.Node
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return yaml.Unmarshal(data, &n)
	}()
	if err == nil {
		return false
	}
	got := strings.TrimPrefix(yamlLineRE.ReplaceAllString(err.Error(), ""), "yaml: ")
	return got == problem
}

// locateSyntaxError finds the first line, then the first byte of it, at
// which a prefix of data fails to parse with problem. It assumes failure is
// monotonic in the prefix length (true for the usual mistakes: stray text
// after a quoted value, bad indentation, tabs, a stray comma) and checks the
// result.
func locateSyntaxError(data []byte, problem string) (line, col int, ok bool) {
	if !failsWith(data, problem) {
		return 0, 0, false
	}
	// Line starts, and the end of each line (exclusive, after '\n').
	var ends []int
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	// Smallest number of whole lines whose prefix fails.
	lo, hi := 1, len(ends)
	for lo < hi {
		mid := (lo + hi) / 2
		if failsWith(data[:ends[mid-1]], problem) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	line = lo
	start := 0
	if line > 1 {
		start = ends[line-2]
	}
	end := ends[line-1]
	if !failsWith(data[:end], problem) {
		return 0, 0, false
	}
	// Smallest byte prefix of that line that fails. A prefix that cuts the
	// line short may fail for another reason (an unterminated quote), which
	// failsWith does not count.
	l, h := start, end
	for l < h {
		mid := (l + h) / 2
		if failsWith(data[:mid+1], problem) {
			h = mid
		} else {
			l = mid + 1
		}
	}
	col = len([]rune(string(data[start:l]))) + 1
	if l >= end {
		// Only the end of the line triggers it: point at its first
		// non-blank character instead.
		col = 1
		for i := start; i < end && (data[i] == ' ' || data[i] == '\t'); i++ {
			col++
		}
	}
	return line, col, true
}

const (
	hintDoubleQuote = `a " inside a double-quoted value must be written \"; simpler for PromQL: quote the whole value with single quotes '...' (an inner ' is then written '')`
	hintSingleQuote = `a ' inside a single-quoted value must be written ''; or quote the whole value with double quotes "..." (an inner " is then written \")`
	hintTab         = "indent with spaces; YAML does not allow tabs in indentation"
	hintComma       = "remove the trailing comma: entries of a block mapping or list are separated by new lines, not commas"
)

// lineMistake is a well-known YAML mistake found on one line.
type lineMistake struct {
	col  int // 1-based rune column
	msg  string
	hint string
}

// findMistake recognises common YAML mistakes on one line. The first is the
// one of prometheus-adapter's own docs/sample-config.yaml: a double-quoted
// value containing an unescaped double quote, e.g.
//
//	metricsQuery: "sum(x{<<.LabelMatchers>>,container!="POD"})"
//
// YAML ends the value at the second quote and then finds stray text.
func findMistake(text string) (lineMistake, bool) {
	text = strings.TrimRight(text, "\r")
	for _, quote := range []byte{'"', '\''} {
		if end, ok := closedEarly(text, quote); ok {
			m := lineMistake{col: len([]rune(text[:end+1])) + 1, msg: "invalid YAML: text after the closing quote of a double-quoted value", hint: hintDoubleQuote}
			if quote == '\'' {
				m.msg, m.hint = "invalid YAML: text after the closing quote of a single-quoted value", hintSingleQuote
			}
			return m, true
		}
	}
	if ws := leadingSpace(text); strings.Contains(ws, "\t") && strings.TrimSpace(text) != "" {
		return lineMistake{col: strings.IndexByte(ws, '\t') + 1, msg: "invalid YAML: tab in indentation", hint: hintTab}, true
	}
	if t := strings.TrimRight(text, " "); (strings.HasSuffix(t, "},") || strings.HasSuffix(t, "],")) && !strings.HasPrefix(strings.TrimSpace(t), "#") && flowDepth(t) == 0 {
		return lineMistake{col: len([]rune(t)), msg: "invalid YAML: trailing comma after a flow collection", hint: hintComma}, true
	}
	return lineMistake{}, false
}

// flowDepth returns the nesting of [ and { left open at the end of a line,
// ignoring quoted text; a line that opens as many as it closes is 0.
func flowDepth(text string) int {
	depth := 0
	var quote byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == '#' && (i == 0 || text[i-1] == ' '):
			return depth
		}
	}
	return depth
}

func leadingSpace(s string) string {
	return s[:len(s)-len(strings.TrimLeft(s, " \t"))]
}

// closedEarly reports whether text has a value (after "key: " or "- ")
// quoted with quote that is closed and followed by more than blanks, a
// comment or flow punctuation; end is the byte index of the closing quote.
func closedEarly(text string, quote byte) (end int, ok bool) {
	start := -1
	for _, sep := range []string{": ", "- "} {
		if i := strings.Index(text, sep+string(quote)); i >= 0 && (start < 0 || i < start) {
			start = i + len(sep)
		}
	}
	if start < 0 {
		return 0, false
	}
	i := start + 1
	for i < len(text) {
		c := text[i]
		if quote == '"' && c == '\\' {
			i += 2
			continue
		}
		if c == quote {
			if quote == '\'' && i+1 < len(text) && text[i+1] == '\'' {
				i += 2
				continue
			}
			rest := strings.TrimSpace(text[i+1:])
			if rest == "" || strings.ContainsRune("#,}]", rune(rest[0])) || strings.HasPrefix(rest, ":") {
				return 0, false
			}
			return i, true
		}
		i++
	}
	return 0, false
}
