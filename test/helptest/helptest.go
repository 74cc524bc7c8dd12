// Package helptest checks a command's --help: one usage line, then every
// flag of the command's named flag sets under its section's heading, in
// the sets' order, and no flag twice.
package helptest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
)

// flagName is the long name a help line documents ("  -v, --v Level ...").
var flagName = regexp.MustCompile(`^\s+(?:-\w, )?--([\w.-]+)`)

// Check checks out, the output of --help, against fss: usage appears once,
// and each section's heading ("Name flags:") is followed by exactly the
// section's visible flags.
func Check(t *testing.T, out, usage string, fss cliflag.NamedFlagSets) {
	t.Helper()
	if n := strings.Count(out, usage); n != 1 {
		t.Errorf("the usage line %q appears %d times in --help, want once:\n%s", usage, n, out)
	}
	want := map[string][]string{}
	var order []string
	for _, name := range fss.Order {
		fs := fss.FlagSets[name]
		heading := strings.ToUpper(name[:1]) + name[1:] + " flags:"
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Deprecated == "" {
				want[heading] = append(want[heading], f.Name)
			}
		})
		if len(want[heading]) > 0 {
			order = append(order, heading)
		}
	}
	got := map[string][]string{}
	var gotOrder []string
	section := ""
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasSuffix(line, " flags:") && !strings.HasPrefix(line, " ") {
			section = line
			gotOrder = append(gotOrder, line)
			continue
		}
		if m := flagName.FindStringSubmatch(line); m != nil {
			if section == "" {
				t.Errorf("flag --%s listed before any section", m[1])
				continue
			}
			got[section] = append(got[section], m[1])
		}
	}
	if diff := cmp.Diff(order, gotOrder); diff != "" {
		t.Errorf("sections of --help (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flags by section (-want +got):\n%s", diff)
	}
}
