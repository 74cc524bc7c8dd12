package app

import (
	"bytes"
	"testing"

	"github.com/promscaler/promscaler/test/helptest"
)

// TestHelpInSections: --help and -h print the usage once, then every
// controller flag under its section, in order.
func TestHelpInSections(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"--v=2", "--help"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d, want 0; stderr: %s", args, code, stderr.String())
		}
		if stderr.Len() != 0 {
			t.Errorf("%q: stderr %q, want nothing", args, stderr.String())
		}
		helptest.Check(t, stdout.String(), "autoscaler [flags]", NewOptions().Flags())
	}
	fss := NewOptions().Flags()
	for flag, section := range map[string]string{
		"kubeconfig":                          "Kubernetes API",
		"mode":                                "controller",
		"horizontal-pod-autoscaler-tolerance": "algorithm (kube-controller-manager's)",
		"metrics-bind-address":                "serving",
		"leader-elect-lease-duration":         "leader election",
		"v":                                   "logging",
	} {
		if fss.FlagSets[section].Lookup(flag) == nil {
			t.Errorf("--%s is not in the %q section", flag, section)
		}
	}
}
