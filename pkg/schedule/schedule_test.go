package schedule

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/metrics/pkg/apis/external_metrics"
	clocktesting "k8s.io/utils/clock/testing"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

func load(t *testing.T) *Set {
	t.Helper()
	data, err := os.ReadFile("testdata/schedules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse("schedules.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValue(t *testing.T) {
	set := load(t)
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		schedule, at string
		want         int32
	}{
		// Wednesday 2 December 2026, Paris is UTC+1.
		{"office-hours", "2026-12-02T06:00:00Z", 0},  // 07:00 Paris: before the ramp
		{"office-hours", "2026-12-02T06:30:00Z", 0},  // 07:30: the ramp starts at 0
		{"office-hours", "2026-12-02T06:45:00Z", 5},  // 07:45: half way up
		{"office-hours", "2026-12-02T06:46:00Z", 6},  // rounded up
		{"office-hours", "2026-12-02T07:00:00Z", 10}, // 08:00: open
		{"office-hours", "2026-12-02T16:59:59Z", 10},
		{"office-hours", "2026-12-02T17:00:00Z", 10}, // 18:00: the ramp down starts at the full floor
		{"office-hours", "2026-12-02T17:30:00Z", 5},
		{"office-hours", "2026-12-02T18:00:00Z", 0},
		{"office-hours", "2026-12-05T10:00:00Z", 0}, // Saturday
		{"office-hours", "2026-12-07T06:45:00Z", 5}, // Monday's ramp, after a weekend
		// Summer time: 08:00 Paris is 06:00 UTC.
		{"office-hours", "2026-07-01T06:00:00Z", 10},
		{"office-hours", "2026-07-01T05:59:00Z", 10}, // ramping, ceil(10×29/30)
		// Overnight, UTC.
		{"night-batch", "2026-12-02T21:59:59Z", 0},
		{"night-batch", "2026-12-02T22:00:00Z", 4},
		{"night-batch", "2026-12-03T01:59:00Z", 4},
		{"night-batch", "2026-12-03T02:00:00Z", 0},
		// One-off and repeating windows: the higher floor.
		{"black-friday", "2026-11-27T15:00:00Z", 50},
		{"black-friday", "2026-11-28T05:00:00Z", 0}, // 00:00 New York: the one-off ended
		{"black-friday", "2026-12-04T15:00:00Z", 5}, // a later Friday, 10:00 New York
	}
	for _, tt := range tests {
		t.Run(tt.schedule+"@"+tt.at, func(t *testing.T) {
			if got := set.Get(tt.schedule).Value(at(tt.at)); got != tt.want {
				t.Errorf("Value = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"unknown key", "schedules:\n- name: a\n  window: []\n", "s.yaml: yaml: unmarshal errors:\n  line 3: field window not found in type schedule.schedule"},
		{"every problem with its line", `schedules:
- name: 9lives
  timezone: Mars/Olympus
  windows:
  - days: [Mon, Funday]
    start: "8:00"
    end: "18:00"
    replicas: 0
    rampUp: 25h
- name: one-off
  windows:
  - startTime: 2026-12-24T18:00:00+01:00
    endTime: 2026-12-24T17:00:00+01:00
    start: "10:00"
  - startTime: yesterday
- name: one-off
`, `s.yaml:2: schedules[0].name: Invalid value: "9lives": an external metric name: letters, digits, _ : . - (not starting with a digit)
s.yaml:3: schedules[0].timezone: Invalid value: "Mars/Olympus": not an IANA timezone (e.g. Europe/Paris, UTC)
s.yaml:8: schedules[0].windows[0].replicas: Invalid value: 0: must be at least 1
s.yaml:9: schedules[0].windows[0].rampUp: Invalid value: "25h": must be within 0 and 24h
s.yaml:6: schedules[0].windows[0].start: Invalid value: "8:00": a local time of day HH:MM (00:00 to 23:59)
s.yaml:5: schedules[0].windows[0].days[1]: Unsupported value: "Funday": supported values: "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"
s.yaml:12: schedules[1].windows[0].replicas: Required value: the floor inside the window
s.yaml:12: schedules[1].windows[0]: Forbidden: either startTime/endTime (one-off) or days/start/end (repeating), not both
s.yaml:15: schedules[1].windows[1].replicas: Required value: the floor inside the window
s.yaml:15: schedules[1].windows[1].startTime: Invalid value: "yesterday": not an RFC 3339 time, e.g. 2026-12-24T18:00:00+01:00
s.yaml:15: schedules[1].windows[1].endTime: Required value: an RFC 3339 time, e.g. 2026-12-24T18:00:00+01:00
s.yaml:16: schedules[2].name: Duplicate value: "one-off"
s.yaml:16: schedules[2].windows: Required value: at least one window`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(tt.in))
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// nextProvider answers every external metric with nothing and lists one.
type nextProvider struct{ asked []string }

func (n *nextProvider) GetExternalMetric(_ context.Context, _ string, _ labels.Selector, info cmprovider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	n.asked = append(n.asked, info.Metric)
	return &external_metrics.ExternalMetricValueList{}, nil
}

func (n *nextProvider) ListAllExternalMetrics() []cmprovider.ExternalMetricInfo {
	return []cmprovider.ExternalMetricInfo{{Metric: "queue_messages"}}
}

func TestExternal(t *testing.T) {
	next := &nextProvider{}
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC) // 08:00 in Paris
	e := &External{Next: next, Set: load(t), Clock: clocktesting.NewFakePassiveClock(now)}
	ctx := context.Background()
	got, err := e.GetExternalMetric(ctx, "shop", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "office-hours"})
	if err != nil || len(got.Items) != 1 || got.Items[0].Value.Value() != 10 || got.Items[0].MetricLabels["schedule"] != "office-hours" {
		t.Errorf("office-hours in shop: %+v, %v", got, err)
	}
	if _, err := e.GetExternalMetric(ctx, "web", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "office-hours"}); err == nil {
		t.Error("office-hours served to namespace web, which it does not list")
	}
	if _, err := e.GetExternalMetric(ctx, "web", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "queue_messages"}); err != nil || len(next.asked) != 1 {
		t.Errorf("queue_messages not passed on: %v, asked %v", err, next.asked)
	}
	var names []string
	for _, m := range e.ListAllExternalMetrics() {
		names = append(names, m.Metric)
	}
	if diff := cmp.Diff([]string{"black-friday", "night-batch", "office-hours", "queue_messages"}, names); diff != "" {
		t.Errorf("ListAllExternalMetrics (-want +got):\n%s", diff)
	}
}

// FuzzParse: any file parses or errors, never panics; a parsed schedule
// evaluates at any time to a floor within 0 and its windows' highest.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("testdata/schedules.yaml"); err == nil {
		f.Add(data, int64(0))
	}
	f.Add([]byte("schedules:\n- name: a\n  windows: [{start: '23:59', end: '00:00', replicas: 2, rampDown: 24h}]\n"), int64(1798761600))
	f.Fuzz(func(t *testing.T, data []byte, unix int64) {
		set, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		for _, n := range set.Names() {
			s := set.Get(n)
			var top int32
			for _, w := range s.Windows {
				top = max(top, w.Replicas)
			}
			if v := s.Value(time.Unix(unix%(1<<40), 0)); v < 0 || v > top {
				t.Fatalf("schedule %s: value %d outside 0..%d", n, v, top)
			}
		}
	})
}
