package bench

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStallsOf(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	// every request due 2 ms after the previous one, with these latencies
	// (in ms), listed in the order they were due
	series := func(lat ...int) ([]time.Time, []time.Duration) {
		due := make([]time.Time, len(lat))
		l := make([]time.Duration, len(lat))
		for i, v := range lat {
			due[i] = t0.Add(time.Duration(2*i) * ms)
			l[i] = time.Duration(v) * ms
		}
		return due, l
	}
	for _, tc := range []struct {
		name string
		lat  []int
		want stallStats
	}{
		{name: "none", lat: []int{2, 3, 2, 2, 4}, want: stallStats{}},
		{name: "empty", want: stallStats{}},
		// a pause of ~20 ms: answered together, latencies falling by the period
		{name: "one pause", lat: []int{2, 2, 21, 19, 17, 15, 13, 11, 3, 2}, want: stallStats{Stalls: 1, Requests: 6, Longest: 21 * ms}},
		// isolated slow requests are not stalls
		{name: "isolated", lat: []int{2, 30, 2, 12, 12, 2, 40}, want: stallStats{}},
		{name: "two pauses, at the end too", lat: []int{12, 10, 10, 2, 2, 25, 23, 21, 30}, want: stallStats{Stalls: 2, Requests: 7, Longest: 36 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, lat := series(tc.lat...)
			if diff := cmp.Diff(tc.want, stallsOf(due, lat, 10*ms, 3)); diff != "" {
				t.Errorf("stallsOf (-want +got):\n%s", diff)
			}
			// the order the answers came in does not matter
			for i, j := 0, len(due)-1; i < j; i, j = i+1, j-1 {
				due[i], due[j] = due[j], due[i]
				lat[i], lat[j] = lat[j], lat[i]
			}
			if diff := cmp.Diff(tc.want, stallsOf(due, lat, 10*ms, 3)); diff != "" {
				t.Errorf("stallsOf, answers reversed (-want +got):\n%s", diff)
			}
		})
	}
}
