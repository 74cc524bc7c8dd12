package autoscaler

import (
	"errors"
	"fmt"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The replica calculation of upstream's replica_calculator.go, reworked to
// read the samples without copying or mutating them: instead of deleting
// and re-adding map entries it keeps the sums and counts those maps would
// hold. "Extraneous" samples (for pods the selector does not list) stay in
// the counts exactly as they stay in upstream's map.

var (
	errNoPods      = errors.New("no pods returned by selector while calculating replica count")
	errNoReadyPods = errors.New("did not receive metrics for targeted pods (pods might be unready)")
	errNoMatched   = errors.New("no metrics returned matched known pods")
)

// calcEnv is what every calculation reads besides the samples.
type calcEnv struct {
	now            time.Time
	cpuInit        time.Duration
	readinessDelay time.Duration
	podLevel       bool
	tolerances     Tolerances
	pods           []*v1.Pod
}

// calcResult is one metric's calculation.
type calcResult struct {
	replicas    int32
	utilization int32 // Resource utilization, whole percent
	usage       int64 // average (or total) usage in milli-units
	ratio       float64
	adjRatio    float64
	groups      *PodGroups
}

// grouping is the outcome of classifying every pod against the samples.
type grouping struct {
	groups PodGroups
	// readySum is the sum of the ready pods' samples.
	readySum int64
	// extraCount and extraSum describe samples of pods the selector does
	// not list.
	extraCount int
	extraSum   int64
	// ready, unready and missing hold pod indexes, for request sums.
	readyIdx, unreadyIdx, missingIdx []int
}

func (e *calcEnv) group(samples map[string]PodMetric, cpu bool, wantIdx bool) grouping {
	var g grouping
	if wantIdx {
		g.readyIdx = make([]int, 0, len(e.pods))
	}
	var foundCount int
	var foundSum int64
	for i, pod := range e.pods {
		m, found := samples[pod.Name]
		if found {
			foundCount++
			foundSum += m.Value
		}
		switch classifyPod(pod, m, found, cpu, e.now, e.cpuInit, e.readinessDelay) {
		case podIgnored:
			g.groups.Ignored = append(g.groups.Ignored, pod.Name)
		case podUnready:
			g.groups.Unready = append(g.groups.Unready, pod.Name)
			if wantIdx {
				g.unreadyIdx = append(g.unreadyIdx, i)
			}
		case podMissing:
			g.groups.Missing = append(g.groups.Missing, pod.Name)
			if wantIdx {
				g.missingIdx = append(g.missingIdx, i)
			}
		default:
			g.groups.Ready++
			g.readySum += m.Value
			if wantIdx {
				g.readyIdx = append(g.readyIdx, i)
			}
		}
	}
	var total int64
	for _, m := range samples {
		total += m.Value
	}
	g.extraCount = len(samples) - foundCount
	g.extraSum = total - foundSum
	return g
}

// resourceUtilizationReplicas is GetResourceReplicas: Resource and
// ContainerResource metrics with a Utilization target.
func (e *calcEnv) resourceUtilizationReplicas(current, target int32, res v1.ResourceName, container string, samples map[string]PodMetric) (calcResult, error) {
	if len(e.pods) == 0 {
		return calcResult{}, errNoPods
	}
	g := e.group(samples, res == v1.ResourceCPU, true)
	groups := &g.groups
	if g.groups.Ready+g.extraCount == 0 {
		return calcResult{groups: groups}, errNoReadyPods
	}
	requests := make([]int64, len(e.pods))
	for i, pod := range e.pods {
		r, err := podRequest(pod, container, res, e.podLevel)
		if err != nil {
			return calcResult{groups: groups}, err
		}
		requests[i] = r
	}
	var readyRequests int64
	for _, i := range g.readyIdx {
		readyRequests += requests[i]
	}
	if readyRequests == 0 {
		return calcResult{groups: groups}, errNoMatched
	}
	utilization := int32((g.readySum * 100) / readyRequests)
	raw := g.readySum / int64(g.groups.Ready)
	ratio := float64(utilization) / float64(target)
	r := calcResult{utilization: utilization, usage: raw, ratio: ratio, groups: groups}

	scaleUpWithUnready := len(g.unreadyIdx) > 0 && ratio > 1.0
	if !scaleUpWithUnready && len(g.missingIdx) == 0 {
		if e.tolerances.IsWithin(ratio) {
			r.replicas = current
			return r, nil
		}
		r.replicas = ceilInt32(ratio * float64(g.groups.Ready))
		return r, nil
	}

	sum, reqs := g.readySum, readyRequests
	entries := g.groups.Ready + g.extraCount
	if len(g.missingIdx) > 0 {
		switch {
		case ratio < 1.0:
			// scale-down: missing pods count as using the request, or the
			// target when that is above 100%
			fallback := int64(max(100, target))
			for _, i := range g.missingIdx {
				sum += requests[i] * fallback / 100
				reqs += requests[i]
			}
			entries += len(g.missingIdx)
		case ratio > 1.0:
			// scale-up: missing pods count as using nothing
			for _, i := range g.missingIdx {
				reqs += requests[i]
			}
			entries += len(g.missingIdx)
		}
	}
	if scaleUpWithUnready {
		for _, i := range g.unreadyIdx {
			reqs += requests[i]
		}
		entries += len(g.unreadyIdx)
	}
	newRatio := float64(int32((sum*100)/reqs)) / float64(target)
	r.adjRatio = newRatio
	r.replicas = e.guardDirection(current, ratio, newRatio, entries)
	return r, nil
}

// plainReplicas is calcPlainMetricReplicas: Pods metrics and Resource
// metrics with an AverageValue target (res is then the resource, which
// turns on the CPU readiness rules for cpu).
func (e *calcEnv) plainReplicas(current int32, target int64, res v1.ResourceName, samples map[string]PodMetric) (calcResult, error) {
	if len(e.pods) == 0 {
		return calcResult{}, errNoPods
	}
	g := e.group(samples, res == v1.ResourceCPU, false)
	groups := &g.groups
	count := g.groups.Ready + g.extraCount
	if count == 0 {
		return calcResult{groups: groups}, errNoReadyPods
	}
	sum := g.readySum + g.extraSum
	usage := sum / int64(count)
	ratio := float64(usage) / float64(target)
	r := calcResult{usage: usage, ratio: ratio, groups: groups}

	unready, missing := len(g.groups.Unready), len(g.groups.Missing)
	scaleUpWithUnready := unready > 0 && ratio > 1.0
	if !scaleUpWithUnready && missing == 0 {
		if e.tolerances.IsWithin(ratio) {
			r.replicas = current
			return r, nil
		}
		r.replicas = ceilInt32(ratio * float64(g.groups.Ready))
		return r, nil
	}
	if missing > 0 {
		switch {
		case ratio < 1.0:
			// scale-down: missing pods count as using exactly the target
			sum += target * int64(missing)
			count += missing
		case ratio > 1.0:
			// scale-up: missing pods count as using nothing
			count += missing
		}
	}
	if scaleUpWithUnready {
		count += unready
	}
	newRatio := float64(sum/int64(count)) / float64(target)
	r.adjRatio = newRatio
	r.replicas = e.guardDirection(current, ratio, newRatio, count)
	return r, nil
}

// guardDirection is the tail of both per-pod calculations: keep the current
// count when the adjusted ratio is within tolerance or flips the direction
// the raw ratio pointed to, or when the adjusted count does.
func (e *calcEnv) guardDirection(current int32, ratio, newRatio float64, entries int) int32 {
	if e.tolerances.IsWithin(newRatio) || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		return current
	}
	n := ceilInt32(newRatio * float64(entries))
	if (newRatio < 1.0 && n > current) || (newRatio > 1.0 && n < current) {
		return current
	}
	return n
}

// readyPodsCount counts Running and Ready pods (Object and External Value).
func (e *calcEnv) readyPodsCount() (int64, error) {
	if len(e.pods) == 0 {
		return 0, errNoPods
	}
	var n int64
	for _, pod := range e.pods {
		if isPodRunningAndReady(pod) {
			n++
		}
	}
	return n, nil
}

// usageRatioReplicas is getUsageRatioReplicaCount (Object and External
// Value targets): ratio times the ready pods, or, from zero replicas, the
// ratio alone without tolerance so the target can scale from and to zero.
func (e *calcEnv) usageRatioReplicas(current int32, ratio float64) (int32, error) {
	if current == 0 {
		return ceilInt32(ratio), nil
	}
	if e.tolerances.IsWithin(ratio) {
		return current, nil
	}
	ready, err := e.readyPodsCount()
	if err != nil {
		return 0, fmt.Errorf("unable to calculate ready pods: %s", err)
	}
	f := ratio * float64(ready)
	if f > math.MaxInt32 {
		return math.MaxInt32, nil
	}
	return ceilInt32(f), nil
}

// perPodReplicas is the AverageValue calculation of Object and External
// metrics: total usage over the target per pod, against status.replicas.
// It returns the proposal and the per-pod usage reported in status.
func (e *calcEnv) perPodReplicas(statusReplicas int32, target int64, usage int64) (int32, int64, float64) {
	replicas := statusReplicas
	ratio := float64(usage) / (float64(target) * float64(statusReplicas))
	if !e.tolerances.IsWithin(ratio) {
		replicas = ceilInt32(float64(usage) / float64(target))
	}
	return replicas, perPodUsage(usage, statusReplicas), ratio
}

// perPodUsage is usage spread over the replicas, rounded up. Upstream
// divides by zero when status.replicas is 0 and converts the infinity to an
// integer (an undefined result); the core reports the total instead.
func perPodUsage(usage int64, replicas int32) int64 {
	if float64(usage) >= float64(math.MaxInt64) {
		return math.MaxInt64
	}
	if replicas <= 0 {
		return usage
	}
	return int64(math.Ceil(float64(usage) / float64(replicas)))
}

// sumSeries adds external series values, capping a positive overflow at
// MaxInt64 (Value targets).
func sumSeries(values []int64) int64 {
	var usage int64
	for _, v := range values {
		if v > 0 && usage > math.MaxInt64-v {
			return math.MaxInt64
		}
		usage += v
	}
	return usage
}

// sumSeriesPerPod adds external series values as the AverageValue path
// does: any negative running total (an overflow, or negative values) is
// taken as MaxInt64.
func sumSeriesPerPod(values []int64) int64 {
	var usage int64
	for _, v := range values {
		usage += v
		if usage < 0 {
			return math.MaxInt64
		}
	}
	return usage
}

// ceilInt32 rounds up and converts to int32, saturating where Go's
// conversion would be undefined (NaN counts as 0).
func ceilInt32(f float64) int32 {
	c := math.Ceil(f)
	switch {
	case c != c:
		return 0
	case c >= math.MaxInt32:
		return math.MaxInt32
	case c <= math.MinInt32:
		return math.MinInt32
	}
	return int32(c)
}
