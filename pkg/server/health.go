package server

import (
	"net/http"
	"strings"

	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// healthPaths are the endpoints of the liveness and readiness probes; a
// check of one (e.g. /readyz/metrics-discovery) is below its path.
var healthPaths = []string{"/livez", "/readyz", "/healthz"}

// isHealthPath reports whether path is a health endpoint or one of its
// checks.
func isHealthPath(path string) bool {
	for _, p := range healthPaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// exemptHealthFromInFlightLimit keeps the health endpoints out of the
// generic API server's in-flight limit (--max-requests-inflight), which
// metric requests waiting on a stalled Prometheus can fill: a probe then
// answered 429, and the kubelet restarted the adapter for Prometheus's
// fault. The library's hook for requests the limit does not count is
// LongRunningFunc; the health endpoints are answered from state in memory
// (no check does I/O), so they need neither a slot nor the request timeout
// that long-running requests also skip. Authentication, authorization and
// the rest of the chain still apply.
func exemptHealthFromInFlightLimit(gc *genericapiserver.Config) {
	next := gc.LongRunningFunc
	gc.LongRunningFunc = func(r *http.Request, ri *apirequest.RequestInfo) bool {
		if isHealthPath(r.URL.Path) {
			return true
		}
		return next != nil && next(r, ri)
	}
}
