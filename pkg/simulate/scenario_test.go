package simulate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const minimal = `
hpa:
  spec:
    scaleTargetRef: {kind: Deployment, name: web}
    maxReplicas: 5
    metrics:
      - type: Pods
        pods:
          metric: {name: qps}
          target: {type: AverageValue, averageValue: "10"}
target:
  replicas: 2
pods:
  - name: web-0
  - name: web-1
steps:
  - at: 0s
    metrics:
      qps: {allPods: "20"}
`

func TestParseMinimal(t *testing.T) {
	r := runScenario(t, minimal)
	st := r.Steps[0]
	if st.Replicas != 4 || r.HPA != "default/scenario" || !st.Time.Equal(DefaultStart) {
		t.Errorf("got replicas %d, hpa %q, time %v; want 4, default/scenario, %v", st.Replicas, r.HPA, st.Time, DefaultStart)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(string) string
		want []string
	}{
		{"empty", func(string) string { return "" }, []string{"empty scenario"}},
		{"not YAML", func(string) string { return "hpa: [" }, []string{"invalid YAML"}},
		{"duplicate key", func(s string) string { return s + "target:\n  replicas: 3\n" }, []string{"invalid YAML", "already defined"}},
		{"unknown field in HPA", func(s string) string { return strings.Replace(s, "maxReplicas: 5", "maxReplica: 5", 1) }, []string{"line 5: hpa.spec.maxReplica: unknown field"}},
		{"wrong letter case", func(s string) string { return strings.Replace(s, "maxReplicas: 5", "maxreplicas: 5", 1) }, []string{`line 5: hpa.spec.maxreplicas: unknown field (did you mean "maxReplicas"?)`}},
		{"unknown field in step", func(s string) string { return strings.Replace(s, "qps: {allPods", "qps: {allpods", 1) }, []string{`line 19: steps[0].metrics[qps].allpods: unknown field (did you mean "allPods"?)`}},
		{"wrong type", func(s string) string { return strings.Replace(s, "replicas: 2", "replicas: two", 1) }, []string{"line 12: target.replicas: cannot use string as int32"}},
		{"bad duration", func(s string) string { return strings.Replace(s, "at: 0s", "at: soon", 1) }, []string{`invalid duration "soon"`}},
		{"bad quantity", func(s string) string { return strings.Replace(s, `allPods: "20"`, `allPods: "2x0"`, 1) }, []string{"quantities must match"}},
		{"no steps", func(s string) string { return s[:strings.Index(s, "steps:")] }, []string{"steps: Required value: at least one step is required"}},
		{"steps out of order", func(s string) string { return s + "  - at: -1s\n" }, []string{`line 20: steps[1].at: Invalid value: "-1s": must not be earlier than steps[0].at (0s)`}},
		{"validation errors name the line", func(s string) string { return strings.Replace(s, "- name: web-1", "- name: web-0", 1) }, []string{`line 15: pods[1].name: Duplicate value: "web-0"`}},
		{"schedule errors name the line", func(s string) string {
			return s + "schedules:\n  - name: office\n    windows:\n      - {start: '8am', end: '18:00', replicas: 2}\n"
		}, []string{`line 23: schedules[0].windows[0].start: Invalid value: "8am": a local time of day HH:MM`}},
		{"unknown schedule key", func(s string) string {
			return s + "schedules:\n  - name: office\n    window: []\n"
		}, []string{"schedules: yaml: unmarshal errors", "field window not found"}},
		{"history after the first step, negative change", func(s string) string {
			return s + "history:\n  recommendations: [{at: 1m, replicas: 2}]\n  scaleUpEvents: [{at: -1m, change: 0}]\n"
		}, []string{`line 21: history.recommendations[0].at: Invalid value: "1m0s": must not be after the first step (0s)`, "line 22: history.scaleUpEvents[0].change: Invalid value: 0: must be at least 1"}},
		{"scaler history without annotations", func(s string) string { return s + "history:\n  scaler: {phase: Idle}\n" }, []string{
			"line 21: history.scaler.idleSince: Required value: with phase Idle", "line 21: history.scaler: Forbidden: the HPA carries no promscaler.io annotations"}},
		{"bad promscaler annotation", func(s string) string {
			return strings.Replace(s, "  spec:\n", "  metadata:\n    annotations:\n      promscaler.io/activation-metric: qps\n  spec:\n", 1)
		}, []string{`line 5: hpa.metadata.annotations[promscaler.io/activation-metric]: Invalid value: "qps": no External or Object metric named "qps"`}},
		{"activation key without an activation annotation", func(s string) string { return strings.Replace(s, "qps: {", "activation: {", 1) }, []string{`line 19: steps[0].metrics[activation]: Invalid value: "activation": the HPA has no valid promscaler.io/activation-metric annotation`}},
		{"unknown metric key", func(s string) string { return strings.Replace(s, "qps: {", "rps: {", 1) }, []string{`line 19: steps[0].metrics[rps]: Invalid value: "rps": no metric named "rps" in the HPA (known: qps)`}},
		{"value for a Pods metric", func(s string) string { return strings.Replace(s, `qps: {allPods: "20"}`, `qps: {value: "20"}`, 1) }, []string{"takes perPod, allPods and missing"}},
		{"index key out of range", func(s string) string { return strings.Replace(s, "qps: {", `"#3": {`, 1) }, []string{`no spec.metrics entry #3`}},
		{"pods and podTemplate", func(s string) string { return s + "podTemplate: {}\n" }, []string{"line 13: pods: Forbidden: give either pods or podTemplate, not both"}},
		{"duplicate pod", func(s string) string { return strings.Replace(s, "name: web-1", "name: web-0", 1) }, []string{`pods[1].name: Duplicate value: "web-0"`}},
		{"bad phase", func(s string) string {
			return strings.Replace(s, "- name: web-1", "- name: web-1\n    phase: Sleeping", 1)
		}, []string{`line 16: pods[1].phase: Unsupported value: "Sleeping": supported values: "Pending", "Running", "Succeeded", "Failed", "Unknown"`}},
		{"no target replicas", func(s string) string { return strings.Replace(s, "  replicas: 2\n", "  selector: app=web\n", 1) }, []string{"line 11: target.replicas: Required value"}},
		{"max below 1 and min above max, reported together", func(s string) string {
			return strings.Replace(s, "maxReplicas: 5", "maxReplicas: 0\n    minReplicas: 3", 1)
		}, []string{"line 5: hpa.spec.maxReplicas: Invalid value: 0: must be at least 1", "line 6: hpa.spec.minReplicas: Invalid value: 3: must not exceed maxReplicas (0)"}},
		{"minReplicas 0 without Object or External", func(s string) string {
			return strings.Replace(s, "maxReplicas: 5", "maxReplicas: 5\n    minReplicas: 0", 1)
		}, []string{"needs at least one Object or External metric"}},
		{"wrong target type", func(s string) string { return strings.Replace(s, "type: AverageValue", "type: Utilization", 1) }, []string{`line 10: hpa.spec.metrics[0].pods.target.type: Unsupported value: "Utilization": supported values: "AverageValue"`}},
		{"unknown metric type", func(s string) string { return strings.Replace(s, "type: Pods", "type: Prometheus", 1) }, []string{`line 7: hpa.spec.metrics[0].type: Unsupported value: "Prometheus": supported values: "Resource", "ContainerResource", "Pods", "Object", "External"`}},
		{"bad policy", func(s string) string {
			return strings.Replace(s, "maxReplicas: 5", "maxReplicas: 5\n    behavior:\n      scaleUp:\n        policies: [{type: Pods, value: 0, periodSeconds: 4000}]", 1)
		}, []string{"line 8: hpa.spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be positive", "line 8: hpa.spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 4000: must be between 1 and 1800"}},
		{"wrong apiVersion", func(s string) string { return strings.Replace(s, "hpa:\n", "hpa:\n  apiVersion: autoscaling/v1\n", 1) }, []string{`line 3: hpa.apiVersion: Unsupported value: "autoscaling/v1": supported values: "autoscaling/v2"`}},
		{"negative tolerance", func(s string) string { return s + "controller: {tolerance: -0.5}\n" }, []string{"line 20: controller.tolerance: Invalid value: -0.5: must be a non-negative number"}},
		{"generator too large", func(s string) string {
			return strings.Replace(strings.Replace(s, "pods:\n  - name: web-0\n  - name: web-1\n", "podTemplate: {}\n", 1), "maxReplicas: 5", "maxReplicas: 50000", 1)
		}, []string{"line 5: hpa.spec.maxReplicas: Invalid value: 50000: podTemplate generates at most 10000 pods"}},
		{"two keys for one metric", func(s string) string {
			return strings.Replace(s, `qps: {allPods: "20"}`, "qps: {allPods: \"20\"}\n      \"#0\": {allPods: \"30\"}", 1)
		}, []string{`line 19: steps[0].metrics[qps]: Invalid value: "qps": names the same metric as "#0"`}},
		{"age and timestamp", func(s string) string {
			return strings.Replace(s, `qps: {allPods: "20"}`, `qps: {allPods: "20", age: 1s, timestamp: 0s}`, 1)
		}, []string{"give age or timestamp, not both"}},
		{"non-string key", func(s string) string { return s + "podTemplate:\n  requests: {1: 2}\n" }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.edit(minimal)))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDurationForms(t *testing.T) {
	s, err := Parse([]byte(strings.Replace(minimal, "at: 0s", "at: 90", 1) + "start: 2026-03-01T10:00:00Z\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Steps[0].At.Duration != 90*time.Second || !s.Start.Equal(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("at = %v, start = %v", s.Steps[0].At, s.Start)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("steps: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("Load error = %v, want it prefixed with the path", err)
	}
	if err := os.WriteFile(path, []byte(minimal+"  - at: -1s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || err.Error() != path+`:20: steps[1].at: Invalid value: "-1s": must not be earlier than steps[0].at (0s)` {
		t.Errorf("Load error = %v, want FILE:LINE: field: message", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "reading scenario") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

// FuzzParse feeds arbitrary documents to the parser: it must return a
// scenario or an error, never panic, and a parsed scenario must replay.
func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	files, _ := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("hpa: {spec: {maxReplicas: 1}}\ntarget: {replicas: 1}\nsteps: [{at: 1}]\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte(minimal + "history:\n  recommendations: [{at: -1m, replicas: 4}]\n  scaleDownEvents: [{at: -10s, change: 1}]\n  - at: 0s\n"))
	f.Add([]byte(strings.Replace(minimal, "  spec:\n", "  metadata:\n    annotations:\n      promscaler.io/activation-metric: external:q{a=b}\n      promscaler.io/fallback-replicas: \"2\"\n  spec:\n", 1) +
		"  - at: 0s\n    metrics:\n      activation: {value: \"1\"}\nhistory:\n  scaler: {phase: Idle, idleSince: -1m}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		if len(s.Steps) > 50 || *s.Target.Replicas > 1000 || (s.PodTemplate != nil && s.PodTemplate.Count != nil && *s.PodTemplate.Count > 1000) || s.HPA.Spec.MaxReplicas > 1000 {
			return // valid but too big to replay quickly
		}
		if _, err := Run(s, Options{}); err != nil {
			t.Fatalf("Run of a parsed scenario failed: %v", err)
		}
	})
}

// TestParseKubectlOutput checks that an HPA as `kubectl get hpa -o yaml`
// prints it (metadata noise, managed fields, a full status) is accepted.
func TestParseKubectlOutput(t *testing.T) {
	doc := `
hpa:
  apiVersion: autoscaling/v2
  kind: HorizontalPodAutoscaler
  metadata:
    annotations:
      kubectl.kubernetes.io/last-applied-configuration: |
        {"apiVersion":"autoscaling/v2"}
    creationTimestamp: "2026-01-01T00:00:00Z"
    generation: 4
    managedFields:
    - apiVersion: autoscaling/v2
      fieldsType: FieldsV1
      fieldsV1:
        f:spec:
          f:maxReplicas: {}
      manager: kubectl-client-side-apply
      operation: Update
      time: "2026-01-01T00:00:00Z"
    name: web
    namespace: shop
    resourceVersion: "1234"
    uid: 6f1b9c6e-0000-4000-8000-000000000000
  spec:
    maxReplicas: 10
    metrics:
    - resource:
        name: cpu
        target:
          averageUtilization: 50
          type: Utilization
      type: Resource
    minReplicas: 1
    scaleTargetRef:
      apiVersion: apps/v1
      kind: Deployment
      name: web
  status:
    conditions:
    - lastTransitionTime: "2026-01-01T00:00:00Z"
      message: recommended size matches current size
      reason: ReadyForNewScale
      status: "True"
      type: AbleToScale
    currentMetrics:
    - resource:
        current:
          averageUtilization: 40
          averageValue: 200m
        name: cpu
      type: Resource
    currentReplicas: 2
    desiredReplicas: 2
    observedGeneration: 4
target: {replicas: 2}
podTemplate: {containers: [{name: app, requests: {cpu: 500m}}]}
steps:
  - {at: 0s, metrics: {cpu: {allPods: 200m}}}
`
	r := runScenario(t, doc)
	if r.HPA != "shop/web" || r.Steps[0].Replicas != 2 || r.Steps[0].Conditions[0].Reason != "ReadyForNewScale" {
		t.Errorf("result %+v", r.Steps[0])
	}
}

func TestUnknownAnnotationRefused(t *testing.T) {
	_, err := Parse([]byte(`hpa:
  apiVersion: autoscaling/v2
  kind: HorizontalPodAutoscaler
  metadata:
    name: worker
    annotations: {promscaler.io/idle-perod: 10m}
  spec:
    scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
    maxReplicas: 10
target: {replicas: 1}
steps: [{at: 0s}]
`))
	if err == nil || !strings.Contains(err.Error(), "did you mean promscaler.io/idle-period?") {
		t.Fatalf("err = %v, want the unknown annotation with a suggestion", err)
	}
}

// TestActivationAtMinReplicasZeroRefused: with minReplicas 0,
// kube-controller-manager owns scale to zero; a scenario asking promscaler
// for it is refused with the annotation's message, as the controller's
// status would say.
func TestActivationAtMinReplicasZeroRefused(t *testing.T) {
	_, err := Parse([]byte(`hpa:
  metadata:
    name: worker
    annotations: {promscaler.io/activation-metric: queue}
  spec:
    scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: worker}
    minReplicas: 0
    maxReplicas: 10
    metrics:
      - type: External
        external:
          metric: {name: queue}
          target: {type: AverageValue, averageValue: "10"}
target: {replicas: 1}
steps: [{at: 0s, metrics: {queue: {value: "5"}}}]
`))
	if err == nil || !strings.Contains(err.Error(), `line 4: hpa.metadata.annotations[promscaler.io/activation-metric]: Invalid value: "queue": the HPA's minReplicas is 0: kube-controller-manager (HPAScaleToZero) scales it to zero`) {
		t.Fatalf("err = %v, want the activation annotation refused at minReplicas 0", err)
	}
}
