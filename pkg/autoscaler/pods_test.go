package autoscaler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ports of upstream's TestGroupPods and TestCalculateRequests (1.37).

func podWith(name string, phase v1.PodPhase, start *time.Time, ready *v1.PodCondition) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.PodStatus{Phase: phase}}
	if start != nil {
		t := metav1.NewTime(*start)
		p.Status.StartTime = &t
	}
	if ready != nil {
		p.Status.Conditions = []v1.PodCondition{*ready}
	}
	return p
}

func readyCond(status v1.ConditionStatus, at time.Time) *v1.PodCondition {
	return &v1.PodCondition{Type: v1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(at)}
}

func at(d time.Duration) *time.Time { t := testNow.Add(d); return &t }

func TestGroupPods(t *testing.T) {
	succ := v1.PodSucceeded
	deleted := podWith("deleted", v1.PodPending, nil, nil)
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	cases := []struct {
		name    string
		pods    []*v1.Pod
		samples map[string]PodMetric
		res     v1.ResourceName
		want    PodGroups
	}{
		{name: "void", res: v1.ResourceCPU},
		{name: "count in a ready pod - memory", pods: []*v1.Pod{podWith("bentham", succ, nil, nil)},
			samples: map[string]PodMetric{"bentham": {Value: 1, Timestamp: testNow, Window: time.Minute}}, res: v1.ResourceMemory, want: PodGroups{Ready: 1}},
		{name: "unready a pod without ready condition - CPU", pods: []*v1.Pod{podWith("lucretius", succ, at(0), nil)},
			samples: map[string]PodMetric{"lucretius": {Value: 1}}, res: v1.ResourceCPU, want: PodGroups{Unready: []string{"lucretius"}}},
		{name: "count in a ready pod with fresh metrics during initialization period - CPU", pods: []*v1.Pod{podWith("bentham", succ, at(-time.Minute), readyCond(v1.ConditionTrue, testNow.Add(-30*time.Second)))},
			samples: map[string]PodMetric{"bentham": {Value: 1, Timestamp: testNow, Window: 30 * time.Second}}, res: v1.ResourceCPU, want: PodGroups{Ready: 1}},
		{name: "unready a ready pod without fresh metrics during initialization period - CPU", pods: []*v1.Pod{podWith("bentham", succ, at(-time.Minute), readyCond(v1.ConditionTrue, testNow.Add(-30*time.Second)))},
			samples: map[string]PodMetric{"bentham": {Value: 1, Timestamp: testNow, Window: 60 * time.Second}}, res: v1.ResourceCPU, want: PodGroups{Unready: []string{"bentham"}}},
		{name: "unready an unready pod during initialization period - CPU", pods: []*v1.Pod{podWith("lucretius", succ, at(-10*time.Minute), readyCond(v1.ConditionFalse, testNow.Add(-9*time.Minute-54*time.Second)))},
			samples: map[string]PodMetric{"lucretius": {Value: 1}}, res: v1.ResourceCPU, want: PodGroups{Unready: []string{"lucretius"}}},
		{name: "count in a ready pod without fresh metrics after initialization period - CPU", pods: []*v1.Pod{podWith("bentham", succ, at(-3*time.Minute), readyCond(v1.ConditionTrue, testNow.Add(-3*time.Minute)))},
			samples: map[string]PodMetric{"bentham": {Value: 1, Timestamp: testNow.Add(-2 * time.Minute), Window: time.Minute}}, res: v1.ResourceCPU, want: PodGroups{Ready: 1}},
		{name: "count in an unready pod that was ready after initialization period - CPU", pods: []*v1.Pod{podWith("lucretius", succ, at(-10*time.Minute), readyCond(v1.ConditionFalse, testNow.Add(-9*time.Minute)))},
			samples: map[string]PodMetric{"lucretius": {Value: 1}}, res: v1.ResourceCPU, want: PodGroups{Ready: 1}},
		{name: "unready pod that has never been ready after initialization period - CPU", pods: []*v1.Pod{podWith("lucretius", succ, at(-10*time.Minute), readyCond(v1.ConditionFalse, testNow.Add(-9*time.Minute-50*time.Second)))},
			samples: map[string]PodMetric{"lucretius": {Value: 1}}, res: v1.ResourceCPU, want: PodGroups{Ready: 1}},
		{name: "a missing pod", pods: []*v1.Pod{podWith("epicurus", succ, at(-3*time.Minute), nil)}, res: v1.ResourceCPU, want: PodGroups{Missing: []string{"epicurus"}}},
		{name: "several pods", pods: []*v1.Pod{
			podWith("lucretius", succ, at(0), nil),
			podWith("niccolo", succ, at(-3*time.Minute), readyCond(v1.ConditionTrue, testNow.Add(-3*time.Minute))),
			podWith("epicurus", succ, at(-3*time.Minute), nil),
		}, samples: map[string]PodMetric{"lucretius": {Value: 1}, "niccolo": {Value: 1}}, res: v1.ResourceCPU,
			want: PodGroups{Ready: 1, Unready: []string{"lucretius"}, Missing: []string{"epicurus"}}},
		{name: "pending pods are unreadied", pods: []*v1.Pod{podWith("unscheduled", v1.PodPending, nil, nil)}, res: v1.ResourceCPU, want: PodGroups{Unready: []string{"unscheduled"}}},
		{name: "ignore pods with deletion timestamps", pods: []*v1.Pod{deleted}, samples: map[string]PodMetric{"deleted": {Value: 1}}, res: v1.ResourceCPU, want: PodGroups{Ignored: []string{"deleted"}}},
		{name: "ignore pods in a failed state", pods: []*v1.Pod{podWith("failed", v1.PodFailed, nil, nil)}, samples: map[string]PodMetric{"failed": {Value: 1}}, res: v1.ResourceCPU, want: PodGroups{Ignored: []string{"failed"}}},
		{name: "non-CPU metrics ignore readiness", pods: []*v1.Pod{podWith("a", v1.PodRunning, at(0), readyCond(v1.ConditionFalse, testNow))},
			samples: map[string]PodMetric{"a": {Value: 1}}, res: v1.ResourceMemory, want: PodGroups{Ready: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := &calcEnv{now: testNow, cpuInit: testCPUInit, readinessDelay: testReadinessDelay, pods: tc.pods}
			g := env.group(tc.samples, tc.res == v1.ResourceCPU, false)
			if diff := cmp.Diff(tc.want, g.groups); diff != "" {
				t.Errorf("groups mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func cpuList(milli int64) v1.ResourceList {
	return v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}
}

func TestPodRequest(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	twoContainers := []v1.Container{
		{Name: "container1", Resources: v1.ResourceRequirements{Requests: cpuList(100)}},
		{Name: "container2", Resources: v1.ResourceRequirements{Requests: cpuList(50)}},
	}
	podLevel := &v1.ResourceRequirements{Requests: cpuList(800)}
	cases := []struct {
		name      string
		spec      v1.PodSpec
		container string
		podLevel  bool
		want      int64
		err       string
	}{
		{name: "sum container requests if pod-level feature is disabled", spec: v1.PodSpec{Containers: twoContainers, Resources: podLevel}, want: 150},
		{name: "pod-level enabled but not set: sum of containers", podLevel: true, spec: v1.PodSpec{Containers: twoContainers}, want: 150},
		{name: "pod-level requests override container requests", podLevel: true, spec: v1.PodSpec{Containers: twoContainers, Resources: podLevel}, want: 800},
		{name: "missing container request fails", spec: v1.PodSpec{Containers: []v1.Container{{Name: "container1"}, twoContainers[1]}},
			err: "missing request for cpu in container container1 of Pod test-pod"},
		{name: "pod-level requests override missing container requests", podLevel: true, spec: v1.PodSpec{Containers: []v1.Container{{Name: "container1"}, twoContainers[1]}, Resources: podLevel}, want: 800},
		{name: "named container only", container: "container1", spec: v1.PodSpec{Containers: twoContainers}, want: 100},
		{name: "named container ignores pod-level requests", container: "container1", podLevel: true, spec: v1.PodSpec{Containers: twoContainers, Resources: podLevel}, want: 100},
		{name: "restartable init containers are summed, plain ones not", spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "container1", Resources: v1.ResourceRequirements{Requests: cpuList(100)}}},
			InitContainers: []v1.Container{
				{Name: "init-container1", Resources: v1.ResourceRequirements{Requests: cpuList(20)}},
				{Name: "restartable-container1", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: cpuList(50)}},
			}}, want: 150},
		{name: "named sidecar container", container: "sidecar", spec: v1.PodSpec{
			Containers:     twoContainers,
			InitContainers: []v1.Container{{Name: "sidecar", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: cpuList(30)}}}}, want: 30},
		{name: "non-existent container", container: "non-existent-container", spec: v1.PodSpec{Containers: twoContainers},
			err: "container non-existent-container not found in Pod test-pod"},
		{name: "pod-level memory only: cpu from containers plus overhead", podLevel: true, spec: v1.PodSpec{
			Containers: twoContainers,
			Resources:  &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}},
			Overhead:   cpuList(10)}, want: 160},
		{name: "pod-level: init container larger than the rest wins", podLevel: true, spec: v1.PodSpec{
			Containers:     twoContainers,
			InitContainers: []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: cpuList(500)}}},
			Resources:      &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}}, want: 500},
		{name: "pod-level requests plus overhead", podLevel: true, spec: v1.PodSpec{Containers: twoContainers, Resources: podLevel, Overhead: cpuList(10)}, want: 810},
		{name: "pod-level: no cpu anywhere", podLevel: true, spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c"}},
			Resources:  &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}},
			err: "missing pod-level request for cpu in Pod test-pod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "test-pod"}, Spec: tc.spec}
			got, err := podRequest(pod, tc.container, v1.ResourceCPU, tc.podLevel)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tc.want {
				t.Errorf("request = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCeilInt32(t *testing.T) {
	nan := 0.0
	cases := map[float64]int32{1.2: 2, -1.5: -1, 1e12: 1<<31 - 1, -1e12: -1 << 31, nan / nan: 0}
	for in, want := range cases {
		if got := ceilInt32(in); got != want {
			t.Errorf("ceilInt32(%v) = %d, want %d", in, got, want)
		}
	}

}
