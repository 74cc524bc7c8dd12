package autoscaler

import (
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// Without behavior, a scale-up is limited to max(2×current, 4).
const (
	scaleUpLimitFactor  = 2.0
	scaleUpLimitMinimum = 4.0
)

// limit is a normalization outcome: the count and the ScalingLimited
// reason and message.
type limit struct {
	replicas int32
	reason   string
	message  string
}

const (
	msgWithinRange   = "the desired count is within the acceptable range"
	msgScaleUpLimit  = "the desired replica count is increasing faster than the maximum scale rate"
	msgScaleDownLim  = "the desired replica count is decreasing faster than the maximum scale rate"
	msgTooMany       = "the desired replica count is more than the maximum replica count"
	msgTooFew        = "the desired replica count is less than the minimum replica count"
	msgUpStabilized  = "recent recommendations were lower than current one, applying the lowest recent recommendation"
	msgDownStabilzed = "recent recommendations were higher than current one, applying the highest recent recommendation"
	msgReadyForScale = "recommended size matches current size"
)

// stabilize is stabilizeRecommendation (no behavior): the highest
// recommendation within the window, recording the new one in the slot of
// the last expired one, if any.
func (s *State) stabilize(now time.Time, window time.Duration, desired int32) int32 {
	highest := desired
	cutoff := now.Add(-window)
	old := -1
	for i, rec := range s.Recommendations {
		if rec.Timestamp.Before(cutoff) {
			old = i
		} else if rec.Replicas > highest {
			highest = rec.Replicas
		}
	}
	s.record(old, desired, now)
	return highest
}

func (s *State) record(old int, desired int32, now time.Time) {
	rec := Recommendation{Replicas: desired, Timestamp: now}
	if old >= 0 {
		s.Recommendations[old] = rec
	} else {
		s.Recommendations = append(s.Recommendations, rec)
	}
}

// convertWithRules is convertDesiredReplicasWithRules: min/max and the
// max(2×current, 4) scale-up limit.
func convertWithRules(current, desired, minReplicas, maxReplicas int32) limit {
	scaleUpLimit := scaleUpLimitWithoutBehavior(current)
	maxAllowed, reason, message := maxReplicas, "TooManyReplicas", msgTooMany
	if maxReplicas > scaleUpLimit {
		maxAllowed, reason, message = scaleUpLimit, "ScaleUpLimit", msgScaleUpLimit
	}
	switch {
	case desired < minReplicas:
		return limit{minReplicas, "TooFewReplicas", msgTooFew}
	case desired > maxAllowed:
		return limit{maxAllowed, reason, message}
	}
	return limit{desired, "DesiredWithinRange", msgWithinRange}
}

// scaleUpLimitWithoutBehavior is calculateScaleUpLimit: max(2×current, 4).
func scaleUpLimitWithoutBehavior(current int32) int32 {
	return int32(math.Max(scaleUpLimitFactor*float64(current), scaleUpLimitMinimum))
}

// stabilizeWithBehavior is stabilizeRecommendationWithBehaviors: the
// recommendation is held between the lowest recommendation of the
// scale-up window and the highest of the scale-down window.
func (s *State) stabilizeWithBehavior(now time.Time, b *autoscalingv2.HorizontalPodAutoscalerBehavior, current, desired int32) (int32, string, string) {
	upRec, downRec := desired, desired
	upCutoff := now.Add(-time.Second * time.Duration(*b.ScaleUp.StabilizationWindowSeconds))
	downCutoff := now.Add(-time.Second * time.Duration(*b.ScaleDown.StabilizationWindowSeconds))
	old := -1
	for i, rec := range s.Recommendations {
		if rec.Timestamp.After(upCutoff) {
			upRec = min(rec.Replicas, upRec)
		}
		if rec.Timestamp.After(downCutoff) {
			downRec = max(rec.Replicas, downRec)
		}
		if rec.Timestamp.Before(upCutoff) && rec.Timestamp.Before(downCutoff) {
			old = i
		}
	}
	recommendation := current
	if recommendation < upRec {
		recommendation = upRec
	}
	if recommendation > downRec {
		recommendation = downRec
	}
	s.record(old, desired, now)
	if desired >= current {
		return recommendation, "ScaleUpStabilized", msgUpStabilized
	}
	return recommendation, "ScaleDownStabilized", msgDownStabilzed
}

// convertWithBehaviorRate is convertDesiredReplicasWithBehaviorRate: the
// scaling policies over their periods, then min/max.
func (s *State) convertWithBehaviorRate(now time.Time, b *autoscalingv2.HorizontalPodAutoscalerBehavior, current, desired, minReplicas, maxReplicas int32) limit {
	switch {
	case desired > current:
		up := max(scaleLimit(now, current, s.ScaleUpEvents, s.ScaleDownEvents, b.ScaleUp, true), current)
		maxAllowed, reason, message := maxReplicas, "TooManyReplicas", msgTooMany
		if maxAllowed > up {
			maxAllowed, reason, message = up, "ScaleUpLimit", msgScaleUpLimit
		}
		if desired > maxAllowed {
			return limit{maxAllowed, reason, message}
		}
	case desired < current:
		down := min(scaleLimit(now, current, s.ScaleUpEvents, s.ScaleDownEvents, b.ScaleDown, false), current)
		minAllowed, reason, message := minReplicas, "TooFewReplicas", msgTooFew
		if minAllowed < down {
			minAllowed, reason, message = down, "ScaleDownLimit", msgScaleDownLim
		}
		if desired < minAllowed {
			return limit{minAllowed, reason, message}
		}
	}
	return limit{desired, "DesiredWithinRange", msgWithinRange}
}

// changeInPeriod sums the replica changes of the events newer than the period.
func changeInPeriod(now time.Time, periodSeconds int32, events []ScaleEvent) int32 {
	cutoff := now.Add(-time.Second * time.Duration(periodSeconds))
	var n int32
	for _, e := range events {
		if e.Timestamp.After(cutoff) {
			n += e.ReplicaChange
		}
	}
	return n
}

// scaleLimit is calculateScaleUpLimitWithScalingRules (up) and
// calculateScaleDownLimitWithBehaviors (down): each policy moves from the
// replicas at the start of its period; selectPolicy Max keeps the largest
// change, Min the smallest, Disabled none.
func scaleLimit(now time.Time, current int32, upEvents, downEvents []ScaleEvent, rules *autoscalingv2.HPAScalingRules, up bool) int32 {
	selectPolicy := autoscalingv2.MaxChangePolicySelect
	if rules.SelectPolicy != nil {
		selectPolicy = *rules.SelectPolicy
	}
	if selectPolicy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	// The largest change is the highest count up and the lowest down.
	result, pick := int32(math.MinInt32), func(a, b int32) int32 { return max(a, b) }
	if up == (selectPolicy == autoscalingv2.MinChangePolicySelect) {
		result, pick = math.MaxInt32, func(a, b int32) int32 { return min(a, b) }
	}
	for _, p := range rules.Policies {
		start := current - changeInPeriod(now, p.PeriodSeconds, upEvents) + changeInPeriod(now, p.PeriodSeconds, downEvents)
		var proposed int32
		switch {
		case p.Type == autoscalingv2.PodsScalingPolicy && up:
			proposed = start + p.Value
		case p.Type == autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case p.Type == autoscalingv2.PercentScalingPolicy && up:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		case p.Type == autoscalingv2.PercentScalingPolicy:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// storeScaleEvent records a successful rescale for the rate policies (only
// with behavior), reusing the slot of the last event older than the
// direction's longest policy period.
func (s *State) storeScaleEvent(now time.Time, b *autoscalingv2.HorizontalPodAutoscalerBehavior, prev, next int32) {
	if b == nil {
		return
	}
	events, rules, change := &s.ScaleDownEvents, b.ScaleDown, prev-next
	if next > prev {
		events, rules, change = &s.ScaleUpEvents, b.ScaleUp, next-prev
	}
	var longest int32
	if rules != nil {
		for _, p := range rules.Policies {
			longest = max(longest, p.PeriodSeconds)
		}
	}
	cutoff := now.Add(-time.Second * time.Duration(longest))
	old := -1
	for i := range *events {
		if (*events)[i].Timestamp.Before(cutoff) {
			(*events)[i].Outdated = true
		}
		if (*events)[i].Outdated {
			old = i
		}
	}
	e := ScaleEvent{ReplicaChange: change, Timestamp: now}
	if old >= 0 {
		(*events)[old] = e
	} else {
		*events = append(*events, e)
	}
}
