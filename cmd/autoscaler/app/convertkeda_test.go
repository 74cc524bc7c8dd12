package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConvertKEDA(t *testing.T) {
	const in = "../../../pkg/kedaconvert/testdata/fallback.yaml"
	queries := filepath.Join(t.TempDir(), "queries.yaml")
	tests := []struct {
		name       string
		args       []string
		stdin      string
		code       int
		stdout     []string
		stderr     []string
		queriesOut bool
	}{
		{name: "file", args: []string{"-f", in}, code: 0,
			stdout: []string{"externalQueries:", "kind: HorizontalPodAutoscaler", "promscaler.io/fallback-behavior: currentReplicasIfHigher"},
			stderr: []string{"fallback.yaml:15: spec.cooldownPeriod: not converted"}},
		{name: "strict", args: []string{"-f", in, "--strict"}, code: 3},
		{name: "queries apart", args: []string{"-f", in, "--queries-out", queries}, code: 0, queriesOut: true,
			stdout: []string{"kind: HorizontalPodAutoscaler"}},
		{name: "stdin", args: []string{"-f", "-"}, code: 0,
			stdin:  "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: a, namespace: n}\nspec:\n  minReplicaCount: 1\n  scaleTargetRef: {name: a}\n  triggers:\n  - {type: prometheus, metadata: {serverAddress: 'http://p:9090', query: 'sum(up)', threshold: '2'}}\n",
			stdout: []string{"name: n-a-s0-prometheus", "query: sum(up)"}, stderr: []string{"stdin:8: spec.triggers[0].metadata.serverAddress"}},
		{name: "bad yaml", args: []string{"-f", "-"}, stdin: "a: [", code: 1, stderr: []string{"stdin: document 1: yaml"}},
		{name: "no file", args: nil, code: 2, stderr: []string{"-f: at least one file is required"}},
		{name: "bad backend", args: []string{"-f", in, "--backend", "nope"}, code: 2, stderr: []string{`--backend "nope": want ADDRESS=NAME`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runConvertKEDA(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			for _, w := range tt.stdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if tt.queriesOut {
				b, err := os.ReadFile(queries)
				if err != nil || !strings.Contains(string(b), "externalQueries:") || strings.Contains(stdout.String(), "externalQueries:") {
					t.Errorf("--queries-out: file %q (%v), stdout:\n%s", b, err, stdout.String())
				}
			}
		})
	}
}
