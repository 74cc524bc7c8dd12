package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/reload"
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

// Readiness probing of the kube-apiserver: how often and how long.
const (
	apiServerProbeInterval = 10 * time.Second
	apiServerProbeTimeout  = 5 * time.Second
)

// apiServerReachability is the readiness check "kube-apiserver": whether
// the last probe of the cluster's API server got an answer. The probe runs
// in the background (run), so /readyz itself never waits for the network.
type apiServerReachability struct {
	probe func(ctx context.Context) error

	mu      sync.Mutex
	checked bool
	err     error
}

// newAPIServerReachability probes GET /version on the API server of cfg
// (the adapter's own credentials; /version is readable by every client,
// system:public-info-viewer). Any answer below 500 means reachable.
func newAPIServerReachability(cfg *rest.Config) (*apiServerReachability, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the kube-apiserver readiness probe: %w", err)
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/version"
	if !strings.Contains(cfg.Host, "://") {
		url = "https://" + url
	}
	return &apiServerReachability{probe: func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			return fmt.Errorf("GET /version answered %s", resp.Status)
		}
		return nil
	}}, nil
}

// probeOnce probes and records the result.
func (a *apiServerReachability) probeOnce(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, apiServerProbeTimeout)
	defer cancel()
	err := a.probe(ctx)
	if ctx.Err() != nil && err != nil && errors.Is(err, context.Canceled) {
		return // stopping
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil && (a.err == nil || !a.checked) {
		klog.InfoS("The kube-apiserver does not answer: not ready", "err", err)
	} else if err == nil && a.err != nil {
		klog.InfoS("The kube-apiserver answers again")
	}
	a.checked, a.err = true, err
}

// run probes at start and then every interval until ctx ends.
func (a *apiServerReachability) run(ctx context.Context) {
	wait.UntilWithContext(ctx, a.probeOnce, apiServerProbeInterval)
}

// Check is the readiness check.
func (a *apiServerReachability) Check(*http.Request) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case !a.checked:
		return errors.New("the kube-apiserver has not been probed yet")
	case a.err != nil:
		return fmt.Errorf("the kube-apiserver does not answer: %w", a.err)
	}
	return nil
}

// readinessDetails are the lines withReadyzDetails adds: each Prometheus
// backend that is not answering, and each configuration file whose newest
// content is not in service. guards is asked on every call (the backends in
// service: a backends-file reload adds and removes some), as is each of
// rejected (the rules watcher's, the backends file watcher's; nil ones are
// skipped).
func readinessDetails(guards func() []*promclient.Guard, rejected ...func() []reload.Rejection) func() []string {
	return func() []string {
		var lines []string
		for _, g := range guards() {
			if st := g.Status(); !st.Up {
				lines = append(lines, st.String())
			}
		}
		for _, rej := range rejected {
			if rej == nil {
				continue
			}
			for _, r := range rej() {
				what := "configuration file " + r.File
				if r.File == "" {
					what = "configuration sources"
				}
				lines = append(lines, fmt.Sprintf("%s: not in service since %s (the previous version serves): %s",
					what, r.Since.UTC().Format(time.RFC3339), r.Err))
			}
		}
		return lines
	}
}

// frontProxyCALoaded is the readiness check "front-proxy-ca": whether the
// CA that signs the aggregator's client certificate (the requestheader
// client CA) is loaded. The library reads it from the
// extension-apiserver-authentication ConfigMap through an informer that
// syncs after the server starts listening; until then a request the
// aggregator proxies is not authenticated (401, or 403 as anonymous), and
// the aggregator's availability check marks the APIServices unavailable,
// so every HPA reading them gets 503 until its next check. A new replica
// must not take traffic in that window. With no requestheader
// configuration (authentication off, or a static file already loaded)
// the check passes.
func frontProxyCALoaded(requestHeader *authenticatorfactory.RequestHeaderConfig) healthz.HealthChecker {
	return healthz.NamedCheck("front-proxy-ca", func(*http.Request) error {
		if requestHeader == nil || requestHeader.CAContentProvider == nil {
			return nil
		}
		ca := requestHeader.CAContentProvider
		if len(ca.CurrentCABundleContent()) == 0 {
			return fmt.Errorf("the front proxy's client CA (%s) is not loaded yet: requests the aggregator proxies cannot be authenticated", ca.Name())
		}
		return nil
	})
}
