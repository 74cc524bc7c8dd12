package simulate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// LineError is a scenario problem at a line of the file.
type LineError struct {
	// Line is the 1-based line; 0 when no line is known.
	Line int
	Err  error
}

func (e *LineError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return e.Err.Error()
}

func (e *LineError) Unwrap() error { return e.Err }

// atLine places a validation error ("path: message") at the line of the
// field its path names, or of the closest enclosing field there is.
func atLine(root *yaml.Node, err error) error {
	path, _, ok := strings.Cut(err.Error(), ": ")
	if !ok {
		return &LineError{Err: err}
	}
	return &LineError{Line: pathLine(root, path), Err: err}
}

// pathLine follows a field path (a.b[2].c["key"]) from root and returns
// the line of the deepest node found.
func pathLine(root *yaml.Node, path string) int {
	n := root
	for n != nil && (n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode) {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else if len(n.Content) > 0 {
			n = n.Content[0]
		} else {
			return 0
		}
	}
	if n == nil {
		return 0
	}
	line := 0 // nothing of the path exists: no line to name
	for _, seg := range splitPath(path) {
		var next *yaml.Node
		switch {
		case n.Kind == yaml.MappingNode && !seg.index:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg.key {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
			}
		case n.Kind == yaml.SequenceNode && seg.index:
			if seg.n >= 0 && seg.n < len(n.Content) {
				next = n.Content[seg.n]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		for next.Kind == yaml.AliasNode && next.Alias != nil {
			next = next.Alias
		}
		n = next
	}
	return line
}

type pathSeg struct {
	key   string
	index bool
	n     int
}

// splitPath splits a.b[2].c["k.x"] into a, b, [2], c, k.x.
func splitPath(path string) []pathSeg {
	var segs []pathSeg
	for len(path) > 0 {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if strings.HasPrefix(path, `["`) {
				// a quoted key may hold "]"
				if q, err := strconv.QuotedPrefix(path[1:]); err == nil {
					k, _ := strconv.Unquote(q)
					segs = append(segs, pathSeg{key: k})
					path = strings.TrimPrefix(path[1+len(q):], "]")
					continue
				}
			}
			if end < 0 {
				return segs
			}
			i, err := strconv.Atoi(path[1:end])
			if err != nil {
				return segs
			}
			segs = append(segs, pathSeg{index: true, n: i})
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			segs = append(segs, pathSeg{key: path[:end]})
			path = path[end:]
		}
	}
	return segs
}

// fileErrors formats a Parse error for a file: one "file:line: problem"
// per problem.
func fileErrors(file string, err error) error {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		var le *LineError
		if errors.As(e, &le) && le.Line > 0 {
			out = append(out, fmt.Errorf("%s:%d: %w", file, le.Line, le.Err))
		} else {
			out = append(out, fmt.Errorf("%s: %w", file, e))
		}
	}
	return errors.Join(out...)
}
