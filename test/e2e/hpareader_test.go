//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// hpaReader reads, once a second, every External and Object metric of
// every HPA of every namespace through the aggregator, with the selector the
// HPA gives, as kube-controller-manager's HPA controller does: HPAs that
// appear or go away during a hand-over are picked up at the next second.
type hpaReader struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	total  int
	perHPA map[string]int
	failed []string
}

func startHPAReader(ctx context.Context, env *framework.Env) *hpaReader {
	ctx, cancel := context.WithCancel(ctx)
	r := &hpaReader{cancel: cancel, perHPA: map[string]int{}}
	r.wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			r.readAll(ctx, env)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return r
}

// readAll reads every metric of every HPA once.
func (r *hpaReader) readAll(ctx context.Context, env *framework.Env) {
	list, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers("").List(ctx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			r.record("", "listing HPAs: "+err.Error())
		}
		return
	}
	for _, h := range list.Items {
		for _, m := range h.Spec.Metrics {
			path, ok := hpaMetricPath(h.Namespace, m)
			if !ok {
				continue
			}
			a := getAnswer(ctx, env, path)
			if ctx.Err() != nil {
				return
			}
			msg := ""
			if a.err != nil {
				msg = fmt.Sprintf("%s HTTP %d: %s", path, a.code, a.body)
			}
			r.record(h.Namespace+"/"+h.Name, msg)
		}
	}
}

func (r *hpaReader) record(hpa, failure string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	r.perHPA[hpa]++
	if failure != "" {
		r.failed = append(r.failed, fmt.Sprintf("%s %s: %s", time.Now().UTC().Format("15:04:05.000"), hpa, failure))
	}
}

// stop ends the reads and returns the number of reads, the failed ones and
// the reads per HPA ("HPA=N, ...").
func (r *hpaReader) stop() (int, []string, string) {
	r.cancel()
	r.wg.Wait()
	var per []string
	for _, h := range slices.Sorted(maps.Keys(r.perHPA)) {
		per = append(per, fmt.Sprintf("%s=%d", h, r.perHPA[h]))
	}
	return r.total, r.failed, strings.Join(per, ", ")
}

// hpaMetricPath is the metrics API path the HPA controller reads for m:
// External metrics with their selector, Object metrics through
// custom.metrics.k8s.io v1beta2 (resource = lower-case kind + "s", enough
// for the kinds these tests use). Other metric types are not read.
func hpaMetricPath(ns string, m autoscalingv2.MetricSpec) (string, bool) {
	var path, param string
	var selector *metav1.LabelSelector
	switch {
	case m.External != nil:
		path = emV1beta1 + "/namespaces/" + ns + "/" + m.External.Metric.Name
		param, selector = "labelSelector", m.External.Metric.Selector
	case m.Object != nil:
		o := m.Object.DescribedObject
		path = cmV1beta2 + "/namespaces/" + ns + "/" + strings.ToLower(o.Kind) + "s/" + o.Name + "/" + m.Object.Metric.Name
		param, selector = "metricLabelSelector", m.Object.Metric.Selector
	default:
		return "", false
	}
	if selector != nil {
		if s, err := metav1.LabelSelectorAsSelector(selector); err == nil && !s.Empty() {
			path += "?" + param + "=" + url.QueryEscape(s.String())
		}
	}
	return path, true
}

// wantServedBy checks the X-Promscaler-Served-By header of a successful
// answer through the aggregator.
func wantServedBy(ctx context.Context, env *framework.Env, path, want string) error {
	hc, err := rest.HTTPClientFor(env.RESTConfig)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.APIServerURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Promscaler-Served-By"); resp.StatusCode != http.StatusOK || got != want {
		return fmt.Errorf("%s: HTTP %d served by %q, want 200 served by %q", path, resp.StatusCode, got, want)
	}
	return nil
}
