package simulate

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/test/golden"
)

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
			// preloaded-history's output is the one with --history
			res, err := Run(s, Options{History: name == "preloaded-history"})
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
			golden.Check(t, filepath.Join(examplesDir, name+".golden.json"), js.Bytes())
			golden.Check(t, filepath.Join(examplesDir, name+".golden.txt"), table.Bytes())
		})
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
		{"coexist-activation.yaml", []int32{0, 0, 1, 3, 3}, func(t *testing.T, r *Result) {
			if c := findCond(r.Steps[1], "ScalingActive"); c == nil || c.Reason != "ScalingDisabled" {
				t.Errorf("step 1: want kube-controller-manager's ScalingDisabled at 0 replicas, got %+v", c)
			}
			if sc := r.Steps[2].Scaler; sc == nil || sc.Action != "Activated" || sc.Scale == nil || *sc.Scale != 1 {
				t.Errorf("step 2: want promscaler to activate to minReplicas 1, got %+v", sc)
			}
			if !r.Steps[3].Rescaled || r.Steps[3].Scaler.Action != "" {
				t.Errorf("step 3: want kube-controller-manager, not promscaler, to scale up, got %+v", r.Steps[3])
			}
		}},
		{"coexist-idle-to-zero.yaml", []int32{2, 2, 1, 1, 1, 1, 0, 0}, func(t *testing.T, r *Result) {
			for i, want := range []string{"Active", "Active", "Idle", "Idle", "Idle", "Idle", "ScaledToZero", "ScaledToZero"} {
				if got := r.Steps[i].Scaler.Phase; got != want {
					t.Errorf("step %d: phase %s, want %s", i, got, want)
				}
			}
			if sc := r.Steps[6].Scaler; sc.Action != "ScaledToZero" || !strings.Contains(sc.Reason, "for 2m0s") {
				t.Errorf("step 6: want the scale to zero after the 2m idle period, got %+v", sc)
			}
		}},
		{"coexist-fallback.yaml", []int32{3, 3, 3, 5, 5, 3, 3}, func(t *testing.T, r *Result) {
			if sc := r.Steps[3].Scaler; sc.Action != "FallbackApplied" || sc.Failures != 3 {
				t.Errorf("step 3: want the fallback after 3 failed periods, got %+v", sc)
			}
			if sc := r.Steps[5].Scaler; sc.Action != "FallbackEnded" || !r.Steps[5].Rescaled {
				t.Errorf("step 5: want the fallback ended and kube-controller-manager scaling again, got %+v", r.Steps[5])
			}
		}},
		{"coexist-fallback-scale-error.yaml", []int32{3, 3, 3, 3, 5, 3, 3}, func(t *testing.T, r *Result) {
			if sc := r.Steps[3].Scaler; sc.Error == "" || sc.Phase != "Active" || sc.Failures != 2 {
				t.Errorf("step 3: want the failed fallback write to keep the state (Active, 2 failures), got %+v", sc)
			}
			if sc := r.Steps[4].Scaler; sc.Action != "FallbackApplied" || sc.Scale == nil || *sc.Scale != 5 || sc.Error != "" {
				t.Errorf("step 4: want the fallback written at the next period, got %+v", sc)
			}
		}},
		{"coexist-idle-scale-error.yaml", []int32{2, 2, 1, 1, 1, 1, 1, 0, 0}, func(t *testing.T, r *Result) {
			if sc := r.Steps[6].Scaler; sc.Error == "" || sc.Phase != "Idle" {
				t.Errorf("step 6: want the failed write to keep the idle countdown, got %+v", sc)
			}
			if sc := r.Steps[7].Scaler; sc.Action != "ScaledToZero" || !strings.Contains(sc.Reason, "for 2m30s") {
				t.Errorf("step 7: want zero written at the next period, idle since 1m, got %+v", sc)
			}
		}},
		{"coexist-paused-scale-in.yaml", []int32{3, 3, 3, 5}, func(t *testing.T, r *Result) {
			if c := findCond(r.Steps[1], "AbleToScale"); c == nil || c.Reason != "FailedUpdateScale" || !strings.Contains(c.Message, "promscaler-pause") {
				t.Errorf("step 1: want kube-controller-manager's scale-in denied by the pause policy, got %+v", c)
			}
		}},
		{"coexist-fallback-if-higher.yaml", []int32{3, 3, 3, 3, 3, 3, 3}, func(t *testing.T, r *Result) {
			if sc := r.Steps[3].Scaler; sc.Action != "FallbackApplied" || sc.Scale != nil {
				t.Errorf("step 3: want the fallback reported without a write (3 > 2), got %+v", sc)
			}
		}},
		{"preloaded-history.yaml", []int32{5, 4, 4, 4, 3, 2}, func(t *testing.T, r *Result) {
			if h := r.Steps[0].History; h == nil || len(h.Recommendations) != 3 || h.Recommendations[0].At != "-4m30s" {
				t.Errorf("step 0: want the two preloaded recommendations and the new one, got %+v", h)
			}
			if r.Steps[2].At != r.Steps[3].At {
				t.Errorf("steps 2 and 3 should share a time, got %s and %s", r.Steps[2].At, r.Steps[3].At)
			}
			if c := findCond(r.Steps[4], "ScalingLimited"); c == nil || c.Reason != "ScaleDownLimit" {
				t.Errorf("step 4: want the policy to limit the scale-down, got %+v", c)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			s, err := Load(filepath.Join(examplesDir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(s, Options{History: true})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.replicas, replicasOf(r)); diff != "" {
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
