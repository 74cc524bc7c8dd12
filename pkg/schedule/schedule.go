// Package schedule owns scheduled capacity: named schedules of time
// windows (repeating on days of the week at local times of a timezone, or
// one-off between two instants), each with a replica floor and optional
// linear ramps before and after. The adapter serves each schedule as an
// external metric whose value is the floor at the time of the request; an
// HPA that lists it with an AverageValue target of 1 never goes below the
// floor (the HPA takes the highest of its metrics' proposals). No CRD, and
// nothing writes the HPA.
//
// Parsing (Parse) and evaluation (Schedule.Value) are pure; the clock is
// the caller's.
package schedule

import (
	"math"
	"slices"
	"time"
)

// Set is the schedules of one file, by name.
type Set struct {
	schedules map[string]*Schedule
	names     []string
}

// Schedule is one named schedule.
type Schedule struct {
	// Name is the external metric name it is served as.
	Name string
	// Namespaces may read it; empty means every namespace.
	Namespaces []string
	// Location is the timezone of the repeating windows' days and times.
	Location *time.Location
	Windows  []Window
}

// Window is one window of a schedule: repeating (Days, Start, End) or
// one-off (From, To).
type Window struct {
	// Days are the weekdays a repeating window starts on; empty means
	// every day.
	Days []time.Weekday
	// Start and End are offsets from local midnight; End ≤ Start means
	// the window ends the next day.
	Start, End time.Duration
	// From and To bound a one-off window (OneOff true).
	From, To time.Time
	OneOff   bool
	// Replicas is the floor inside the window.
	Replicas int32
	// RampUp is how long before the start the floor rises linearly from
	// 0; RampDown how long after the end it falls linearly to 0.
	RampUp, RampDown time.Duration
}

// Get returns the named schedule, or nil.
func (s *Set) Get(name string) *Schedule {
	if s == nil {
		return nil
	}
	return s.schedules[name]
}

// Names lists the schedules' names in file order.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.names)
}

// Allows reports whether namespace may read the schedule.
func (s *Schedule) Allows(namespace string) bool {
	return len(s.Namespaces) == 0 || slices.Contains(s.Namespaces, namespace)
}

// Value is the schedule's floor at t: the highest of its windows' values.
func (s *Schedule) Value(t time.Time) int32 {
	var v int32
	for _, w := range s.Windows {
		v = max(v, w.value(t, s.Location))
	}
	return v
}

// value is the window's floor at t.
func (w Window) value(t time.Time, loc *time.Location) int32 {
	if w.OneOff {
		return w.at(t, w.From, w.To)
	}
	// A repeating window that started up to two days before t may still
	// be open or ramping down; one starting the next day may be ramping up.
	local := t.In(loc)
	y, m, d := local.Date()
	var v int32
	for delta := -2; delta <= 1; delta++ {
		day := time.Date(y, m, d+delta, 0, 0, 0, 0, loc)
		if len(w.Days) > 0 && !slices.Contains(w.Days, day.Weekday()) {
			continue
		}
		start := atClock(day, w.Start, loc)
		end := atClock(day, w.End, loc)
		if !end.After(start) {
			end = atClock(day.AddDate(0, 0, 1), w.End, loc)
		}
		v = max(v, w.at(t, start, end))
	}
	return v
}

// atClock is the local time of day off (hours and minutes) on day.
func atClock(day time.Time, off time.Duration, loc *time.Location) time.Time {
	y, m, d := day.Date()
	return time.Date(y, m, d, int(off/time.Hour), int(off%time.Hour/time.Minute), 0, 0, loc)
}

// at is the floor at t of a window open over [start, end).
func (w Window) at(t, start, end time.Time) int32 {
	switch {
	case !t.Before(start) && t.Before(end):
		return w.Replicas
	case w.RampUp > 0 && !t.Before(start.Add(-w.RampUp)) && t.Before(start):
		return ramp(w.Replicas, t.Sub(start.Add(-w.RampUp)), w.RampUp)
	case w.RampDown > 0 && !t.Before(end) && t.Before(end.Add(w.RampDown)):
		return ramp(w.Replicas, end.Add(w.RampDown).Sub(t), w.RampDown)
	}
	return 0
}

// ramp is replicas × part/whole, rounded up.
func ramp(replicas int32, part, whole time.Duration) int32 {
	return int32(math.Ceil(float64(replicas) * float64(part) / float64(whole)))
}
