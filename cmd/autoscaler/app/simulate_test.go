package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const example = "../../../docs/examples/simulate/scale-down-stabilization"

func TestSimulateCommand(t *testing.T) {
	goldenJSON, err := os.ReadFile(example + ".golden.json")
	if err != nil {
		t.Fatal(err)
	}
	goldenTable, err := os.ReadFile(example + ".golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("target: {replicas: 1}\nsteps: [{at: 0s}]\nhpa: {spec: {maxReplicas: 2, scaleTargetRef: {kind: Deployment, name: x}, minReplica: 1}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		args      []string
		code      int
		stdout    string
		stdoutHas []string
		stderrHas []string
	}{
		{name: "json", args: []string{"simulate", "-f", example + ".yaml", "-o", "json"}, code: 0, stdout: string(goldenJSON)},
		{name: "table by default", args: []string{"simulate", "-f", example + ".yaml"}, code: 0, stdout: string(goldenTable)},
		{name: "no file", args: []string{"simulate"}, code: 2, stderrHas: []string{"-f: a scenario file is required"}},
		{name: "bad output and no file reported together", args: []string{"simulate", "-o", "yaml"}, code: 2, stderrHas: []string{"-f: a scenario file is required", `-o: must be json or table, got "yaml"`}},
		{name: "stray argument", args: []string{"simulate", "-f", "x.yaml", "extra"}, code: 2, stderrHas: []string{`unexpected arguments ["extra"]`}},
		{name: "unknown flag", args: []string{"simulate", "-x"}, code: 2, stderrHas: []string{"flag provided but not defined: -x"}},
		{name: "help points at the schema", args: []string{"simulate", "-h"}, code: 0, stderrHas: []string{"usage: autoscaler simulate -f SCENARIO [-o json|table] [--history]", "Scenario schema: docs/simulate.md", "-history"}},
		{name: "history", args: []string{"simulate", "-f", example + ".yaml", "--history"}, code: 0, stdoutHas: []string{"HISTORY after each step", "0  recommendations: [4@-1ns 4@0s]"}},
		{name: "missing file", args: []string{"simulate", "-f", filepath.Join(t.TempDir(), "nope.yaml")}, code: 1, stderrHas: []string{"reading scenario"}},
		{name: "invalid scenario names the file, line and field", args: []string{"simulate", "-f", bad}, code: 1, stderrHas: []string{bad + ":3: hpa.spec.minReplica: unknown field"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit code = %d, want %d (stderr: %s)", code, tc.code, stderr.String())
			}
			if tc.stdout != "" {
				if diff := cmp.Diff(tc.stdout, stdout.String()); diff != "" {
					t.Errorf("stdout mismatch (-want +got):\n%s", diff)
				}
			}
			for _, s := range tc.stdoutHas {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout %q does not contain %q", stdout.String(), s)
				}
			}
			for _, s := range tc.stderrHas {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr %q does not contain %q", stderr.String(), s)
				}
			}
		})
	}
}
