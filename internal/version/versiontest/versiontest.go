// Package versiontest checks a command's --version and version subcommand
// the same way for every binary of the project.
package versiontest

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/promscaler/promscaler/internal/version"
)

// Run is a command's entry point: arguments, output streams, exit code.
type Run func(args []string, stdout, stderr io.Writer) int

// CheckFlag runs program's --version and version: each must exit 0 and
// print "<program> <version.Get()>" on one line; a test binary is not
// stamped by the Makefile, so it must say "devel".
func CheckFlag(t *testing.T, program string, run Run) {
	t.Helper()
	for _, arg := range []string{"--version", "version"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{arg}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s %s: exit %d, stderr %q", program, arg, code, stderr.String())
		}
		if want := program + " " + version.Get().String() + "\n"; stdout.String() != want {
			t.Errorf("%s %s printed %q, want %q", program, arg, stdout.String(), want)
		}
		if !strings.HasPrefix(stdout.String(), program+" devel ") {
			t.Errorf("unstamped test binary should say devel: %q", stdout.String())
		}
	}
}
