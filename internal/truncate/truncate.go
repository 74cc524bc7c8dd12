// Package truncate shortens strings quoted in errors, logs and events.
package truncate

// marker ends a shortened string.
const marker = "..."

// String returns s when it is at most n bytes, else its longest prefix
// that, cut on a rune boundary and followed by "...", is at most n bytes.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len(marker), 0)
	for cut > 0 && s[cut]&0xC0 == 0x80 { // inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + marker
}
