package rules

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/pkg/config"
)

func TestMetricName(t *testing.T) {
	tests := []struct {
		name    string
		mapping config.NameMapping
		series  string
		want    string
		wantErr error
	}{
		{"default is the series name", config.NameMapping{}, "http_requests_total", "http_requests_total", nil},
		{"as literal", config.NameMapping{As: "fpm_active_rate"}, "pm_status", "fpm_active_rate", nil},
		{"no group defaults to $0", config.NameMapping{Matches: "^container_.*"}, "container_cpu", "container_cpu", nil},
		{"one group defaults to $1", config.NameMapping{Matches: "^(.*)_total$"}, "http_requests_total", "http_requests", nil},
		{"braced expansion", config.NameMapping{Matches: "^(.*)_total$", As: "${1}_per_second"}, "http_requests_total", "http_requests_per_second", nil},
		{"$1_x is the group named 1_x", config.NameMapping{Matches: "^(.*)_total$", As: "$1_per_second"}, "http_requests_total", "", nil},
		{"two groups with as", config.NameMapping{Matches: "^(\\w+)_(\\w+)_total$", As: "${2}_of_${1}"}, "http_requests_total", "requests_of_http", nil},
		{"named group", config.NameMapping{Matches: "^(?P<base>.*)_seconds_total$", As: "${base}_rate"}, "cpu_seconds_total", "cpu_rate", nil},
		{"unanchored match expands the match only", config.NameMapping{Matches: "requests"}, "http_requests_total", "requests", nil},
		{"no match", config.NameMapping{Matches: "^(.*)_total$"}, "up", "", ErrSeriesNameMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := compileNamer(nil, tc.mapping)
			if err != nil {
				t.Fatalf("compileNamer: %v", err)
			}
			got, err := n.metricName(tc.series)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("metricName(%q) error = %v, want %v", tc.series, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("metricName(%q) = %q, want %q", tc.series, got, tc.want)
			}
		})
	}
}

func TestSeriesFilters(t *testing.T) {
	filters := []config.RegexFilter{{IsNot: "^container_network_.*"}, {Is: "^container_"}}
	n, err := compileNamer(filters, config.NameMapping{Matches: "^(.*)_seconds_total$"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		series string
		reason string // "" = kept
	}{
		{"container_cpu_usage_seconds_total", ""},
		{"container_network_receive_seconds_total", `seriesFilters[0].isNot "^container_network_.*" matches it`},
		{"node_cpu_seconds_total", `seriesFilters[1].is "^container_" does not match it`},
		{"container_memory_bytes", `name.matches "^(.*)_seconds_total$" does not match it`},
		{"container.cpu_seconds_total", `the series name "container.cpu_seconds_total" is not a classic Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), so no query could use it`},
	}
	var all []Series
	var kept []Series
	for _, tc := range tests {
		t.Run(tc.series, func(t *testing.T) {
			if got := n.dropReason(tc.series); got != tc.reason {
				t.Errorf("dropReason(%q) = %q, want %q", tc.series, got, tc.reason)
			}
			if got := n.keeps(tc.series); got != (tc.reason == "") {
				t.Errorf("keeps(%q) = %v, want %v", tc.series, got, tc.reason == "")
			}
		})
		all = append(all, Series{Name: tc.series})
		if tc.reason == "" {
			kept = append(kept, Series{Name: tc.series})
		}
	}
	r := &Rule{namer: n}
	got := slices.DeleteFunc(all, func(s Series) bool { return !r.KeepSeries(s.Name) })
	if diff := cmp.Diff(kept, got); diff != "" {
		t.Errorf("KeepSeries mismatch (-want +got):\n%s", diff)
	}
}

func TestCompileNamerErrors(t *testing.T) {
	tests := []struct {
		name    string
		filters []config.RegexFilter
		mapping config.NameMapping
		want    []string
	}{
		{"both is and isNot", []config.RegexFilter{{Is: "a", IsNot: "b"}}, config.NameMapping{}, []string{"seriesFilters[0]: set only one of is and isNot"}},
		{"neither", []config.RegexFilter{{}}, config.NameMapping{}, []string{"seriesFilters[0]: set one of is and isNot"}},
		{"bad is", []config.RegexFilter{{Is: "("}}, config.NameMapping{}, []string{"seriesFilters[0].is: error parsing regexp"}},
		{"bad isNot", []config.RegexFilter{{Is: "a"}, {IsNot: "[z-a]"}}, config.NameMapping{}, []string{"seriesFilters[1].isNot: error parsing regexp"}},
		{"bad matches", nil, config.NameMapping{Matches: "*x"}, []string{"name.matches: error parsing regexp"}},
		{"two groups without as", nil, config.NameMapping{Matches: "(a)(b)"}, []string{"name.as: must be set when name.matches \"(a)(b)\" has 2 capture groups"}},
		{"all at once", []config.RegexFilter{{}, {Is: "("}}, config.NameMapping{Matches: "(a)(b)"}, []string{"seriesFilters[0]", "seriesFilters[1].is", "name.as"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compileNamer(tc.filters, tc.mapping)
			if err == nil {
				t.Fatal("compileNamer succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
