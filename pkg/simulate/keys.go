package simulate

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checkKeys walks the YAML tree beside the Go type it decodes into and
// reports the first mapping key that is not exactly a JSON field name of
// that type, with its path and line. encoding/json alone would accept keys
// in any letter case ("maxreplicas") and say nothing of where an unknown
// one is.
func checkKeys(n *yaml.Node, t reflect.Type, path *field.Path) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
		target := n.Alias
		if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
			target = n.Content[0]
		}
		if target == nil {
			return nil
		}
		return checkKeys(target, t, path)
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil // a type error the decoder reports
		}
		fields := map[string]reflect.Type{}
		collectFields(t, fields)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := child(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				return &LineError{Line: k.Line, Err: fmt.Errorf("%s: unknown field%s", p.String(), suggest(k.Value, fields))}
			}
			if err := checkKeys(v, ft, p); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i+1], t.Elem(), path.Key(n.Content[i].Value)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), path.Index(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// child is the field name of path (a top-level field when path is nil).
func child(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

// collectFields maps the JSON names of t's fields (embedded structs
// without a name, or tagged ",inline", are flattened) to their types.
func collectFields(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" && f.Anonymous {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collectFields(ft, out)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
}

// suggest names the field a misspelt key probably meant.
func suggest(key string, fields map[string]reflect.Type) string {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return fmt.Sprintf(" (did you mean %q?)", name)
		}
	}
	return ""
}
