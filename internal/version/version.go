// Package version holds what a promscaler binary was built from, stamped in
// at link time:
//
//	go build -ldflags "-X github.com/promscaler/promscaler/internal/version.version=v0.3.0-4-gabc1234
//	  -X github.com/promscaler/promscaler/internal/version.revision=abc1234..."
//
// (make build and make image do this from `git describe`), and exports it as
// the promscaler_build_info metric.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set by -ldflags -X; empty when built without them.
var (
	version  string
	revision string
)

// Info is what a binary was built from.
type Info struct {
	// Version is `git describe --tags --always --dirty` at build time, or
	// "devel" when not stamped.
	Version string
	// Revision is the full commit hash (from -ldflags, else from the Go
	// toolchain's VCS stamp), or "unknown".
	Revision string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
}

// Get returns the build information of the running binary.
func Get() Info {
	return get(version, revision, debug.ReadBuildInfo)
}

func get(v, rev string, read func() (*debug.BuildInfo, bool)) Info {
	i := Info{Version: v, Revision: rev, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if i.Revision == "" {
		if bi, ok := read(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					i.Revision = s.Value
				}
			}
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	if i.Revision == "" {
		i.Revision = "unknown"
	}
	return i
}

// String is the one line `--version` prints.
func (i Info) String() string {
	return fmt.Sprintf("%s (revision %s, %s, %s)", i.Version, i.Revision, i.GoVersion, i.Platform)
}

// NewCollector returns the promscaler_build_info gauge: always 1, labelled
// with the build information, so dashboards and alerts can tell which build
// runs where.
func NewCollector() prometheus.Collector {
	i := Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "promscaler_build_info",
		Help: "A metric with a constant '1' value labelled by the version, revision, Go version and platform promscaler was built from.",
		ConstLabels: prometheus.Labels{
			"version":   i.Version,
			"revision":  i.Revision,
			"goversion": i.GoVersion,
			"platform":  i.Platform,
		},
	}, func() float64 { return 1 })
}
