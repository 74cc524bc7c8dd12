package objectcache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKeptNamesIndex(t *testing.T) {
	k := &keptNames{names: []string{"a", "b", "c"}}
	got := k.nameIndex()
	if diff := cmp.Diff(map[string]int{"a": 0, "b": 1, "c": 2}, got); diff != "" {
		t.Errorf("index (-want +got):\n%s", diff)
	}
	got["x"] = 9 // the same map each time: built once
	if again := k.nameIndex(); again["x"] != 9 {
		t.Error("the index was built again")
	}
}
