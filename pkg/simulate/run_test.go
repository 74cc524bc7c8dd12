package simulate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const cpuScenario = `
hpa:
  metadata: {name: api, namespace: prod}
  spec:
    scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: api}
    minReplicas: 1
    maxReplicas: 6
    metrics:
      - type: Resource
        resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
controller:
  downscaleStabilization: 0s
  cpuInitializationPeriod: 5m
target: {replicas: 2}
podTemplate:
  containers: [{name: app, requests: {cpu: "1"}}]
  newPods: {readyAfter: 20s}
`

// runScenario parses and runs doc, with opts[0] if given.
func runScenario(t *testing.T, doc string, opts ...Options) *Result {
	t.Helper()
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(s, append(opts, Options{})[0])
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// replicasOf lists the target's replicas after each step.
func replicasOf(r *Result) []int32 {
	var got []int32
	for _, st := range r.Steps {
		got = append(got, st.Replicas)
	}
	return got
}

func TestRunSemantics(t *testing.T) {
	t.Run("new CPU pods are unready until ready and a full window later", func(t *testing.T) {
		r := runScenario(t, cpuScenario+`steps:
  - {at: 0s, metrics: {cpu: {allPods: 900m}}}
  - {at: 30s}
  - {at: 90s}
`)
		// 0s: 2 pods at 90% -> 4. 30s: 2 new pods ready since 20s, samples
		// cover 1m: unready, filled in at 0 -> (1.8)/4 = 45% -> hold at 4.
		// 90s: every pod counts at 90% -> 8, limited to max 6.
		var got []int32
		for _, s := range r.Steps {
			got = append(got, s.Replicas)
		}
		if diff := cmp.Diff([]int32{4, 4, 6}, got); diff != "" {
			t.Errorf("replicas (-want +got):\n%s", diff)
		}
		if p := r.Steps[1].Metrics[0].Pods; p == nil || len(p.Unready) != 2 || r.Steps[1].Pods.Ready != 4 {
			t.Errorf("step 1 grouping %+v, pods %+v: want 2 unready of 4 ready pods", p, r.Steps[1].Pods)
		}
	})
	t.Run("a sample timestamp decides CPU readiness the same as its age", func(t *testing.T) {
		// at 90s the new pods (ready since 20s after their creation at 0s)
		// have samples taken at 50s: less than a window after readiness
		r := runScenario(t, cpuScenario+`steps:
  - {at: 0s, metrics: {cpu: {allPods: 900m}}}
  - {at: 90s, metrics: {cpu: {allPods: 900m, timestamp: 50s}}}
`)
		r2 := runScenario(t, cpuScenario+`steps:
  - {at: 0s, metrics: {cpu: {allPods: 900m}}}
  - {at: 90s, metrics: {cpu: {allPods: 900m, age: 40s}}}
`)
		p, p2 := r.Steps[1].Metrics[0].Pods, r2.Steps[1].Metrics[0].Pods
		if p == nil || len(p.Unready) != 2 || cmp.Diff(p, p2) != "" {
			t.Errorf("grouping with timestamp %+v, with age %+v; want 2 unready in both", p, p2)
		}
	})
	t.Run("generated pods follow a scale-down, newest first", func(t *testing.T) {
		r := runScenario(t, strings.Replace(cpuScenario, "replicas: 2", "replicas: 4", 1)+`steps:
  - {at: 0s, metrics: {cpu: {allPods: 100m}}}
  - {at: 15s}
`)
		if r.Steps[0].Replicas != 1 || r.Steps[1].Pods.Total != 1 {
			t.Errorf("replicas %d, pods at next step %d: want 1 and 1", r.Steps[0].Replicas, r.Steps[1].Pods.Total)
		}
	})
	t.Run("a failed /scale update keeps the replicas", func(t *testing.T) {
		r := runScenario(t, cpuScenario+`steps:
  - {at: 0s, metrics: {cpu: {allPods: 900m}}, scaleError: "conflict"}
`)
		s := r.Steps[0]
		if s.Rescaled || s.Replicas != 2 || s.Conditions[0].Reason != "FailedUpdateScale" || s.Events[0].Reason != "FailedRescale" ||
			s.Error != "failed to rescale Deployment/prod/api: conflict" {
			t.Errorf("step = %+v", s)
		}
	})
	t.Run("an outside change above maxReplicas is brought back", func(t *testing.T) {
		r := runScenario(t, cpuScenario+`steps:
  - {at: 0s, replicas: 9, metrics: {cpu: {allPods: 500m}}}
`)
		s := r.Steps[0]
		if s.CurrentReplicas != 9 || s.Replicas != 6 || s.Reason != "Current number of replicas above Spec.MaxReplicas" || s.Metrics != nil || s.ProposedReplicas != nil {
			t.Errorf("step = %+v", s)
		}
	})
	t.Run("explicit pods, deletion, missing samples, extraneous samples", func(t *testing.T) {
		r := runScenario(t, `
hpa:
  spec:
    scaleTargetRef: {kind: Deployment, name: web}
    maxReplicas: 10
    metrics: [{type: Pods, pods: {metric: {name: qps}, target: {type: AverageValue, averageValue: "10"}}}]
target: {replicas: 3}
pods:
  - {name: a}
  - {name: b}
  - {name: c, deletedAt: -5s}
steps:
  - at: 0s
    metrics: {qps: {perPod: {a: "5", c: "50", old: "5"}, missing: [b]}}
`)
		m := r.Steps[0].Metrics[0]
		// a and the extraneous "old" sample: average 5 -> ratio 0.5, b is
		// missing and counted at the target on a scale-down: (5+5+10)/3 = 6.666
		// (integer milli-units) -> ratio 0.6666 -> ceil(1.9998) = 2.
		if m.Pods == nil || m.Pods.Ready != 1 || len(m.Pods.Missing) != 1 || len(m.Pods.Ignored) != 1 || *m.UsageRatio != 0.5 || *m.AdjustedUsageRatio != 0.6666 || *m.ProposedReplicas != 2 {
			t.Errorf("metric = %+v, pods %+v", m, m.Pods)
		}
		if r.Steps[0].StatusReplicas != 2 {
			t.Errorf("status replicas = %d, want 2 (the deleting pod is not counted)", r.Steps[0].StatusReplicas)
		}
	})
	t.Run("metric API error", func(t *testing.T) {
		r := runScenario(t, cpuScenario+`steps:
  - {at: 0s, metrics: {cpu: {error: "metrics-server unavailable"}}}
`)
		s := r.Steps[0]
		want := "failed to get cpu resource metric value: failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: metrics-server unavailable"
		if s.Metrics[0].Error != want || s.Conditions[1].Reason != "FailedGetResourceMetric" {
			t.Errorf("metric error %q, conditions %+v", s.Metrics[0].Error, s.Conditions)
		}
	})
}

// scaleDown is minimal with load that asks for 1 replica (2 wanted by
// default: qps 5 over a target of 10 on 2 pods).
var scaleDown = strings.Replace(minimal, `allPods: "20"`, `allPods: "5"`, 1)

func TestRunHistory(t *testing.T) {
	cases := []struct {
		name     string
		scenario string
		want     []int32
		firstRec []HistoryRecommendation
	}{
		{name: "without history the first reconcile records the current count, which holds the scale-down",
			scenario: scaleDown + "  - at: 0s\n", want: []int32{2, 2},
			firstRec: []HistoryRecommendation{{At: "-1ns", Replicas: 2}, {At: "0s", Replicas: 1}}},
		{name: "an empty history is not a first reconcile: the scale-down happens at once",
			scenario: scaleDown + "history: {}\n", want: []int32{1},
			firstRec: []HistoryRecommendation{{At: "0s", Replicas: 1}}},
		{name: "a preloaded recommendation within the window holds it",
			scenario: scaleDown + "  - at: 4m\nhistory:\n  recommendations: [{at: -2m, replicas: 2}]\n", want: []int32{2, 1},
			firstRec: []HistoryRecommendation{{At: "-2m0s", Replicas: 2}, {At: "0s", Replicas: 1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runScenario(t, tc.scenario, Options{History: true})
			if diff := cmp.Diff(tc.want, replicasOf(r)); diff != "" {
				t.Errorf("replicas (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.firstRec, r.Steps[0].History.Recommendations); diff != "" {
				t.Errorf("recommendations after the first step (-want +got):\n%s", diff)
			}
			if r2 := runScenario(t, tc.scenario); r2.Steps[0].History != nil {
				t.Error("history reported without Options.History")
			}
		})
	}
}

func TestRunExplicitActivationMetric(t *testing.T) {
	scenario := strings.Replace(minimal, "  spec:\n", "  metadata:\n    annotations:\n      promscaler.io/activation-metric: external:jobs{queue=a}\n      promscaler.io/activation-threshold: \"3\"\n  spec:\n", 1)
	scenario = strings.Replace(scenario, "  replicas: 2\n", "  replicas: 0\n", 1)
	scenario = strings.Replace(scenario, "pods:\n  - name: web-0\n  - name: web-1\n", "", 1)
	scenario += "      activation: {value: \"2\"}\n  - at: 15s\n    metrics:\n      jobs: {value: \"4\"}\nhistory:\n  scaler: {phase: ScaledToZero}\n"
	r := runScenario(t, scenario)
	if sc := r.Steps[0].Scaler; sc.Phase != "ScaledToZero" || sc.Scale != nil || !strings.Contains(sc.Reason, "jobs{queue=a} is 2, at or below the threshold 3") {
		t.Errorf("step 0: want the target kept at zero, got %+v", sc)
	}
	if sc := r.Steps[1].Scaler; sc.Action != "Activated" || r.Steps[1].Replicas != 1 {
		t.Errorf("step 1: want activation to minReplicas by the explicit metric (named by its name), got %+v, replicas %d", sc, r.Steps[1].Replicas)
	}
}
