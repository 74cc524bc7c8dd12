package truncate

import (
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"longer than ten", 10, "longer ..."},
		{"héllo wörld", 6, "hé..."},
		{"héllo wörld", 5, "h..."}, // é is two bytes: not cut inside it
		{"abc", 2, "..."},
		{"", 0, ""},
	}
	for _, tc := range tests {
		got := String(tc.s, tc.n)
		if got != tc.want {
			t.Errorf("String(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("String(%q, %d) = %q is not valid UTF-8", tc.s, tc.n, got)
		}
	}
}

func FuzzString(f *testing.F) {
	f.Add("héllo wörld", 6)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := String(s, n)
		if len(s) <= n && got != s {
			t.Fatalf("String(%q, %d) = %q, want s unchanged", s, n, got)
		}
		if len(s) > n && len(got) > max(n, len(marker)) {
			t.Fatalf("String(%q, %d) = %q, longer than %d", s, n, got, n)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("String(%q, %d) = %q cuts a rune", s, n, got)
		}
	})
}
