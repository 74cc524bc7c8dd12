package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Position is a place in the configuration file. Line and Column are
// 1-based; 0 means unknown.
type Position struct {
	Line   int
	Column int
}

// Error is one problem found in a configuration file, at a path such as
// "externalRules[2].name.as" and (when the configuration was parsed from a
// file) a source position.
type Error struct {
	// File is the file name given to Parse or Load; may be empty.
	File string
	// Line and Column locate the problem, 1-based; 0 when unknown.
	Line, Column int
	// Path names the offending key, e.g. "rules[0].seriesFilters[1].is";
	// empty for problems with the file as a whole (YAML syntax).
	Path string
	// Msg says what is wrong.
	Msg string
	// Hint, when set, says how to fix it.
	Hint string
}

// Error formats the problem on one line:
//
//	config.yaml:14:7: externalRules[2].name.as: <msg> (hint: <hint>)
func (e *Error) Error() string {
	var b strings.Builder
	loc := e.File
	if e.Line > 0 {
		if loc == "" {
			loc = "line " + strconv.Itoa(e.Line)
		} else {
			loc += ":" + strconv.Itoa(e.Line)
		}
		if e.Column > 0 {
			loc += ":" + strconv.Itoa(e.Column)
		}
	}
	if loc != "" {
		b.WriteString(loc)
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Hint != "" {
		b.WriteString(" (hint: ")
		b.WriteString(e.Hint)
		b.WriteString(")")
	}
	return b.String()
}

// ErrorList is every problem found in a configuration, in file order. It
// implements error; use Err to turn an empty list into a nil error.
type ErrorList []*Error

// Error returns one line per problem.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns nil for an empty list and the list itself otherwise.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Unwrap returns the individual errors, for errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// sortList orders problems by position, then path; problems without a
// position (configurations built in code) keep their relative order.
func sortList(l ErrorList) {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if a.Line == 0 && b.Line == 0 {
			return false // no positions: keep the order they were found in
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Path < b.Path
	})
}

// Source records where a parsed configuration came from: the file name and
// the position of every key and value, by path. Configurations built in code
// have no Source; their errors carry paths but no positions.
type Source struct {
	// File is the name given to Parse or Load.
	File string
	// Keys maps a path to the position of its key (for sequence items, of
	// the item itself).
	Keys map[string]Position
	// Values maps a path to the position of its value.
	Values map[string]Position
	// Content maps the path of a string value written verbatim (plain,
	// quoted without escapes, or a literal block "|") to the position of its
	// first character; every line of a literal block starts at that column.
	// It lets template errors point inside the value.
	Content map[string]Position
}

// KeyPath returns the path of key under parent: "rules[0]" + "name" gives
// "rules[0].name". A key that is not a plain identifier is quoted:
// `overrides["kubernetes.io/name"]`.
func KeyPath(parent, key string) string {
	if !isIdent(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// IndexPath returns the path of item i of the sequence at parent:
// IndexPath("rules", 3) gives "rules[3]".
func IndexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// parentPath strips the last element of a path: "rules[0].name.as" gives
// "rules[0].name", "rules[0]" gives "rules", "rules" gives "".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		// Find the matching '[' outside a quoted key.
		if i := lastBracket(p); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// lastBracket returns the index of the '[' opening the last path element.
func lastBracket(p string) int {
	inQuote := false
	for i := len(p) - 2; i >= 0; i-- {
		switch p[i] {
		case '"':
			// An escaped quote inside the quoted key is preceded by an odd
			// number of backslashes.
			n := 0
			for j := i - 1; j >= 0 && p[j] == '\\'; j-- {
				n++
			}
			if n%2 == 0 {
				inQuote = !inQuote
			}
		case '[':
			if !inQuote {
				return i
			}
		}
	}
	return -1
}

// hasPathPrefix reports whether p is prefix or below it.
func hasPathPrefix(p, prefix string) bool {
	if !strings.HasPrefix(p, prefix) {
		return false
	}
	rest := p[len(prefix):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

// Position returns where path is written: its value when the path itself is
// in the file, otherwise (a missing key) the key of its nearest ancestor. ok
// is false for configurations without a Source.
func (c *Config) Position(path string) (pos Position, ok bool) {
	if c == nil || c.Source == nil {
		return Position{}, false
	}
	if p, found := c.Source.Values[path]; found {
		return p, true
	}
	for p := parentPath(path); ; p = parentPath(p) {
		if pos, found := c.Source.Keys[p]; found {
			return pos, true
		}
		if pos, found := c.Source.Values[p]; found {
			return pos, true
		}
		if p == "" {
			return Position{Line: 1, Column: 1}, true
		}
	}
}

// ErrorAt returns an Error for path carrying the file name and the source
// position of path (see Position). Other packages use it to report problems
// they find in a rule (e.g. when compiling it) the same way as validation.
func (c *Config) ErrorAt(path, format string, args ...any) *Error {
	e := &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
	if c != nil && c.Source != nil {
		e.File = c.Source.File
	}
	if pos, ok := c.Position(path); ok {
		e.Line, e.Column = pos.Line, pos.Column
	}
	return e
}
