package provider

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
)

type matchSample struct {
	name  string
	value float64
}

func TestSampleMatcher(t *testing.T) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("pod-%04d", i)
		}
		return out
	}
	// shuffled returns samples for names in a fixed scrambled order.
	shuffled := func(names []string) []matchSample {
		out := make([]matchSample, 0, len(names))
		for i := range names {
			j := (i * 7919) % len(names)
			out = append(out, matchSample{names[j], float64(j)})
		}
		return out
	}
	inOrder := func(names []string) []matchSample {
		out := make([]matchSample, 0, len(names))
		for i, n := range names {
			out = append(out, matchSample{n, float64(i)})
		}
		return out
	}
	all := func(n int) []point {
		out := make([]point, n)
		for i := range out {
			out[i] = point{value: model.SampleValue(i), ts: 1000, ok: true}
		}
		return out
	}
	tests := []struct {
		name    string
		names   []string
		samples []matchSample
		want    []point
		// wantIndexed: the names were indexed in a map (random order).
		wantIndexed bool
	}{
		{name: "one name", names: []string{"a"}, samples: []matchSample{{"b", 1}, {"a", 2}, {"c", 3}},
			want: []point{{value: 2, ts: 1000, ok: true}}},
		{name: "no samples", names: []string{"a", "b"}, want: []point{{}, {}}},
		{name: "in order", names: names(500), samples: inOrder(names(500)), want: all(500)},
		{name: "shuffled, past the searches", names: names(500), samples: shuffled(names(500)), want: all(500), wantIndexed: true},
		{name: "shuffled, few", names: names(20), samples: shuffled(names(20)), want: all(20)},
		{name: "ascending runs", names: names(6),
			samples: []matchSample{{"pod-0003", 3}, {"pod-0004", 4}, {"pod-0005", 5}, {"pod-0000", 0}, {"pod-0001", 1}, {"pod-0002", 2}},
			want:    all(6)},
		{name: "objects not asked for and unnamed samples are left out", names: []string{"b", "d"},
			samples: []matchSample{{"a", 1}, {"", 9}, {"b", 2}, {"c", 3}, {"d", 4}, {"e", 5}},
			want:    []point{{value: 2, ts: 1000, ok: true}, {value: 4, ts: 1000, ok: true}}},
		{name: "the first finite sample of an object counts", names: []string{"a", "b", "c"},
			samples: []matchSample{{"a", math.NaN()}, {"a", 1}, {"b", 2}, {"a", 3}, {"b", math.Inf(1)}, {"c", math.Inf(-1)}},
			want:    []point{{value: 1, ts: 1000, ok: true}, {value: 2, ts: 1000, ok: true}, {}}},
		{name: "a missing object", names: []string{"a", "b", "c"}, samples: []matchSample{{"c", 3}, {"a", 1}},
			want: []point{{value: 1, ts: 1000, ok: true}, {}, {value: 3, ts: 1000, ok: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.IsSorted(tc.names) {
				t.Fatal("names must be sorted")
			}
			m := sampleMatcher{rule: "rules[0]", metric: "x", namespace: "ns", names: tc.names, found: make([]point, len(tc.names))}
			for _, s := range tc.samples {
				m.add(s.name, model.SampleValue(s.value), 1000)
			}
			if diff := cmp.Diff(tc.want, m.found, cmp.AllowUnexported(point{})); diff != "" {
				t.Errorf("found (-want +got):\n%s", diff)
			}
			if indexed := m.index != nil; indexed != tc.wantIndexed {
				t.Errorf("indexed %v, want %v", indexed, tc.wantIndexed)
			}
		})
	}
}

func TestIsSortedUnique(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  bool
	}{
		{nil, true},
		{[]string{"a"}, true},
		{[]string{"a", "b", "c"}, true},
		{[]string{"a", "a"}, false},
		{[]string{"b", "a"}, false},
		{[]string{"a", "c", "b"}, false},
	} {
		if got := isSortedUnique(tc.names); got != tc.want {
			t.Errorf("isSortedUnique(%q) = %v, want %v", tc.names, got, tc.want)
		}
	}
}

// TestSampleMatcherSharedIndex checks that an answer in random order is
// matched through the shared index when there is one.
func TestSampleMatcherSharedIndex(t *testing.T) {
	var names []string
	for i := range 200 {
		names = append(names, fmt.Sprintf("pod-%04d", i))
	}
	index := make(map[string]int, len(names))
	for i, n := range names {
		index[n] = i
	}
	calls := 0
	m := sampleMatcher{names: names, found: make([]point, len(names)), sharedIndex: func() map[string]int {
		calls++
		return index
	}}
	for i := range names {
		j := i * 101 % len(names)
		m.add(names[j], model.SampleValue(j), 1000)
	}
	for i, p := range m.found {
		if !p.ok || p.value != model.SampleValue(i) {
			t.Errorf("%s: %+v, want value %d", names[i], p, i)
		}
	}
	if calls != 1 {
		t.Errorf("shared index asked %d times, want 1", calls)
	}
}
