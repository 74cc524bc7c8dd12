package autoscaler

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cases below are upstream's replica_calculator_test.go tables
// (Kubernetes 1.37), re-expressed over the core's pure functions with the
// same fixture semantics: every pod has two containers with the same
// request, per-container samples summed per pod, samples timestamped at
// the zero time with a one-minute window, and the testing durations
// upstream uses (CPU initialization 2m, readiness delay 10s, tolerance 0.1).

const (
	testTolerance      = 0.1
	testCPUInit        = 2 * time.Minute
	testReadinessDelay = 10 * time.Second
)

var testNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func hotStart() metav1.Time  { return metav1.NewTime(testNow) }
func coolStart() metav1.Time { return metav1.NewTime(testNow.Add(-3 * time.Minute)) }

// fixture is upstream's calcScenario.
type fixture struct {
	currentReplicas int32
	requests        []string  // per pod, per container
	levels          [][]int64 // per pod, per container; summed
	podNames        []string  // sample names overriding test-pod-i
	container       string
	readiness       []v1.ConditionStatus
	startTime       []metav1.Time
	phase           []v1.PodPhase
	deleting        []bool
	metricLevels    []int64 // custom/external per-pod or series values
}

func levels(perContainer ...int64) [][]int64 {
	out := make([][]int64, len(perContainer))
	for i, v := range perContainer {
		out[i] = []int64{v, v}
	}
	return out
}

func cpuReqs(n int, v string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func (f *fixture) pods() []*v1.Pod {
	n := int(f.currentReplicas)
	if len(f.phase) > n {
		n = len(f.phase)
	}
	pods := make([]*v1.Pod, 0, n)
	for i := 0; i < n; i++ {
		ready := v1.ConditionTrue
		if i < len(f.readiness) {
			ready = f.readiness[i]
		}
		var start metav1.Time
		if f.startTime != nil {
			start = f.startTime[i]
		}
		phase := v1.PodRunning
		if f.phase != nil {
			phase = f.phase[i]
		}
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("test-pod-%d", i), Namespace: "test-namespace"},
			Status: v1.PodStatus{
				Phase:      phase,
				StartTime:  &start,
				Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: ready}},
			},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "container1"}, {Name: "container2"}}},
		}
		if f.deleting != nil && f.deleting[i] {
			pod.DeletionTimestamp = &metav1.Time{Time: testNow}
		}
		if i < len(f.requests) {
			req := v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(f.requests[i])}}
			pod.Spec.Containers[0].Resources = req
			pod.Spec.Containers[1].Resources = req
		}
		pods = append(pods, pod)
	}
	return pods
}

// resourceSamples builds the samples as the metrics client would: summed
// per pod, or the named container's.
func (f *fixture) resourceSamples() map[string]PodMetric {
	out := map[string]PodMetric{}
	for i, lv := range f.levels {
		name := fmt.Sprintf("test-pod-%d", i)
		if i < len(f.podNames) {
			name = f.podNames[i]
		}
		var v int64
		found := f.container == ""
		for j, c := range lv {
			if f.container == "" {
				v += c
			} else if f.container == fmt.Sprintf("container%d", j+1) {
				v, found = c, true
			}
		}
		if found {
			out[name] = PodMetric{Value: v, Window: time.Minute}
		}
	}
	return out
}

func (f *fixture) customSamples() map[string]PodMetric {
	out := map[string]PodMetric{}
	for i, v := range f.metricLevels {
		out[fmt.Sprintf("test-pod-%d", i)] = PodMetric{Value: v, Window: time.Minute}
	}
	return out
}

func (f *fixture) env(t *Tolerances) *calcEnv {
	tol := Tolerances{testTolerance, testTolerance}
	if t != nil {
		tol = *t
	}
	return &calcEnv{now: testNow, cpuInit: testCPUInit, readinessDelay: testReadinessDelay, tolerances: tol, pods: f.pods(), podLevel: true}
}

type resourceCase struct {
	name        string
	f           fixture
	target      int32
	tolerances  *Tolerances
	replicas    int32
	utilization int32
	raw         int64
	err         string
}

// errorCase checks err against want (a substring; "" wants no error) and
// reports whether the case ends there.
func errorCase(t *testing.T, err error, want string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want one containing %q", err, want)
	}
	return true
}

func runResourceCases(t *testing.T, cases []resourceCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.f.env(tc.tolerances).resourceUtilizationReplicas(tc.f.currentReplicas, tc.target, v1.ResourceCPU, tc.f.container, tc.f.resourceSamples())
			if errorCase(t, err, tc.err) {
				return
			}
			got := [3]int64{int64(r.replicas), int64(r.utilization), r.raw()}
			want := [3]int64{int64(tc.replicas), int64(tc.utilization), tc.raw}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("[replicas utilization raw] mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func (r calcResult) raw() int64 { return r.usage }

func TestResourceReplicas(t *testing.T) {
	f, tr := v1.ConditionFalse, v1.ConditionTrue
	run, pend, failed := v1.PodRunning, v1.PodPending, v1.PodFailed
	runResourceCases(t, []resourceCase{
		{name: "scale up", f: fixture{currentReplicas: 3, requests: cpuReqs(3, "1.0"), levels: levels(300, 500, 700)}, target: 30, replicas: 5, utilization: 50, raw: 1000},
		{name: "scale up: container metric", f: fixture{currentReplicas: 3, container: "container2", requests: cpuReqs(3, "1.0"), levels: [][]int64{{1000, 300}, {1000, 500}, {1000, 700}}}, target: 30, replicas: 5, utilization: 50, raw: 500},
		{name: "scale up: unready pod scales less", f: fixture{currentReplicas: 3, readiness: []v1.ConditionStatus{f, tr, tr}, requests: cpuReqs(3, "1.0"), levels: levels(300, 500, 700)}, target: 30, replicas: 4, utilization: 60, raw: 1200},
		{name: "scale up: hot-CPU container scales less", f: fixture{currentReplicas: 3, startTime: []metav1.Time{hotStart(), coolStart(), coolStart()}, container: "container2", requests: cpuReqs(3, "1.0"), levels: [][]int64{{0, 300}, {0, 500}, {0, 700}}}, target: 30, replicas: 4, utilization: 60, raw: 600},
		{name: "scale up: hot-CPU pod scales less", f: fixture{currentReplicas: 3, startTime: []metav1.Time{hotStart(), coolStart(), coolStart()}, requests: cpuReqs(3, "1.0"), levels: levels(300, 500, 700)}, target: 30, replicas: 4, utilization: 60, raw: 1200},
		{name: "no scale: unready pods ignored", f: fixture{currentReplicas: 3, readiness: []v1.ConditionStatus{tr, f, f}, requests: cpuReqs(3, "1.0"), levels: levels(400, 500, 700)}, target: 30, replicas: 3, utilization: 40, raw: 800},
		{name: "no scale: hot-CPU pods ignored", f: fixture{currentReplicas: 3, readiness: []v1.ConditionStatus{tr, f, f}, startTime: []metav1.Time{coolStart(), hotStart(), hotStart()}, requests: cpuReqs(3, "1.0"), levels: levels(400, 500, 700)}, target: 30, replicas: 3, utilization: 40, raw: 800},
		{name: "scale up: failed pods ignored", f: fixture{currentReplicas: 2, readiness: []v1.ConditionStatus{tr, tr, f, f}, phase: []v1.PodPhase{run, run, failed, failed}, requests: cpuReqs(4, "1.0"), levels: levels(500, 700)}, target: 30, replicas: 4, utilization: 60, raw: 1200},
		{name: "scale up: failed pods ignored with missing container metric", f: fixture{currentReplicas: 2, readiness: []v1.ConditionStatus{tr, tr, f, f}, phase: []v1.PodPhase{run, run, failed, failed}, container: "container2", requests: cpuReqs(4, "1.0"), levels: [][]int64{{1000, 500}, {9000, 700}, {1000}, {9000}}}, target: 30, replicas: 4, utilization: 60, raw: 600},
		{name: "scale up: container metrics with failed pods ignored", f: fixture{currentReplicas: 2, readiness: []v1.ConditionStatus{tr, tr, f, f}, phase: []v1.PodPhase{run, run, failed, failed}, container: "container2", requests: cpuReqs(4, "1.0"), levels: [][]int64{{1000, 500}, {9000, 700}}}, target: 30, replicas: 4, utilization: 60, raw: 600},
		{name: "scale up: pods being deleted are ignored", f: fixture{currentReplicas: 2, readiness: []v1.ConditionStatus{tr, tr, f, f}, phase: []v1.PodPhase{run, run, run, run}, deleting: []bool{false, false, true, true}, requests: cpuReqs(4, "1.0"), levels: levels(500, 700)}, target: 30, replicas: 4, utilization: 60, raw: 1200},
		{name: "scale up: container metrics with pods being deleted ignored", f: fixture{currentReplicas: 2, readiness: []v1.ConditionStatus{tr, tr, f, f}, phase: []v1.PodPhase{run, run, run, run}, deleting: []bool{false, false, true, true}, container: "container1", requests: cpuReqs(4, "1.0"), levels: levels(500, 700)}, target: 30, replicas: 4, utilization: 60, raw: 600},
		{name: "scale down", f: fixture{currentReplicas: 5, requests: cpuReqs(5, "1.0"), levels: levels(100, 300, 500, 250, 250)}, target: 50, replicas: 3, utilization: 28, raw: 560},
		{name: "scale down: container metric", f: fixture{currentReplicas: 5, container: "container2", requests: cpuReqs(5, "1.0"), levels: [][]int64{{1000, 100}, {1000, 300}, {1000, 500}, {1000, 250}, {1000, 250}}}, target: 50, replicas: 3, utilization: 28, raw: 280},
		{name: "scale down: exclude unready pods", f: fixture{currentReplicas: 5, readiness: []v1.ConditionStatus{tr, tr, tr, f, f}, requests: cpuReqs(5, "1.0"), levels: levels(100, 300, 500, 250, 250)}, target: 50, replicas: 2, utilization: 30, raw: 600},
		{name: "scale down: container metric excludes unready pods", f: fixture{currentReplicas: 5, readiness: []v1.ConditionStatus{tr, tr, tr, f, f}, container: "container2", requests: cpuReqs(5, "1.0"), levels: [][]int64{{1000, 100}, {1000, 300}, {1000, 500}, {1000, 250}, {1000, 250}}}, target: 50, replicas: 2, utilization: 30, raw: 300},
		{name: "scale down: exclude unscheduled pods", f: fixture{currentReplicas: 5, readiness: []v1.ConditionStatus{tr, f, f, f, f}, phase: []v1.PodPhase{run, pend, pend, pend, pend}, requests: cpuReqs(5, "1.0"), levels: levels(100)}, target: 50, replicas: 1, utilization: 10, raw: 200},
		{name: "scale down: container metric excludes unscheduled pods", f: fixture{currentReplicas: 5, readiness: []v1.ConditionStatus{tr, f, f, f, f}, phase: []v1.PodPhase{run, pend, pend, pend, pend}, container: "container2", requests: cpuReqs(5, "1.0"), levels: [][]int64{{1000, 100}, {1000, 300}, {1000, 500}, {1000, 250}, {1000, 250}}}, target: 50, replicas: 1, utilization: 10, raw: 100},
		{name: "scale down: ignore hot-CPU pods", f: fixture{currentReplicas: 5, startTime: []metav1.Time{coolStart(), coolStart(), coolStart(), hotStart(), hotStart()}, requests: cpuReqs(5, "1.0"), levels: levels(100, 300, 500, 250, 250)}, target: 50, replicas: 2, utilization: 30, raw: 600},
		{name: "scale down: container metric ignores hot-CPU pods", f: fixture{currentReplicas: 5, startTime: []metav1.Time{coolStart(), coolStart(), coolStart(), hotStart(), hotStart()}, container: "container2", requests: cpuReqs(5, "1.0"), levels: [][]int64{{1000, 100}, {1000, 300}, {1000, 500}, {1000, 1000}, {1000, 1000}}}, target: 50, replicas: 2, utilization: 30, raw: 300},
		{name: "scale down: failed pods ignored", f: fixture{currentReplicas: 5, readiness: []v1.ConditionStatus{tr, tr, tr, tr, tr, f, f}, phase: []v1.PodPhase{run, run, run, run, run, failed, failed}, requests: cpuReqs(7, "1.0"), levels: levels(100, 300, 500, 250, 250)}, target: 50, replicas: 3, utilization: 28, raw: 560},
		{name: "scale down: container metric with failed pods ignored", f: fixture{currentReplicas: 5, readiness: []v1.ConditionStatus{tr, tr, tr, tr, tr, f, f}, phase: []v1.PodPhase{run, run, run, run, run, failed, failed}, container: "container2", requests: cpuReqs(7, "1.0"), levels: [][]int64{{1000, 100}, {1000, 300}, {1000, 500}, {1000, 250}, {1000, 250}}}, target: 50, replicas: 3, utilization: 28, raw: 280},
		{name: "scale down: pods being deleted are ignored", f: fixture{currentReplicas: 5, readiness: []v1.ConditionStatus{tr, tr, tr, tr, tr, f, f}, phase: []v1.PodPhase{run, run, run, run, run, run, run}, deleting: []bool{false, false, false, false, false, true, true}, requests: cpuReqs(7, "1.0"), levels: levels(100, 300, 500, 250, 250)}, target: 50, replicas: 3, utilization: 28, raw: 560},
		{name: "scale down: still-running pods being deleted are ignored", f: fixture{currentReplicas: 5, readiness: []v1.ConditionStatus{tr, tr, tr, tr, tr, f, f}, phase: []v1.PodPhase{run, run, run, run, run, run, run}, deleting: []bool{false, false, false, false, false, true, true}, container: "container2", requests: cpuReqs(7, "1.0"), levels: [][]int64{{1000, 100}, {1000, 300}, {1000, 500}, {1000, 250}, {1000, 250}}}, target: 50, replicas: 3, utilization: 28, raw: 280},
	})
}

func TestResourceReplicasTolerance(t *testing.T) {
	mixed := []string{"0.9", "1.0", "1.1"}
	runResourceCases(t, []resourceCase{
		{name: "within default tolerance", f: fixture{currentReplicas: 3, requests: mixed, levels: levels(1010, 1030, 1020)}, target: 100, replicas: 3, utilization: 102, raw: 2040},
		{name: "outside 0% tolerance", tolerances: &Tolerances{0, 0}, f: fixture{currentReplicas: 3, requests: mixed, levels: levels(909, 1010, 1111)}, target: 100, replicas: 4, utilization: 101, raw: 2020},
		{name: "within 200% scale-up tolerance", tolerances: &Tolerances{testTolerance, 2}, f: fixture{currentReplicas: 3, requests: mixed, levels: levels(1890, 1910, 1900)}, target: 100, replicas: 3, utilization: 190, raw: 3800},
		{name: "outside 8% scale-up tolerance (superfluous scale-down tolerance)", tolerances: &Tolerances{2, .08}, f: fixture{currentReplicas: 3, requests: mixed, levels: levels(1100, 1080, 1090)}, target: 100, replicas: 4, utilization: 109, raw: 2180},
		{name: "within 36% scale-down tolerance", tolerances: &Tolerances{.36, testTolerance}, f: fixture{currentReplicas: 3, requests: mixed, levels: levels(660, 640, 650)}, target: 100, replicas: 3, utilization: 65, raw: 1300},
		{name: "outside 34% scale-down tolerance", tolerances: &Tolerances{.34, testTolerance}, f: fixture{currentReplicas: 3, requests: mixed, levels: levels(660, 640, 650)}, target: 100, replicas: 2, utilization: 65, raw: 1300},
	})
}

func TestResourceReplicasMissingMetrics(t *testing.T) {
	f, tr := v1.ConditionFalse, v1.ConditionTrue
	run := v1.PodRunning
	runResourceCases(t, []resourceCase{
		{name: "superfluous metrics counted", f: fixture{currentReplicas: 4, requests: cpuReqs(4, "1.0"), levels: levels(4000, 9500, 3000, 7000, 3200, 2000)}, target: 100, replicas: 24, utilization: 587, raw: 11750},
		{name: "some pods missing metrics scales down", f: fixture{currentReplicas: 4, requests: cpuReqs(4, "1.0"), levels: levels(400, 95)}, target: 100, replicas: 3, utilization: 24, raw: 495},
		{name: "no change: metric equal to target", f: fixture{currentReplicas: 2, requests: cpuReqs(2, "1.0"), levels: levels(1000)}, target: 100, replicas: 2, utilization: 100, raw: 2000},
		{name: "no change: metric above target", f: fixture{currentReplicas: 2, requests: cpuReqs(2, "1.0"), levels: levels(1900)}, target: 100, replicas: 2, utilization: 190, raw: 3800},
		{name: "no change: metric below target", f: fixture{currentReplicas: 2, requests: cpuReqs(2, "1.0"), levels: levels(600)}, target: 100, replicas: 2, utilization: 60, raw: 1200},
		{name: "no change: unready pod metric missing", f: fixture{currentReplicas: 3, readiness: []v1.ConditionStatus{f, tr, tr}, requests: cpuReqs(3, "1.0"), levels: levels(100, 450)}, target: 50, replicas: 3, utilization: 45, raw: 900},
		{name: "no change: hot-CPU pod metric missing", f: fixture{currentReplicas: 3, startTime: []metav1.Time{hotStart(), coolStart(), coolStart()}, requests: cpuReqs(3, "1.0"), levels: levels(100, 450)}, target: 50, replicas: 3, utilization: 45, raw: 900},
		{name: "scale up: unready pod metric missing", f: fixture{currentReplicas: 3, readiness: []v1.ConditionStatus{f, tr, tr}, requests: cpuReqs(3, "1.0"), levels: levels(100, 2000)}, target: 50, replicas: 4, utilization: 200, raw: 4000},
		{name: "scale up: hot-CPU pod metric missing", f: fixture{currentReplicas: 3, readiness: []v1.ConditionStatus{f, tr, tr}, startTime: []metav1.Time{hotStart(), coolStart(), coolStart()}, requests: cpuReqs(3, "1.0"), levels: levels(100, 2000)}, target: 50, replicas: 4, utilization: 200, raw: 4000},
		{name: "scale down: unready pod metric missing", f: fixture{currentReplicas: 4, readiness: []v1.ConditionStatus{f, tr, tr, tr}, requests: cpuReqs(4, "1.0"), levels: levels(100, 100, 100)}, target: 50, replicas: 3, utilization: 10, raw: 200},
		{name: "scale down: target over 100", f: fixture{currentReplicas: 4, readiness: []v1.ConditionStatus{f, tr, tr, tr}, requests: []string{"1.0", "1.0", "2.0", "2.0"}, levels: levels(200, 100, 100)}, target: 300, replicas: 2, utilization: 6, raw: 200},
		{name: "rolling update with maxSurge: extra pod missing metric", f: fixture{currentReplicas: 2, phase: []v1.PodPhase{run, run, run}, requests: cpuReqs(3, "1.0"), levels: levels(100, 100)}, target: 50, replicas: 2, utilization: 10, raw: 200},
		{name: "disjoint pod and metric names", f: fixture{currentReplicas: 1, requests: cpuReqs(1, "1.0"), levels: levels(100), podNames: []string{"an-older-pod-name"}}, target: 100, err: "no metrics returned matched known pods"},
		{name: "missing CPU request on container", f: fixture{currentReplicas: 1, levels: levels(200)}, target: 100, err: "missing request for"},
		{name: "no pods", f: fixture{currentReplicas: 0, levels: levels(200)}, target: 100, err: "no pods returned by selector while calculating replica count"},
		{name: "every pod unready", f: fixture{currentReplicas: 2, readiness: []v1.ConditionStatus{f, f}, requests: cpuReqs(2, "1.0"), levels: levels(200, 200)}, target: 100, err: "did not receive metrics for targeted pods (pods might be unready)"},
	})
}

// TestResourceReplicasComputedTolerance is upstream's
// TestReplicaCalcComputedToleranceAlgImplementation: a target just outside
// and just inside the tolerance of the measured ratio.
func TestResourceReplicasComputedTolerance(t *testing.T) {
	startPods := int32(10)
	used := int64(startPods * 150)
	requested := int32(2 * used)
	requestedToUsed := float64(requested / int32(used))
	perPod := requested / startPods
	build := func() fixture {
		reqs := []string{}
		for _, d := range []int32{100, -100, 10, -10, 2, -2, 1, -1, 0, 0} {
			reqs = append(reqs, fmt.Sprintf("%dm", perPod+d))
		}
		var lv []int64
		for range 10 {
			lv = append(lv, used/10)
		}
		return fixture{currentReplicas: startPods, requests: reqs, levels: levels(lv...)}
	}
	wantUtil := int32(used*100) / requested
	wantRaw := 2 * used / 10

	target := math.Abs(1/(requestedToUsed*(1-testTolerance))) + .01
	ratio := float64(used) / (float64(requested) * target)
	runResourceCases(t, []resourceCase{
		{name: "just outside tolerance", f: build(), target: int32(target * 100), replicas: int32(math.Ceil(ratio * float64(startPods))), utilization: wantUtil, raw: wantRaw},
		{name: "just inside tolerance", f: build(), target: int32((math.Abs(1/(requestedToUsed*(1-testTolerance))) + .004) * 100), replicas: startPods, utilization: wantUtil, raw: wantRaw},
	})
}

type metricCase struct {
	name       string
	f          fixture
	target     int64
	tolerances *Tolerances
	replicas   int32
	usage      int64
	err        string
}

func checkMetric(t *testing.T, tc metricCase, replicas int32, usage int64, err error) {
	t.Helper()
	if errorCase(t, err, tc.err) {
		return
	}
	if diff := cmp.Diff([2]int64{int64(tc.replicas), tc.usage}, [2]int64{int64(replicas), usage}); diff != "" {
		t.Errorf("[replicas usage] mismatch (-want +got):\n%s", diff)
	}
}

func TestPodsMetricReplicas(t *testing.T) {
	f, tr := v1.ConditionFalse, v1.ConditionTrue
	run, pend := v1.PodRunning, v1.PodPending
	cases := []metricCase{
		{name: "scale up", f: fixture{currentReplicas: 3, metricLevels: []int64{20000, 10000, 30000}}, target: 15000, replicas: 4, usage: 20000},
		{name: "scale up: unready hot-CPU pod scales less", f: fixture{currentReplicas: 3, readiness: []v1.ConditionStatus{tr, tr, f}, startTime: []metav1.Time{coolStart(), coolStart(), hotStart()}, metricLevels: []int64{50000, 10000, 30000}}, target: 15000, replicas: 6, usage: 30000},
		{name: "scale up: unready hot-CPU pods avoid scale-down", f: fixture{currentReplicas: 3, readiness: []v1.ConditionStatus{f, tr, f}, startTime: []metav1.Time{hotStart(), coolStart(), hotStart()}, metricLevels: []int64{50000, 15000, 30000}}, target: 15000, replicas: 7, usage: 31666},
		{name: "scale down", f: fixture{currentReplicas: 5, metricLevels: []int64{12000, 12000, 12000, 12000, 12000}}, target: 20000, replicas: 3, usage: 12000},
		{name: "within default tolerance", f: fixture{currentReplicas: 3, metricLevels: []int64{20000, 21000, 21000}}, target: 20000, replicas: 3, usage: 20666},
		{name: "outside configurable 1% tolerance", tolerances: &Tolerances{testTolerance, .01}, f: fixture{currentReplicas: 3, metricLevels: []int64{20000, 21000, 21000}}, target: 20000, replicas: 4, usage: 20666},
		{name: "no change: missing metrics", f: fixture{currentReplicas: 5, metricLevels: []int64{20000, 19000, 21000}}, target: 20000, replicas: 5, usage: 20000},
		{name: "rolling update with maxSurge: extra pod missing metric", f: fixture{currentReplicas: 2, phase: []v1.PodPhase{run, run, run}, metricLevels: []int64{10000, 10000}}, target: 17000, replicas: 2, usage: 10000},
		// beyond upstream's table: the fill-in rules for Pods metrics
		{name: "scale up: pending pods count as zero", f: fixture{currentReplicas: 4, phase: []v1.PodPhase{run, run, pend, pend}, metricLevels: []int64{30000, 30000}}, target: 10000, replicas: 6, usage: 30000},
		{name: "scale down: missing pods count as the target", f: fixture{currentReplicas: 4, metricLevels: []int64{1000, 1000}}, target: 10000, replicas: 3, usage: 1000},
		{name: "scale up: missing pods count as zero", f: fixture{currentReplicas: 4, metricLevels: []int64{30000, 30000}}, target: 10000, replicas: 6, usage: 30000},
		{name: "scale up reversed by fill-in: keep current", f: fixture{currentReplicas: 4, phase: []v1.PodPhase{run, pend, pend, pend}, metricLevels: []int64{12000}}, target: 10000, replicas: 4, usage: 12000},
		{name: "all pods pending", f: fixture{currentReplicas: 2, phase: []v1.PodPhase{pend, pend}, metricLevels: []int64{1, 1}}, target: 10, err: "did not receive metrics for targeted pods (pods might be unready)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.f.env(tc.tolerances).plainReplicas(tc.f.currentReplicas, tc.target, "", tc.f.customSamples())
			checkMetric(t, tc, r.replicas, r.usage, err)
		})
	}
}

func TestObjectMetricReplicas(t *testing.T) {
	f, tr := v1.ConditionFalse, v1.ConditionTrue
	cases := []metricCase{
		{name: "scale up", f: fixture{currentReplicas: 3, metricLevels: []int64{20000}}, target: 15000, replicas: 4, usage: 20000},
		{name: "scale up: very large metric saturates replicas to MaxInt32", f: fixture{currentReplicas: 3, metricLevels: []int64{math.MaxInt64}}, target: 1, replicas: math.MaxInt32, usage: math.MaxInt64},
		{name: "scale up: ignores unready pods", f: fixture{currentReplicas: 3, readiness: []v1.ConditionStatus{f, tr, f}, metricLevels: []int64{50000}}, target: 10000, replicas: 5, usage: 50000},
		{name: "scale down", f: fixture{currentReplicas: 5, metricLevels: []int64{12000}}, target: 20000, replicas: 3, usage: 12000},
		{name: "within default tolerance", f: fixture{currentReplicas: 3, metricLevels: []int64{20666}}, target: 20000, replicas: 3, usage: 20666},
		{name: "outside configurable 1% tolerance", tolerances: &Tolerances{testTolerance, .01}, f: fixture{currentReplicas: 3, metricLevels: []int64{20666}}, target: 20000, replicas: 4, usage: 20666},
		{name: "from zero: ratio alone, no tolerance", f: fixture{currentReplicas: 0, metricLevels: []int64{20500}}, target: 10000, replicas: 3, usage: 20500},
		{name: "to zero: zero usage", f: fixture{currentReplicas: 0, metricLevels: []int64{0}}, target: 10000, replicas: 0, usage: 0},
		{name: "no pods", f: fixture{currentReplicas: 0, metricLevels: []int64{0}}, target: 10000, replicas: 0, usage: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			usage := tc.f.metricLevels[0]
			replicas, err := tc.f.env(tc.tolerances).usageRatioReplicas(tc.f.currentReplicas, float64(usage)/float64(tc.target))
			checkMetric(t, tc, replicas, usage, err)
		})
	}
	t.Run("no pods while not at zero", func(t *testing.T) {
		env := (&fixture{}).env(nil)
		_, err := env.usageRatioReplicas(2, 3)
		want := "unable to calculate ready pods: no pods returned by selector while calculating replica count"
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v, want %q", err, want)
		}
	})
}

func TestPerPodReplicas(t *testing.T) {
	cases := []metricCase{
		// upstream TestReplicaCalcObjectPerPodMetric
		{name: "object: scale up", f: fixture{currentReplicas: 3, metricLevels: []int64{20000}}, target: 5000, replicas: 4, usage: 6667},
		{name: "object: scale down", f: fixture{currentReplicas: 5, metricLevels: []int64{6000}}, target: 2000, replicas: 3, usage: 1200},
		{name: "object: within default tolerance", f: fixture{currentReplicas: 4, metricLevels: []int64{20166}}, target: 5000, replicas: 4, usage: 5042},
		{name: "object: outside configurable 1% tolerance", tolerances: &Tolerances{testTolerance, .01}, f: fixture{currentReplicas: 4, metricLevels: []int64{20208}}, target: 5000, replicas: 5, usage: 5052},
		// upstream TestReplicaCalcExternalPerPodMetric
		{name: "external: replica count overflow saturates to MaxInt32", f: fixture{currentReplicas: 1, metricLevels: []int64{math.MaxInt64}}, target: 1, replicas: math.MaxInt32, usage: math.MaxInt64},
		{name: "external: usage overflow with huge target leaves replicas unchanged", f: fixture{currentReplicas: 1, metricLevels: []int64{math.MaxInt64}}, target: math.MaxInt64, replicas: 1, usage: math.MaxInt64},
		{name: "external: scale up", f: fixture{currentReplicas: 3, metricLevels: []int64{8600}}, target: 2150, replicas: 4, usage: 2867},
		{name: "external: scale down", f: fixture{currentReplicas: 5, metricLevels: []int64{8600}}, target: 2867, replicas: 3, usage: 1720},
		{name: "external: within default tolerance", f: fixture{currentReplicas: 3, metricLevels: []int64{8600}}, target: 2900, replicas: 3, usage: 2867},
		{name: "external: outside configurable 1% tolerance", tolerances: &Tolerances{testTolerance, .01}, f: fixture{currentReplicas: 3, metricLevels: []int64{8600}}, target: 2800, replicas: 4, usage: 2867},
		{name: "external: series summed", f: fixture{currentReplicas: 3, metricLevels: []int64{4000, 4600}}, target: 2150, replicas: 4, usage: 2867},
		{name: "external: negative running total taken as overflow", f: fixture{currentReplicas: 1, metricLevels: []int64{-5}}, target: 1, replicas: math.MaxInt32, usage: math.MaxInt64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			replicas, usage, _ := tc.f.env(tc.tolerances).perPodReplicas(tc.f.currentReplicas, tc.target, sumSeriesPerPod(tc.f.metricLevels))
			checkMetric(t, tc, replicas, usage, nil)
		})
	}
}

func TestExternalValueReplicas(t *testing.T) {
	f, tr := v1.ConditionFalse, v1.ConditionTrue
	cases := []metricCase{
		{name: "scale down: ignores unready pods (would otherwise scale up)", f: fixture{currentReplicas: 3, readiness: []v1.ConditionStatus{f, tr, f}, metricLevels: []int64{8600}}, target: 4400, replicas: 2, usage: 8600},
		{name: "scale down", f: fixture{currentReplicas: 5, metricLevels: []int64{8600}}, target: 14334, replicas: 3, usage: 8600},
		{name: "within default tolerance", f: fixture{currentReplicas: 3, metricLevels: []int64{8600}}, target: 8888, replicas: 3, usage: 8600},
		{name: "outside configurable 1% tolerance", tolerances: &Tolerances{testTolerance, .01}, f: fixture{currentReplicas: 3, metricLevels: []int64{8900}}, target: 8800, replicas: 4, usage: 8900},
		{name: "usage overflow caps at MaxInt64", f: fixture{currentReplicas: 3, metricLevels: []int64{math.MaxInt64/2 + 1, math.MaxInt64/2 + 1}}, target: math.MaxInt64, replicas: 3, usage: math.MaxInt64},
		{name: "negative values are summed", f: fixture{currentReplicas: 3, metricLevels: []int64{9000, -400}}, target: 8600, replicas: 3, usage: 8600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			usage := sumSeries(tc.f.metricLevels)
			replicas, err := tc.f.env(tc.tolerances).usageRatioReplicas(tc.f.currentReplicas, float64(usage)/float64(tc.target))
			checkMetric(t, tc, replicas, usage, err)
		})
	}
}
