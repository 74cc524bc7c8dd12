package textdist

import "testing"

func TestLevenshtein(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"idle-period", "idle-perod", 1},
		{"kitten", "sitting", 3},
		{"metricsQuery", "metricQuery", 1},
		{"abc", "", 3},
		{string(make([]byte, 65)), "a", 1 << 30},
	} {
		if got := Levenshtein(tc.a, tc.b); got != tc.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
