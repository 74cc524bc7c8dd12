package promclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/metrics"
)

// The maximum sample age in force (the call's, else the backend's) is sent
// as lookback_delta, and samples the answer stamps older than it are
// dropped and counted; a call without one sends and drops nothing.
func TestMaxSampleAge(t *testing.T) {
	now := time.Unix(1700000100, 0)
	// One fresh sample (stamped now) and one stamped 90s before.
	body := fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[`+
		`{"metric":{"pod":"fresh"},"value":[%d,"1"]},{"metric":{"pod":"old"},"value":[%d,"2"]}]}}`, now.Unix(), now.Unix()-90)
	for _, tc := range []struct {
		name        string
		backendAge  time.Duration
		callAge     time.Duration
		wantLookbac string
		wantPods    []string
		wantDropped float64
	}{
		{name: "off", wantPods: []string{"fresh", "old"}},
		{name: "backend's", backendAge: time.Minute, wantLookbac: "60", wantPods: []string{"fresh"}, wantDropped: 1},
		{name: "call's over the backend's", backendAge: time.Minute, callAge: 2 * time.Minute, wantLookbac: "120", wantPods: []string{"fresh", "old"}},
		{name: "call's alone", callAge: 30 * time.Second, wantLookbac: "30", wantPods: []string{"fresh"}, wantDropped: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProm(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, body)
			})
			m := metrics.New()
			c := newTestClient(t, Config{Address: f.URL, Metrics: m, MaxSampleAge: tc.backendAge, Clock: clocktesting.NewFakePassiveClock(now)})
			smps, err := c.QuerySamples(WithMaxSampleAge(context.Background(), tc.callAge), "q", time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			var pods []string
			for _, s := range smps {
				v, _ := s.Labels.Get("pod")
				pods = append(pods, v)
			}
			if d := cmp.Diff(tc.wantPods, pods); d != "" {
				t.Errorf("samples (-want +got):\n%s", d)
			}
			if got := f.requests()[0].Form.Get("lookback_delta"); got != tc.wantLookbac {
				t.Errorf("lookback_delta=%q, want %q", got, tc.wantLookbac)
			}
			wantMax := ""
			if tc.wantLookbac != "" {
				wantMax = tc.wantLookbac + "000ms"
			}
			if got := f.requests()[0].Form.Get("max_lookback"); got != wantMax {
				t.Errorf("max_lookback=%q, want %q", got, wantMax)
			}
			if got := testutil.ToFloat64(m.StaleSamplesDropped.WithLabelValues(DefaultBackendName)); got != tc.wantDropped {
				t.Errorf("stale samples dropped %v, want %v", got, tc.wantDropped)
			}
		})
	}
}

// The same query with another maximum age is another call: neither
// coalesced nor cached with it.
func TestMaxSampleAgeIsPartOfTheKey(t *testing.T) {
	f := newFakeProm(t, nil)
	c := newTestClient(t, Config{Address: f.URL, CacheTTL: time.Minute})
	ctx := context.Background()
	for _, age := range []time.Duration{0, time.Minute, time.Minute, 0} {
		if _, err := c.QuerySamples(WithMaxSampleAge(ctx, age), "q", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, r := range f.requests() {
		got = append(got, r.Form.Get("lookback_delta"))
	}
	if d := cmp.Diff([]string{"", "60"}, got); d != "" {
		t.Errorf("lookback_delta of the requests sent (-want +got):\n%s", d)
	}
}

// The backends file's max_sample_age and the flag set the backend's, its
// gauge reports it.
func TestMaxSampleAgeConfig(t *testing.T) {
	o := NewOptions()
	o.Default.URL = "http://prom:9090"
	o.Default.MaxSampleAge = 2 * time.Minute
	def, err := o.Backend()
	if err != nil {
		t.Fatal(err)
	}
	bs, err := ParseBackends([]byte("backends:\n- name: a\n  url: http://a:9090\n- name: b\n  url: http://b:9090\n  max_sample_age: 30s\n"), "b.yaml", def)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	set, err := NewBackends(append([]Backend{def}, bs...), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for _, c := range set.Clients() {
		got = append(got, c.MaxSampleAge())
	}
	if d := cmp.Diff([]time.Duration{2 * time.Minute, 2 * time.Minute, 30 * time.Second}, got); d != "" {
		t.Errorf("max sample ages, default then by name (-want +got):\n%s", d)
	}
	if g := testutil.ToFloat64(m.PrometheusMaxSampleAge.WithLabelValues("b")); g != 30 {
		t.Errorf("gauge of b = %v, want 30", g)
	}
	if _, err := ParseBackends([]byte("backends:\n- name: a\n  url: http://a:9090\n  max_sample_age: soon\n"), "b.yaml", def); err == nil {
		t.Error("max_sample_age: soon accepted")
	}
}
