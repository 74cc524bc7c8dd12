package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/promscaler/promscaler/internal/version"
)

func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{arg}, &stdout, &stderr); code != 0 {
			t.Fatalf("autoscaler %s: exit %d, stderr %q", arg, code, stderr.String())
		}
		if want := "autoscaler " + version.Get().String() + "\n"; stdout.String() != want {
			t.Errorf("autoscaler %s printed %q, want %q", arg, stdout.String(), want)
		}
		if !strings.HasPrefix(stdout.String(), "autoscaler devel ") {
			t.Errorf("unstamped test binary should say devel: %q", stdout.String())
		}
	}
}
