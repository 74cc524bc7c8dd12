package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestGet(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fromvcs"}}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, tc := range []struct {
		name   string
		v, rev string
		read   func() (*debug.BuildInfo, bool)
		want   Info
	}{
		{"stamped", "v1.2.3-4-gabc", "abc", vcs, Info{"v1.2.3-4-gabc", "abc", runtime.Version(), platform}},
		{"revision from the toolchain", "", "", vcs, Info{"devel", "fromvcs", runtime.Version(), platform}},
		{"nothing known", "", "", none, Info{"devel", "unknown", runtime.Version(), platform}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, get(tc.v, tc.rev, tc.read)); diff != "" {
				t.Errorf("get (-want +got):\n%s", diff)
			}
		})
	}
}

func TestString(t *testing.T) {
	got := Info{"v1.0.0", "abc", "go1.26.8", "linux/arm64"}.String()
	if want := "v1.0.0 (revision abc, go1.26.8, linux/arm64)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestBuildInfoMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector())
	i := Get()
	want := `
# HELP promscaler_build_info A metric with a constant '1' value labelled by the version, revision, Go version and platform promscaler was built from.
# TYPE promscaler_build_info gauge
promscaler_build_info{goversion="` + i.GoVersion + `",platform="` + i.Platform + `",revision="` + i.Revision + `",version="` + i.Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "promscaler_build_info"); err != nil {
		t.Error(err)
	}
}
