package yamlpath

import (
	"testing"

	"gopkg.in/yaml.v3"
)

func TestLine(t *testing.T) {
	const doc = `spec:
  triggers:
  - type: prometheus
    metadata:
      query: sum(x)
      "a.b]": 1
base: &b
  k: v
ref: *b
`
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &root); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"spec.triggers[0].metadata.query", 5},
		{`spec.triggers[0].metadata["a.b]"]`, 6},
		{`spec.triggers[0].metadata[query]`, 5}, // field.Path's Key: unquoted
		{`spec[triggers][0]`, 3},
		{"spec.triggers[0].type", 3},
		{"spec.triggers[3].type", 2},          // no such item: the list's line
		{"spec.triggers[0].metadata.nope", 4}, // the closest enclosing field
		{"ref.k", 8},                          // through the alias
		{"nope", 0},
	} {
		if got := Line(&root, tc.path); got != tc.want {
			t.Errorf("Line(%q) = %d, want %d", tc.path, got, tc.want)
		}
	}
	if k, v := Lookup(root.Content[0], "base"); k == nil || k.Line != 7 || v.Kind != yaml.MappingNode {
		t.Errorf("Lookup(base) = %v, %v", k, v)
	}
	if k, v := Lookup(nil, "x"); k != nil || v != nil {
		t.Error("Lookup(nil) found something")
	}
}
