package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/test/helptest"
)

// TestHelpInSections: --help, -h and help print the usage once, then every
// server flag under its section, in order.
func TestHelpInSections(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"/adapter", "--v=2", "--help"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d, want 0; stderr: %s", args, code, stderr.String())
		}
		if stderr.Len() != 0 {
			t.Errorf("%q: stderr %q, want nothing", args, stderr.String())
		}
		helptest.Check(t, stdout.String(), "adapter [flags]", NewServerOptions().Flags())
	}
}

// TestFlagSections: a flag of each concern is in its section.
func TestFlagSections(t *testing.T) {
	fss := NewServerOptions().Flags()
	for flag, section := range map[string]string{
		"prometheus-url":                  sectionPrometheus,
		"backends-config":                 sectionPrometheus,
		"metrics-relist-interval":         sectionDiscovery,
		"discovery-strategy":              sectionDiscovery,
		"config":                          sectionRules,
		"team-rules":                      sectionRules,
		"team-rules-max-waiting":          sectionRules,
		"team-rules-max-in-flight":        sectionRules,
		"team-rules-max-metrics-per-rule": sectionRules,
		"downstream-config":               sectionDownstream,
		"secure-port":                     sectionServing,
		"disable-http2":                   sectionServing,
		"authentication-kubeconfig":       sectionAuth,
		"authorization-kubeconfig":        sectionAuth,
		"client-cert-verify-cache-ttl":    sectionAuth,
		"audit-log-path":                  sectionAudit,
		"profiling":                       sectionAPIServer,
		"lister-kubeconfig":               sectionKube,
		"v":                               sectionLogging,
		"log-flush-frequency":             sectionLogging,
	} {
		if fss.FlagSets[section].Lookup(flag) == nil {
			t.Errorf("--%s is not in the %q section", flag, section)
		}
	}
}

// TestTeamBoundDefaultsInHelp: --help shows --team-rules-max-in-flight's
// real default, and none for --team-rules-max-waiting, whose default is
// derived per backend (its usage says so) and whose 0 means no bound.
func TestTeamBoundDefaultsInHelp(t *testing.T) {
	fs := NewServerOptions().Flags().FlagSets[sectionRules]
	got := map[string]string{}
	for _, name := range []string{"team-rules-max-in-flight", "team-rules-max-waiting"} {
		got[name] = fs.Lookup(name).DefValue
	}
	want := map[string]string{"team-rules-max-in-flight": "2", "team-rules-max-waiting": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults shown by --help (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.PrintDefaults()
	for _, want := range []string{"0: no bound per team. (default 2)", "Default: a quarter of each backend's bound (--prometheus-max-waiting or its max_waiting; 10 of the default 40). 0: no bound per team.\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
}
