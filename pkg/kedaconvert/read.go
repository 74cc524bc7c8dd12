package kedaconvert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/promscaler/promscaler/internal/yamlpath"
)

// Document is one ScaledObject read from a YAML stream, with the node
// tree it came from (for the line of each field).
type Document struct {
	// File names the input in messages.
	File   string
	Object ScaledObject
	root   *yaml.Node
}

// Read decodes every YAML document of data. ScaledObjects are returned;
// other kinds (and empty documents) are skipped with a Note each. A
// document that is not valid YAML, or a ScaledObject with an unknown or
// mistyped field, is an error naming file:line.
func Read(file string, data []byte) ([]Document, []Note, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []Document
	var notes []Note
	for i := 0; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, notes, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		root := &n
		if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
			root = n.Content[0]
		}
		if root.Kind == 0 || root.Tag == "!!null" {
			continue
		}
		kind, apiVersion := scalar(root, "kind"), scalar(root, "apiVersion")
		if kind != "ScaledObject" || !strings.HasPrefix(apiVersion, "keda.sh/") {
			notes = append(notes, Note{Place: fmt.Sprintf("%s:%d", file, root.Line), Field: "kind",
				Reason: fmt.Sprintf("%s %s skipped: only keda.sh ScaledObjects are converted", apiVersion, kind)})
			continue
		}
		obj, err := decode(root)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: ScaledObject: %w", file, root.Line, err)
		}
		docs = append(docs, Document{File: file, Object: obj, root: root})
	}
}

// decode decodes one ScaledObject strictly through JSON (the json tags of
// the types, as the API server decodes).
func decode(root *yaml.Node) (ScaledObject, error) {
	var v any
	if err := root.Decode(&v); err != nil {
		return ScaledObject{}, err
	}
	raw, err := json.Marshal(jsonable(v))
	if err != nil {
		return ScaledObject{}, err
	}
	var obj ScaledObject
	if err := sigsyaml.UnmarshalStrict(raw, &obj); err != nil {
		return ScaledObject{}, err
	}
	return obj, nil
}

// jsonable turns yaml.v3's map[string]any tree into one encoding/json
// accepts (non-string keys become strings).
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonable(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonable(e)
		}
		return t
	}
	return v
}

// scalar is the value of a top-level scalar key of a mapping node.
func scalar(m *yaml.Node, key string) string {
	if v := child(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// child is the value node of key in mapping m, or nil.
func child(m *yaml.Node, key string) *yaml.Node {
	_, v := yamlpath.Lookup(m, key)
	return v
}

// line is the line of the field at path (keys and [i] indexes, as
// "spec.triggers[1].metadata.query") in the document, or of the closest
// enclosing field found.
func (d Document) line(path string) int {
	if d.root == nil {
		return 0
	}
	if l := yamlpath.Line(d.root, path); l > 0 {
		return l
	}
	return d.root.Line
}
