package promclient

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

func FuzzParseHeader(f *testing.F) {
	for _, seed := range []string{
		"X-Scope-OrgID=tenant", "Authorization=Bearer x=y", "a=", "=v", "novalue",
		"Bad Name=1", "X=a\r\nInjected: 1", "X-Ünicode=1", " X-Space =v",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		name, value, err := parseHeader(raw)
		if err != nil {
			return
		}
		if name == "" || name != http.CanonicalHeaderKey(name) {
			t.Fatalf("parseHeader(%q) name %q: empty or not canonical", raw, name)
		}
		for _, r := range name {
			if !isTokenChar(r) {
				t.Fatalf("parseHeader(%q) accepted name %q with %q", raw, name, r)
			}
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			t.Fatalf("parseHeader(%q) accepted a value with a line break: %q", raw, value)
		}
		if !strings.Contains(raw, value) {
			t.Fatalf("parseHeader(%q) value %q is not from the input", raw, value)
		}
	})
}

func TestFormatTimeout(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{in: 10 * time.Second, want: "10s"},
		{in: 90 * time.Second, want: "90s"},
		{in: 1500 * time.Millisecond, want: "1s"},
		{in: 250 * time.Millisecond, want: "250ms"},
		{in: 999_999 * time.Microsecond, want: "999ms"},
		{in: time.Microsecond, want: "1ms"},
		{in: 2 * time.Hour, want: "7200s"},
	}
	for _, tc := range tests {
		got := formatTimeout(tc.in)
		if got != tc.want {
			t.Errorf("formatTimeout(%v) = %q, want %q", tc.in, got, tc.want)
		}
		// Every value is a Prometheus duration, never above the timeout
		// (except the 1ms floor).
		d, err := model.ParseDuration(got)
		if err != nil {
			t.Errorf("formatTimeout(%v) = %q does not parse: %v", tc.in, got, err)
		}
		if time.Duration(d) > tc.in && tc.in >= time.Millisecond {
			t.Errorf("formatTimeout(%v) = %q is longer than the timeout", tc.in, got)
		}
	}
}
