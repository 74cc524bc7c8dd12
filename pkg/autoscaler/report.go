package autoscaler

import (
	"math"

	v1 "k8s.io/api/core/v1"
)

// PodCount counts the pods a target's selector matched, for the reports of
// explain and simulate.
type PodCount struct {
	// Total counts the pods the selector matched.
	Total int `json:"total"`
	// Ready counts those Running with Ready=True.
	Ready int `json:"ready"`
}

// CountPods counts pods, and the Running and Ready ones among them.
func CountPods(pods []*v1.Pod) PodCount {
	c := PodCount{Total: len(pods)}
	for _, p := range pods {
		if isPodRunningAndReady(p) {
			c.Ready++
		}
	}
	return c
}

// RoundRatio keeps a usage ratio to six decimals for a readable, stable
// report; nil when it is not finite (a per-pod target at zero replicas).
func RoundRatio(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	r := math.Round(f*1e6) / 1e6
	return &r
}
