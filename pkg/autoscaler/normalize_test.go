package autoscaler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// Ports of upstream's normalization tests (horizontal_test.go, 1.37).

func rules(pods, podsPeriod, percent, percentPeriod, window int32) *autoscalingv2.HPAScalingRules {
	policy := autoscalingv2.MaxChangePolicySelect
	r := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window, SelectPolicy: &policy}
	if pods != 0 {
		r.Policies = append(r.Policies, autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: pods, PeriodSeconds: podsPeriod})
	}
	if percent != 0 {
		r.Policies = append(r.Policies, autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: percent, PeriodSeconds: percentPeriod})
	}
	return r
}

// spread places events uniformly over the last periodSeconds, each in the
// middle of its segment (upstream's generateEventsUniformDistribution).
func spread(changes []int32, periodSeconds int) []ScaleEvent {
	out := make([]ScaleEvent, len(changes))
	seg := float64(periodSeconds) / float64(len(changes))
	for i, c := range changes {
		back := time.Duration(float64(periodSeconds) - seg*float64(i+1) + seg/2)
		out[i] = ScaleEvent{ReplicaChange: c, Timestamp: testNow.Add(-time.Second * back)}
	}
	return out
}

func TestConvertWithRules(t *testing.T) {
	cases := []struct {
		name                      string
		current, desired, min, mx int32
		want                      int32
		reason                    string
	}{
		{"prenormalized desired replicas within range", 5, 7, 3, 8, 7, "DesiredWithinRange"},
		{"prenormalized desired replicas < minReplicas", 3, 1, 2, 8, 2, "TooFewReplicas"},
		{"prenormalized desired zeroed replicas within range", 1, 0, 0, 10, 0, "DesiredWithinRange"},
		{"maxReplicas is the limit because maxReplicas < scaleUpLimit", 20, 1000, 1, 10, 10, "TooManyReplicas"},
		{"scaleUpLimit is the limit because scaleUpLimit < maxReplicas", 3, 1000, 1, 2000, 6, "ScaleUpLimit"},
		{"scale-up limit is at least 4", 1, 1000, 1, 2000, 4, "ScaleUpLimit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := convertWithRules(tc.current, tc.desired, tc.min, tc.mx)
			if diff := cmp.Diff([2]any{tc.want, tc.reason}, [2]any{l.replicas, l.reason}); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyLimitsMinSelect(t *testing.T) {
	minPolicy := autoscalingv2.MinChangePolicySelect
	r := rules(2, 60, 50, 60, 300)
	r.SelectPolicy = &minPolicy
	if got := scaleLimit(testNow, 1, nil, nil, r, true); got != 2 {
		t.Errorf("scale-up limit = %d, want 2", got)
	}
	if got := scaleLimit(testNow, 5, nil, nil, r, false); got != 3 {
		t.Errorf("scale-down limit = %d, want 3", got)
	}
	disabled := autoscalingv2.DisabledPolicySelect
	r.SelectPolicy = &disabled
	if got := scaleLimit(testNow, 7, nil, nil, r, true); got != 7 {
		t.Errorf("disabled scale-up limit = %d, want 7", got)
	}
	if got := scaleLimit(testNow, 7, nil, nil, r, false); got != 7 {
		t.Errorf("disabled scale-down limit = %d, want 7", got)
	}
}

func TestStabilize(t *testing.T) {
	cases := []struct {
		name    string
		recs    []Recommendation
		desired int32
		want    int32
		wantLen int
	}{
		{"empty log", nil, 5, 5, 1},
		{"stabilize", []Recommendation{{4, testNow.Add(-2 * time.Minute)}, {5, testNow.Add(-1 * time.Minute)}}, 3, 5, 3},
		{"no stabilize", []Recommendation{{1, testNow.Add(-2 * time.Minute)}, {2, testNow.Add(-1 * time.Minute)}}, 3, 3, 3},
		{"no stabilize - old recommendations", []Recommendation{{10, testNow.Add(-10 * time.Minute)}, {9, testNow.Add(-9 * time.Minute)}}, 3, 3, 2},
		{"stabilize - old recommendations", []Recommendation{{10, testNow.Add(-10 * time.Minute)}, {4, testNow.Add(-1 * time.Minute)}, {5, testNow.Add(-2 * time.Minute)}, {9, testNow.Add(-9 * time.Minute)}}, 3, 5, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &State{Recommendations: tc.recs}
			got := s.stabilize(testNow, 5*time.Minute, tc.desired)
			if got != tc.want || len(s.Recommendations) != tc.wantLen {
				t.Errorf("got %d with %d recommendations, want %d with %d", got, len(s.Recommendations), tc.want, tc.wantLen)
			}
		})
	}
}

func TestConvertWithBehaviorRate(t *testing.T) {
	cases := []struct {
		name               string
		up, down           []ScaleEvent
		min, max           int32
		upRules, downRules *autoscalingv2.HPAScalingRules
		current, desired   int32
		want               int32
		wantReason         string
	}{
		{name: "prenormalized desired replicas within range", current: 5, desired: 7, min: 3, max: 8, want: 7, wantReason: "DesiredWithinRange"},
		{name: "prenormalized desired replicas < minReplicas", current: 3, desired: 1, min: 2, max: 8, want: 2, wantReason: "TooFewReplicas"},
		{name: "within range when minReplicas is 0", current: 1, desired: 0, min: 0, max: 10, want: 0, wantReason: "DesiredWithinRange"},
		{name: "maxReplicas is the limit because maxReplicas < scaleUpLimit", current: 20, desired: 1000, min: 1, max: 10, want: 10, wantReason: "TooManyReplicas"},
		{name: "desired replica count is more than the maximum replica count", current: 100, desired: 1000, min: 100, max: 150, want: 150, wantReason: "TooManyReplicas"},
		{name: "scaleUpLimit < maxReplicas with user policies", current: 3, desired: 1000, min: 1, max: 2000, upRules: rules(0, 0, 1, 60, 0), want: 4, wantReason: "ScaleUpLimit"},
		{name: "scaleUp with default behavior", min: 1, max: 1000, current: 10, desired: 50, want: 20, wantReason: "ScaleUpLimit"},
		{name: "scaleUp with pods policy larger than percent policy", min: 1, max: 1000, upRules: rules(100, 60, 100, 60, 0), current: 10, desired: 500, want: 110, wantReason: "ScaleUpLimit"},
		{name: "scaleUp with percent policy larger than pods policy", min: 1, max: 1000, upRules: rules(2, 60, 100, 60, 0), current: 10, desired: 500, want: 20, wantReason: "ScaleUpLimit"},
		{name: "scaleUp with spec MaxReplicas limitation with large pod policy", min: 1, max: 1000, upRules: rules(100, 60, 0, 0, 0), current: 10, desired: 50, want: 50, wantReason: "DesiredWithinRange"},
		{name: "scaleUp with spec MaxReplicas limitation with large percent policy", min: 1, max: 1000, upRules: rules(10000, 60, 0, 0, 0), current: 10, desired: 50, want: 50, wantReason: "DesiredWithinRange"},
		{name: "scaleUp with pod policy limitation", min: 1, max: 1000, upRules: rules(30, 60, 0, 0, 0), current: 10, desired: 50, want: 40, wantReason: "ScaleUpLimit"},
		{name: "scaleUp with percent policy limitation", min: 1, max: 1000, upRules: rules(0, 0, 200, 60, 0), current: 10, desired: 50, want: 30, wantReason: "ScaleUpLimit"},
		{name: "scaleDown with percent policy larger than pod policy", min: 1, max: 1000, downRules: rules(20, 60, 1, 60, 300), current: 100, desired: 2, want: 80, wantReason: "ScaleDownLimit"},
		{name: "scaleDown with pod policy larger than percent policy", min: 1, max: 1000, downRules: rules(2, 60, 1, 60, 300), current: 100, desired: 2, want: 98, wantReason: "ScaleDownLimit"},
		{name: "scaleDown with spec MinReplicas limitation with large pod policy", min: 1, max: 1000, downRules: rules(100, 60, 0, 0, 300), current: 10, desired: 0, want: 1, wantReason: "TooFewReplicas"},
		{name: "scaleDown with spec MinReplicas limitation with large percent policy", min: 5, max: 1000, downRules: rules(0, 0, 100, 60, 300), current: 10, desired: 2, want: 5, wantReason: "TooFewReplicas"},
		{name: "scaleDown with pod policy limitation", min: 1, max: 1000, downRules: rules(5, 60, 0, 0, 300), current: 10, desired: 2, want: 5, wantReason: "ScaleDownLimit"},
		{name: "scaleDown with percent policy limitation", min: 1, max: 1000, downRules: rules(0, 0, 50, 60, 300), current: 10, desired: 5, want: 5, wantReason: "DesiredWithinRange"},
		{name: "scaleUp with large pod policy and events", up: spread([]int32{1, 5, 9}, 120), min: 1, max: 200, upRules: rules(300, 60, 0, 0, 0), current: 100, desired: 500, want: 200, wantReason: "TooManyReplicas"},
		{name: "scaleUp with large percent policy and events", up: spread([]int32{1, 5, 9}, 120), min: 1, max: 200, upRules: rules(0, 0, 10000, 60, 0), current: 100, desired: 500, want: 200, wantReason: "TooManyReplicas"},
		{name: "scaleUp limited by recent scale-ups", up: spread([]int32{1, 5, 9}, 120), min: 1, max: 1000, upRules: rules(5, 120, 0, 0, 0), current: 100, desired: 500, want: 100, wantReason: "ScaleUpLimit"},
		{name: "scaleUp with pod policy and previous scale up events", up: spread([]int32{1, 5, 9}, 120), min: 1, max: 1000, upRules: rules(150, 120, 0, 0, 0), current: 100, desired: 500, want: 235, wantReason: "ScaleUpLimit"},
		{name: "scaleUp with percent policy and previous scale up events", up: spread([]int32{1, 5, 9}, 120), min: 1, max: 1000, upRules: rules(0, 0, 200, 120, 0), current: 100, desired: 500, want: 255, wantReason: "ScaleUpLimit"},
		{name: "scaleUp with percent policy and previous scale up and down events", up: spread([]int32{4}, 120), down: spread([]int32{2}, 120), min: 1, max: 1000, upRules: rules(0, 0, 300, 300, 0), current: 6, desired: 24, want: 16, wantReason: "ScaleUpLimit"},
		{name: "scaleDown with default policy and previous events", down: spread([]int32{1, 5, 9}, 120), min: 1, max: 1000, current: 10, desired: 5, want: 5, wantReason: "DesiredWithinRange"},
		{name: "scaleDown with large pod policy and previous events", down: spread([]int32{1, 5, 9}, 120), min: 1, max: 1000, downRules: rules(115, 120, 0, 0, 300), current: 100, desired: 0, want: 1, wantReason: "TooFewReplicas"},
		{name: "scaleDown with MinReplicas limitation with large pod policy and previous events", down: spread([]int32{1, 5, 9}, 120), min: 5, max: 1000, downRules: rules(130, 120, 0, 0, 300), current: 100, desired: 0, want: 5, wantReason: "TooFewReplicas"},
		{name: "scaleDown with MinReplicas limitation with large percent policy and previous events", down: spread([]int32{1, 5, 9}, 120), min: 5, max: 1000, downRules: rules(0, 0, 100, 120, 300), current: 100, desired: 2, want: 5, wantReason: "TooFewReplicas"},
		{name: "scaleDown with pod policy limitation and previous events", down: spread([]int32{1, 5, 9}, 120), min: 1, max: 1000, downRules: rules(5, 120, 0, 0, 300), current: 100, desired: 2, want: 100, wantReason: "ScaleDownLimit"},
		{name: "scaleDown with percent policy limitation and previous events", down: spread([]int32{2, 4, 6}, 120), min: 1, max: 1000, downRules: rules(0, 0, 50, 120, 300), current: 100, desired: 0, want: 56, wantReason: "ScaleDownLimit"},
		{name: "scaleDown with percent policy and previous scale up and down events", up: spread([]int32{2}, 120), down: spread([]int32{4}, 120), min: 1, max: 1000, downRules: rules(0, 0, 50, 180, 0), current: 10, desired: 1, want: 6, wantReason: "ScaleDownLimit"},
		{name: "scaleDown with previous events preventing further scale down", down: spread([]int32{10, 10, 10}, 120), min: 1, max: 1000, downRules: rules(0, 0, 10, 120, 300), current: 100, desired: 0, want: 100, wantReason: "ScaleDownLimit"},
		{name: "scaleDown with previous events still allowing more scale down", down: spread([]int32{10, 10, 10}, 120), min: 1, max: 1000, downRules: rules(0, 0, 1000, 120, 300), current: 10, desired: 5, want: 5, wantReason: "DesiredWithinRange"},
		{name: "outdated events for one behavior for up", up: spread([]int32{8, 12, 9, 11}, 120), min: 1, max: 1000, upRules: rules(1000, 60, 0, 0, 0), current: 100, desired: 200, want: 200, wantReason: "DesiredWithinRange"},
		{name: "events not outdated for two policies for up", up: spread([]int32{8, 12, 9, 11}, 120), min: 1, max: 1000, upRules: rules(1000, 120, 100, 60, 0), current: 100, desired: 200, want: 200, wantReason: "DesiredWithinRange"},
		{name: "events outdated for two policies for up", up: spread([]int32{8, 12, 9, 11}, 120), min: 1, max: 1000, upRules: rules(1000, 30, 100, 60, 0), current: 100, desired: 200, want: 200, wantReason: "DesiredWithinRange"},
		{name: "outdated events for one behavior for down", down: spread([]int32{8, 12, 9, 11}, 120), min: 1, max: 1000, downRules: rules(1000, 60, 0, 0, 300), current: 100, desired: 5, want: 5, wantReason: "DesiredWithinRange"},
		{name: "events not outdated for two policies for down", down: spread([]int32{8, 12, 9, 11}, 120), min: 1, max: 1000, downRules: rules(1000, 120, 100, 60, 300), current: 100, desired: 5, want: 5, wantReason: "DesiredWithinRange"},
		{name: "events outdated for two policies for down", down: spread([]int32{8, 12, 9, 11}, 120), min: 1, max: 1000, downRules: rules(1000, 30, 100, 60, 300), current: 100, desired: 5, want: 5, wantReason: "DesiredWithinRange"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   mergeRules(tc.upRules, defaultScaleUpRules()),
				ScaleDown: mergeRules(tc.downRules, defaultScaleDownRules()),
			}
			s := &State{ScaleUpEvents: tc.up, ScaleDownEvents: tc.down}
			l := s.convertWithBehaviorRate(testNow, b, tc.current, tc.desired, tc.min, tc.max)
			if diff := cmp.Diff([2]any{tc.want, tc.wantReason}, [2]any{l.replicas, l.reason}); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStoreScaleEvent(t *testing.T) {
	ago := func(s int) time.Time { return testNow.Add(-time.Duration(s) * time.Second) }
	cases := []struct {
		name       string
		prev       []ScaleEvent
		rules      *autoscalingv2.HPAScalingRules
		wantChange int32 // replicas changed in the last 60s before storing
		want       []ScaleEvent
	}{
		{name: "empty entries with default behavior", want: nil},
		{name: "empty entries with two-policy-behavior", rules: rules(10, 60, 100, 60, 0), want: []ScaleEvent{{5, testNow, false}}},
		{name: "one outdated entry kept untouched without behavior", prev: []ScaleEvent{{7, ago(61), false}}, want: []ScaleEvent{{7, ago(61), false}}},
		{name: "one outdated entry replaced with behavior", prev: []ScaleEvent{{7, ago(61), false}}, rules: rules(10, 60, 100, 60, 0), want: []ScaleEvent{{5, testNow, false}}},
		{name: "one actual entry not touched with behavior", prev: []ScaleEvent{{7, ago(58), false}}, rules: rules(10, 60, 100, 60, 0), wantChange: 7, want: []ScaleEvent{{7, ago(58), false}, {5, testNow, false}}},
		{name: "two entries, one of them replaced", prev: []ScaleEvent{{7, ago(61), false}, {6, ago(59), false}}, rules: rules(10, 60, 0, 0, 0), wantChange: 6, want: []ScaleEvent{{5, testNow, false}, {6, ago(59), false}}},
		{name: "replace one entry, policies with different periods", prev: []ScaleEvent{{8, ago(29), false}, {6, ago(59), false}, {7, ago(61), false}, {9, ago(61), false}}, rules: rules(10, 60, 100, 30, 0), wantChange: 14,
			want: []ScaleEvent{{8, ago(29), false}, {6, ago(59), false}, {7, ago(61), true}, {5, testNow, false}}},
		{name: "two entries, both actual", prev: []ScaleEvent{{7, ago(58), false}, {6, ago(59), false}}, rules: rules(10, 120, 100, 30, 0), wantChange: 13,
			want: []ScaleEvent{{7, ago(58), false}, {6, ago(59), false}, {5, testNow, false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, up := range []bool{true, false} {
				s := &State{}
				var b *autoscalingv2.HorizontalPodAutoscalerBehavior
				next := int32(5)
				if up {
					s.ScaleUpEvents = append([]ScaleEvent(nil), tc.prev...)
					next = 15
					if tc.rules != nil {
						b = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: tc.rules}
					}
				} else {
					s.ScaleDownEvents = append([]ScaleEvent(nil), tc.prev...)
					if tc.rules != nil {
						b = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: tc.rules}
					}
				}
				events := &s.ScaleDownEvents
				if up {
					events = &s.ScaleUpEvents
				}
				if got := changeInPeriod(testNow, 60, *events); got != tc.wantChange {
					t.Errorf("up=%v: change in period = %d, want %d", up, got, tc.wantChange)
				}
				s.storeScaleEvent(testNow, b, 10, next)
				if diff := cmp.Diff(tc.want, *events); diff != "" {
					t.Errorf("up=%v: events mismatch (-want +got):\n%s", up, diff)
				}
			}
		})
	}
}

func TestStabilizeWithBehavior(t *testing.T) {
	cases := []struct {
		name             string
		recs             []Recommendation
		current, desired int32
		up, down         int32
		want             int32
		wantRecs         []int32
	}{
		{name: "empty recommendations for scaling down", current: 100, desired: 5, want: 5, wantRecs: []int32{5}},
		{name: "simple scale down stabilization", recs: []Recommendation{{4, testNow.Add(-2 * time.Minute)}, {5, testNow.Add(-1 * time.Minute)}}, current: 100, desired: 3, down: 180, want: 5, wantRecs: []int32{4, 5, 3}},
		{name: "simple scale up stabilization", recs: []Recommendation{{4, testNow.Add(-2 * time.Minute)}, {5, testNow.Add(-1 * time.Minute)}}, current: 1, desired: 7, up: 300, want: 4, wantRecs: []int32{4, 5, 7}},
		{name: "no scale down stabilization", recs: []Recommendation{{1, testNow.Add(-2 * time.Minute)}, {2, testNow.Add(-1 * time.Minute)}}, current: 100, desired: 3, up: 300, want: 3, wantRecs: []int32{1, 2, 3}},
		{name: "no scale up stabilization", recs: []Recommendation{{4, testNow.Add(-2 * time.Minute)}, {5, testNow.Add(-1 * time.Minute)}}, current: 1, desired: 3, down: 300, want: 3, wantRecs: []int32{4, 5, 3}},
		{name: "no scale down stabilization, reuse recommendation element", recs: []Recommendation{{10, testNow.Add(-10 * time.Minute)}, {9, testNow.Add(-9 * time.Minute)}}, current: 100, desired: 3, want: 3, wantRecs: []int32{10, 3}},
		{name: "no scale up stabilization, reuse recommendation element", recs: []Recommendation{{10, testNow.Add(-10 * time.Minute)}, {9, testNow.Add(-9 * time.Minute)}}, current: 1, desired: 100, want: 100, wantRecs: []int32{10, 100}},
		{name: "scale down stabilization, reuse one obsolete element", recs: []Recommendation{{10, testNow.Add(-10 * time.Minute)}, {4, testNow.Add(-1 * time.Minute)}, {5, testNow.Add(-2 * time.Minute)}, {9, testNow.Add(-9 * time.Minute)}}, current: 100, desired: 3, down: 180, want: 5, wantRecs: []int32{10, 4, 5, 3}},
		{name: "scale up stabilization, reuse one obsolete element", recs: []Recommendation{{10, testNow.Add(-100 * time.Minute)}, {6, testNow.Add(-1 * time.Minute)}, {5, testNow.Add(-2 * time.Minute)}, {9, testNow.Add(-3 * time.Minute)}}, current: 1, desired: 100, up: 300, want: 5, wantRecs: []int32{100, 6, 5, 9}},
		{name: "do not scale up when prenormalized rec goes down", recs: []Recommendation{{2, testNow.Add(-100 * time.Minute)}, {3, testNow.Add(-3 * time.Minute)}}, current: 2, desired: 1, up: 300, down: 300, want: 2},
		{name: "do not scale down when prenormalized rec goes up", recs: []Recommendation{{2, testNow.Add(-100 * time.Minute)}, {1, testNow.Add(-3 * time.Minute)}}, current: 2, desired: 3, up: 300, down: 300, want: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &tc.up},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &tc.down},
			}
			s := &State{Recommendations: tc.recs}
			got, _, _ := s.stabilizeWithBehavior(testNow, b, tc.current, tc.desired)
			if got != tc.want {
				t.Errorf("stabilized = %d, want %d", got, tc.want)
			}
			if tc.wantRecs != nil {
				var recs []int32
				for _, r := range s.Recommendations {
					recs = append(recs, r.Replicas)
				}
				if diff := cmp.Diff(tc.wantRecs, recs); diff != "" {
					t.Errorf("recommendations mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
}
