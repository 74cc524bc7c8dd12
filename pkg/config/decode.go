package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/promscaler/promscaler/internal/textdist"
	"github.com/promscaler/promscaler/internal/truncate"
)

// maxNodes bounds the work of decoding one document, counting every node
// visited after alias expansion, so that a small file of nested aliases
// ("billion laughs") cannot take unbounded time or memory.
const maxNodes = 200000

// decoder turns a yaml.Node tree into the typed configuration strictly:
// every unknown key, duplicate key and wrong kind of value is recorded, with
// its path and position, and decoding goes on so that all problems are
// reported at once.
type decoder struct {
	file  string
	lines []string // the source, for Source.Content
	src   *Source
	errs  ErrorList
	bad   []string // paths whose value could not be decoded
	nodes int
	stop  bool // the node budget is exhausted
}

func newDecoder(file string, data []byte) *decoder {
	return &decoder{
		file:  file,
		lines: strings.Split(string(data), "\n"),
		src:   newSource(file),
	}
}

func newSource(file string) *Source {
	return &Source{File: file, Keys: map[string]Position{}, Values: map[string]Position{}, Content: map[string]Position{}}
}

// recordContent records where the text of a string scalar starts when the
// source holds it verbatim.
func (d *decoder) recordContent(n *yaml.Node, path string) {
	if n.Line < 1 || n.Line > len(d.lines) {
		return
	}
	switch {
	case n.Style&yaml.LiteralStyle != 0:
		vals := strings.Split(strings.TrimRight(n.Value, "\n"), "\n")
		first := n.Line // the line of "|"; content starts below
		if first+len(vals) > len(d.lines) {
			return
		}
		indent := -1
		for i, v := range vals {
			raw := strings.TrimRight(d.lines[first+i], "\r")
			if v == "" {
				if strings.TrimSpace(raw) != "" {
					return
				}
				continue
			}
			if indent < 0 {
				indent = len(raw) - len(strings.TrimLeft(raw, " "))
			}
			if indent > len(raw) || raw[indent:] != v || strings.TrimLeft(raw[:indent], " ") != "" {
				return
			}
		}
		if indent >= 0 {
			d.src.Content[path] = Position{Line: first + 1, Column: indent + 1}
		}
	case n.Style&(yaml.FoldedStyle|yaml.FlowStyle) == 0 && !strings.Contains(n.Value, "\n"):
		raw := []rune(d.lines[n.Line-1])
		col := n.Column
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			col++
		}
		v := []rune(n.Value)
		if col < 1 || col-1+len(v) > len(raw) || string(raw[col-1:col-1+len(v)]) != n.Value {
			return
		}
		d.src.Content[path] = Position{Line: n.Line, Column: col}
	}
}

func (d *decoder) errorf(n *yaml.Node, path, hint, format string, args ...any) {
	e := &Error{File: d.file, Path: path, Msg: fmt.Sprintf(format, args...), Hint: hint}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) fail(n *yaml.Node, path, hint, format string, args ...any) {
	d.errorf(n, path, hint, format, args...)
	d.bad = append(d.bad, path)
}

// resolve follows aliases.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 100 {
			return nil
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the %s %q", strings.TrimPrefix(n.ShortTag(), "!!"), truncate.String(n.Value, 40))
	case yaml.DocumentNode:
		return "a document"
	}
	return "an unknown node"
}

var yamlBools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true,
	"true": true, "True": true, "TRUE": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false,
	"false": false, "False": false, "FALSE": false, "off": false, "Off": false, "OFF": false,
}

// decode stores n into v (addressable), recording path positions.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if d.stop {
		return
	}
	d.nodes++
	if d.nodes > maxNodes {
		d.stop = true
		d.fail(n, path, "", "document too large or too deeply aliased (more than %d nodes after alias expansion)", maxNodes)
		return
	}
	orig := n
	n = d.resolve(n)
	if n == nil {
		d.fail(orig, path, "", "alias chain too long")
		return
	}
	if _, seen := d.src.Values[path]; !seen {
		d.src.Values[path] = Position{Line: orig.Line, Column: orig.Column}
	}
	if isNull(n) {
		return // leave the zero value, as prometheus-adapter's decoder does
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		d.decode(n, elem.Elem(), path)
		v.Set(elem)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(orig, path, "", "expected a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := IndexPath(path, i)
			d.src.Keys[p] = Position{Line: item.Line, Column: item.Column}
			d.decode(item, s.Index(i), p)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(orig, path, "", "expected a mapping, got %s", kindName(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		for _, kv := range d.pairs(n, path) {
			p := KeyPath(path, kv.key)
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(kv.val, elem, p)
			m.SetMapIndex(reflect.ValueOf(kv.key), elem)
		}
		v.Set(m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(orig, path, "", "expected a string, got %s", kindName(n))
			return
		}
		if n.ShortTag() == "!!binary" {
			d.fail(orig, path, "", "expected a string, got binary data")
			return
		}
		v.SetString(n.Value)
		if orig == n {
			d.recordContent(n, path)
		}
	case reflect.Bool:
		b, ok := yamlBools[n.Value]
		if n.Kind != yaml.ScalarNode || !ok || n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			d.fail(orig, path, "", "expected true or false, got %s", kindName(n))
			return
		}
		v.SetBool(b)
	default:
		// Not reachable for the configuration types; fail loudly rather
		// than silently dropping a value if a field of a new kind is added.
		d.fail(orig, path, "", "internal error: cannot decode into %s", v.Type())
	}
}

type pair struct {
	key      string
	keyNode  *yaml.Node
	val      *yaml.Node
	explicit bool
}

// pairs returns the key/value pairs of a mapping, expanding merge keys
// ("<<: *anchor") as YAML 1.1 does: explicit keys win over merged ones, and
// earlier merged mappings win over later ones. It reports non-scalar and
// duplicate keys, and records key positions.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var out []pair
	seen := map[string]*yaml.Node{}
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		rk := d.resolve(k)
		if rk == nil || rk.Kind != yaml.ScalarNode {
			d.fail(k, path, "", "a key must be a string, got %s", kindNameSafe(rk))
			continue
		}
		if rk.ShortTag() == "!!merge" {
			merged = append(merged, val)
			continue
		}
		p := KeyPath(path, rk.Value)
		if first, dup := seen[rk.Value]; dup {
			// Only the first value is decoded, so its validation errors
			// still stand: record the problem without marking the path bad.
			d.errorf(k, p, "", "duplicate key %q (first set at line %d)", rk.Value, first.Line)
			continue
		}
		seen[rk.Value] = k
		d.src.Keys[p] = Position{Line: k.Line, Column: k.Column}
		out = append(out, pair{key: rk.Value, keyNode: k, val: val, explicit: true})
	}
	for _, m := range merged {
		rm := d.resolve(m)
		var sources []*yaml.Node
		switch {
		case rm != nil && rm.Kind == yaml.MappingNode:
			sources = []*yaml.Node{rm}
		case rm != nil && rm.Kind == yaml.SequenceNode:
			for _, s := range rm.Content {
				sources = append(sources, d.resolve(s))
			}
		default:
			d.fail(m, path, "", "a merge key (<<) needs a mapping or a list of mappings, got %s", kindNameSafe(rm))
			continue
		}
		for _, s := range sources {
			if s == nil || s.Kind != yaml.MappingNode {
				d.fail(m, path, "", "a merge key (<<) needs a mapping or a list of mappings, got %s", kindNameSafe(s))
				continue
			}
			d.nodes += len(s.Content)
			if d.nodes > maxNodes {
				d.stop = true
				d.fail(m, path, "", "document too large or too deeply aliased (more than %d nodes after alias expansion)", maxNodes)
				return out
			}
			for _, kv := range d.pairs(s, path) {
				if _, dup := seen[kv.key]; dup {
					continue
				}
				seen[kv.key] = kv.keyNode
				kv.explicit = false
				out = append(out, kv)
			}
		}
	}
	return out
}

func kindNameSafe(n *yaml.Node) string {
	if n == nil {
		return "an alias chain that is too long"
	}
	return kindName(n)
}

type fieldInfo struct {
	index int
	name  string
}

var structFields sync.Map // reflect.Type -> map[string]fieldInfo

func fieldsOf(t reflect.Type) map[string]fieldInfo {
	if f, ok := structFields.Load(t); ok {
		return f.(map[string]fieldInfo)
	}
	m := map[string]fieldInfo{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = fieldInfo{index: i, name: name}
	}
	structFields.Store(t, m)
	return m
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "", "expected a mapping, got %s", kindName(n))
		return
	}
	fields := fieldsOf(v.Type())
	for _, kv := range d.pairs(n, path) {
		p := KeyPath(path, kv.key)
		f, ok := fields[kv.key]
		if !ok {
			if kv.explicit {
				d.fail(kv.keyNode, p, suggest(kv.key, fields), "unknown key %q", kv.key)
			}
			continue
		}
		d.decode(kv.val, v.Field(f.index), p)
	}
}

// suggest proposes the known key closest to an unknown one.
func suggest(key string, fields map[string]fieldInfo) string {
	names := slices.Sorted(maps.Keys(fields))
	best, bestDist := "", 3
	for _, name := range names {
		if strings.EqualFold(name, key) {
			return fmt.Sprintf("did you mean %q? keys are case-sensitive", name)
		}
		if dist := textdist.Levenshtein(strings.ToLower(key), strings.ToLower(name)); dist < bestDist {
			best, bestDist = name, dist
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return "known keys here: " + strings.Join(names, ", ")
}
