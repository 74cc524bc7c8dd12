// Package yamlpath places a field path (a.b[2].c["key"]) in a yaml.v3
// node tree: the line a validation error names.
package yamlpath

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Line follows a field path (a.b[2].c["key"], as apimachinery's
// field.Path prints it) from root and returns the line of the deepest node
// found; 0 when not even the first key exists.
func Line(root *yaml.Node, path string) int {
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

// splitPath splits a.b[2].c["k.x"] into a, b, [2], c, k.x, and
// a[k.x] (field.Path's Key) into a, k.x.
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
			if i, err := strconv.Atoi(path[1:end]); err == nil {
				segs = append(segs, pathSeg{index: true, n: i})
			} else {
				// field.Path's Key: an unquoted map key
				segs = append(segs, pathSeg{key: path[1:end]})
			}
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

// Lookup returns the key and value nodes of key in mapping m, or nils when
// m is not a mapping or has no such key.
func Lookup(m *yaml.Node, key string) (k, v *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}
