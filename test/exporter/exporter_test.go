package exporter

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestWriteText(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	tests := []struct {
		name    string
		set     []Series
		advance time.Duration
		want    string
	}{
		{
			name: "fpm gauges sorted with one TYPE line",
			set: []Series{
				{Name: "pm_status", Labels: map[string]string{"namespace": "abtest", "pod_name": "b", "state": "active processes"}, Value: 3},
				{Name: "pm_status", Labels: map[string]string{"namespace": "abtest", "pod_name": "a", "state": "active processes"}, Value: 1.5},
			},
			want: "# TYPE pm_status gauge\n" +
				`pm_status{namespace="abtest",pod_name="a",state="active processes"} 1.5` + "\n" +
				`pm_status{namespace="abtest",pod_name="b",state="active processes"} 3` + "\n",
		},
		{
			name:    "counter grows at its rate",
			set:     []Series{{Name: "http_requests_total", Type: Counter, Labels: map[string]string{"route": "/"}, Value: 10, Rate: 2.5}},
			advance: 4 * time.Second,
			want:    "# TYPE http_requests_total counter\nhttp_requests_total{route=\"/\"} 20\n",
		},
		{
			name: "label values escaped",
			set:  []Series{{Name: "m", Labels: map[string]string{"l": "a\"b\\c\nd"}, Value: 1}},
			want: "# TYPE m gauge\nm{l=\"a\\\"b\\\\c\\nd\"} 1\n",
		},
		{
			name: "no labels",
			set:  []Series{{Name: "up_value", Value: -2}},
			want: "# TYPE up_value gauge\nup_value -2\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk.t = time.Unix(1000, 0)
			x := New(clk.now)
			if err := x.Set(tc.set...); err != nil {
				t.Fatal(err)
			}
			clk.t = clk.t.Add(tc.advance)
			var b strings.Builder
			if err := x.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("exposition (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetRejects(t *testing.T) {
	tests := []struct {
		name string
		s    Series
		want string
	}{
		{name: "bad metric name", s: Series{Name: "1abc"}, want: `invalid metric name "1abc"`},
		{name: "bad label", s: Series{Name: "m", Labels: map[string]string{"a-b": "x"}}, want: `invalid label name "a-b"`},
		{name: "reserved label", s: Series{Name: "m", Labels: map[string]string{"__name__": "x"}}, want: `invalid label name "__name__"`},
		{name: "bad type", s: Series{Name: "m", Type: "summary"}, want: `type "summary"`},
		{name: "decreasing counter", s: Series{Name: "m", Type: Counter, Rate: -1}, want: "cannot decrease"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := New(nil).Set(tc.s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Set(%+v) error = %v, want one containing %q", tc.s, err, tc.want)
			}
		})
	}
}

func TestCounterRateChangeKeepsValue(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	x := New(clk.now)
	l := map[string]string{"a": "b"}
	if err := x.SetCounterRate("c_total", l, 1); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(10 * time.Second)
	if err := x.SetCounterRate("c_total", l, 5); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(2 * time.Second)
	got := x.Snapshot()
	if len(got) != 1 || got[0].Value != 20 {
		t.Fatalf("snapshot = %+v, want one series at 20 (10 at rate 1, then 10 at rate 5)", got)
	}
}

func TestHTTP(t *testing.T) {
	x := New(nil)
	srv := httptest.NewServer(x)
	defer srv.Close()
	post := func(method, body string) int {
		req, _ := http.NewRequest(method, srv.URL+"/series", strings.NewReader(body))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(http.MethodPost, `[{"name":"pm_status","labels":{"pod_name":"a"},"value":4}]`); code != http.StatusOK {
		t.Fatalf("POST = %d", code)
	}
	if code := post(http.MethodPost, `[{"name":"pm_status","bogus":1}]`); code != http.StatusBadRequest {
		t.Fatalf("POST with unknown field = %d, want 400", code)
	}
	if diff := cmp.Diff([]Series{{Name: "pm_status", Type: Gauge, Labels: map[string]string{"pod_name": "a"}, Value: 4}}, x.Snapshot()); diff != "" {
		t.Errorf("after POST (-want +got):\n%s", diff)
	}
	if code := post(http.MethodDelete, `[{"name":"pm_status","labels":{"pod_name":"a"}}]`); code != http.StatusOK {
		t.Fatalf("DELETE = %d", code)
	}
	if n := len(x.Snapshot()); n != 0 {
		t.Errorf("after DELETE: %d series left", n)
	}
	resp, err := srv.Client().Get(srv.URL + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope = %d, want 404", resp.StatusCode)
	}
}

func TestFPM(t *testing.T) {
	x := New(nil)
	if err := x.FPM("ns", "p", 2, 8); err != nil {
		t.Fatal(err)
	}
	if n := len(x.Snapshot()); n != 2 {
		t.Fatalf("FPM made %d series, want 2", n)
	}
	x.DeleteFPM("ns", "p")
	if n := len(x.Snapshot()); n != 0 {
		t.Fatalf("DeleteFPM left %d series", n)
	}
}
