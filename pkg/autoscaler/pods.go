package autoscaler

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// podClass is how one pod takes part in a per-pod calculation.
type podClass uint8

const (
	podReady podClass = iota
	podUnready
	podMissing
	podIgnored
)

// classifyPod places a pod in one of the groups, exactly as upstream's
// groupPods: deleting and Failed pods are ignored; Pending pods are unready;
// pods without a sample are missing; for CPU, a pod is also unready when it
// has no Ready condition or start time, when it is within the CPU
// initialization period and either not ready or its sample does not yet
// cover a full window since readiness last changed, or, after that period,
// when it is not ready and never was (readiness last changed within the
// initial readiness delay of its start).
func classifyPod(pod *v1.Pod, metric PodMetric, found bool, cpu bool, now time.Time, cpuInit, readinessDelay time.Duration) podClass {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodFailed {
		return podIgnored
	}
	if pod.Status.Phase == v1.PodPending {
		return podUnready
	}
	if !found {
		return podMissing
	}
	if !cpu {
		return podReady
	}
	condition := podReadyCondition(pod)
	if condition == nil || pod.Status.StartTime == nil {
		return podUnready
	}
	var unready bool
	if pod.Status.StartTime.Add(cpuInit).After(now) {
		unready = condition.Status == v1.ConditionFalse || metric.Timestamp.Before(condition.LastTransitionTime.Add(metric.Window))
	} else {
		unready = condition.Status == v1.ConditionFalse && pod.Status.StartTime.Add(readinessDelay).After(condition.LastTransitionTime.Time)
	}
	if unready {
		return podUnready
	}
	return podReady
}

// podReadyCondition returns the pod's first Ready condition, or nil.
func podReadyCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// isPodRunningAndReady is the readiness test of the Object and External
// Value calculations: phase Running and condition Ready=True.
func isPodRunningAndReady(pod *v1.Pod) bool {
	if pod.Status.Phase != v1.PodRunning {
		return false
	}
	c := podReadyCondition(pod)
	return c != nil && c.Status == v1.ConditionTrue
}

// podRequest returns a pod's request of the resource in milli-units: the
// named container's request; or, with pod-level resources enabled and
// pod-level requests set, the pod-level request; otherwise the sum over
// containers and restartable init (sidecar) containers.
func podRequest(pod *v1.Pod, container string, res v1.ResourceName, podLevelEnabled bool) (int64, error) {
	if podLevelEnabled && container == "" && isPodLevelRequestsSet(pod) {
		return podLevelRequest(pod, res)
	}
	return containerRequests(pod, container, res)
}

func containerRequests(pod *v1.Pod, container string, res v1.ResourceName) (int64, error) {
	var total int64
	visit := func(c *v1.Container) (done bool, err error) {
		if container == "" || container == c.Name {
			q, ok := c.Resources.Requests[res]
			if !ok {
				return true, fmt.Errorf("missing request for %s in container %s of Pod %s", res, c.Name, pod.Name)
			}
			total += q.MilliValue()
		}
		return container != "" && container == c.Name, nil
	}
	for i := range pod.Spec.Containers {
		if done, err := visit(&pod.Spec.Containers[i]); err != nil {
			return 0, err
		} else if done {
			return total, nil
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			continue
		}
		if done, err := visit(c); err != nil {
			return 0, err
		} else if done {
			return total, nil
		}
	}
	if container != "" {
		return 0, fmt.Errorf("container %s not found in Pod %s", container, pod.Name)
	}
	return total, nil
}

func isSupportedPodLevelResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

func isPodLevelRequestsSet(pod *v1.Pod) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	for name := range pod.Spec.Resources.Requests {
		if isSupportedPodLevelResource(name) {
			return true
		}
	}
	return false
}

// podLevelRequest computes the pod's effective request of one resource as
// the scheduler does (component-helpers PodRequests without options): the
// aggregate of container requests, where init containers count as the max
// of each one's need and sidecars add up; replaced by the pod-level request
// when that names the resource; plus the pod overhead.
func podLevelRequest(pod *v1.Pod, res v1.ResourceName) (int64, error) {
	var (
		sum, sidecars, initMax          resource.Quantity
		haveSum, haveSidecars, haveInit bool
	)
	for i := range pod.Spec.Containers {
		if q, ok := pod.Spec.Containers[i].Resources.Requests[res]; ok {
			sum.Add(q)
			haveSum = true
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		q, ok := c.Resources.Requests[res]
		var need resource.Quantity
		var haveNeed bool
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			if ok {
				sum.Add(q)
				haveSum = true
				sidecars.Add(q)
				haveSidecars = true
			}
			need, haveNeed = sidecars.DeepCopy(), haveSidecars
		} else {
			if ok {
				need.Add(q)
				haveNeed = true
			}
			if haveSidecars {
				need.Add(sidecars)
				haveNeed = true
			}
		}
		if haveNeed && (!haveInit || need.Cmp(initMax) > 0) {
			initMax, haveInit = need, true
		}
	}
	if haveInit && (!haveSum || initMax.Cmp(sum) > 0) {
		sum, haveSum = initMax, true
	}
	if q, ok := pod.Spec.Resources.Requests[res]; ok && isSupportedPodLevelResource(res) {
		sum, haveSum = q.DeepCopy(), true
	}
	if q, ok := pod.Spec.Overhead[res]; ok {
		sum.Add(q)
		haveSum = true
	}
	if !haveSum {
		return 0, fmt.Errorf("missing pod-level request for %s in Pod %s", res, pod.Name)
	}
	return sum.MilliValue(), nil
}
