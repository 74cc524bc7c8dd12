package simulate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden outputs of the examples")

const examplesDir = "../../docs/examples/simulate"

// TestExamplesGolden replays every example scenario in docs/ and compares
// both output formats with the golden files beside it (regenerate with
// go test ./pkg/simulate -update).
func TestExamplesGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("want at least the five documented examples in %s, got %v (%v)", examplesDir, files, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			s, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(s)
			if err != nil {
				t.Fatal(err)
			}
			var js, table bytes.Buffer
			if err := res.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if err := res.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join(examplesDir, name+".golden.json"), js.Bytes())
			golden(t, filepath.Join(examplesDir, name+".golden.txt"), table.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// TestExamplesBehaviour checks what each example is there to show, beyond
// the snapshot: the sequence of replica counts and the key condition.
func TestExamplesBehaviour(t *testing.T) {
	cases := []struct {
		file     string
		replicas []int32
		check    func(t *testing.T, r *Result)
	}{
		{"pods-scale-up-unready.yaml", []int32{4, 5, 5, 5, 5}, func(t *testing.T, r *Result) {
			m := r.Steps[2].Metrics[0]
			if m.Pods == nil || len(m.Pods.Unready) != 3 || m.AdjustedUsageRatio == nil || *m.AdjustedUsageRatio != 1 {
				t.Errorf("step 2: want 3 unready pods and an adjusted ratio of 1, got %+v", m)
			}
		}},
		{"scale-down-stabilization.yaml", []int32{4, 4, 4, 4, 4, 4, 2}, func(t *testing.T, r *Result) {
			if c := r.Steps[3].Conditions[0]; c.Reason != "ScaleDownStabilized" || *r.Steps[3].ProposedReplicas != 2 || *r.Steps[3].StabilizedReplicas != 4 {
				t.Errorf("step 3: want proposal 2 stabilized at 4 (ScaleDownStabilized), got %+v", c)
			}
		}},
		{"behavior-scale-up-rate.yaml", []int32{4, 4, 4, 6, 6, 8, 10, 10}, func(t *testing.T, r *Result) {
			if c := findCond(r.Steps[1], "ScalingLimited"); c == nil || c.Reason != "ScaleUpLimit" || c.Status != "True" {
				t.Errorf("step 1: want ScalingLimited=True/ScaleUpLimit, got %+v", c)
			}
		}},
		{"cpu-startup-spike.yaml", []int32{3, 3, 3}, func(t *testing.T, r *Result) {
			m := r.Steps[1].Metrics[0]
			if m.Pods == nil || len(m.Pods.Unready) != 1 || m.Pods.Unready[0] != "api-2" || *m.Current.AverageUtilization != 80 {
				t.Errorf("step 1: want api-2's spike set aside and 80%% from the others, got %+v %+v", m.Pods, m.Current)
			}
		}},
		{"external-scale-to-zero.yaml", []int32{2, 2, 0, 0, 3, 3}, func(t *testing.T, r *Result) {
			if c := findCond(r.Steps[3], "ScaledToZero"); c == nil || c.Status != "True" {
				t.Errorf("step 3: want ScaledToZero=True, got %+v", c)
			}
			if c := findCond(r.Steps[3], "ScalingActive"); c == nil || c.Reason != "ValidMetricFound" {
				t.Errorf("step 3: want metrics evaluated at zero replicas, got %+v", c)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			s, err := Load(filepath.Join(examplesDir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(s)
			if err != nil {
				t.Fatal(err)
			}
			var got []int32
			for _, st := range r.Steps {
				got = append(got, st.Replicas)
			}
			if diff := cmp.Diff(tc.replicas, got); diff != "" {
				t.Errorf("replicas after each step (-want +got):\n%s", diff)
			}
			tc.check(t, r)
		})
	}
}

func findCond(s StepResult, typ string) *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			return &s.Conditions[i]
		}
	}
	return nil
}
