//go:build e2eengines

// Package engines runs the adapter end to end against the
// Prometheus-compatible engines: Thanos (two Prometheus servers with
// sidecars, a querier deduplicating them), VictoriaMetrics single-node and
// Cortex (single binary, two tenants by X-Scope-OrgID), each built by
// hack/tools.sh from the Go module proxy in its own tools module. Against
// each: the rules (custom and external metrics, values checked against the
// data written), every discovery strategy, `adapter explain --run`, the
// resource metrics API and the maximum sample age.
//
// The engines take minutes to build (docs/e2e.md), so this suite has its
// own build tag and make target: `make e2e-engines`; `make e2e` and `make
// test` do not run it.
package engines

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// API paths.
const (
	cmV1beta2 = "/apis/custom.metrics.k8s.io/v1beta2"
	emV1beta1 = "/apis/external.metrics.k8s.io/v1beta1"
	rmV1beta1 = "/apis/metrics.k8s.io/v1beta1"
)

// ctxFor returns a context that ends at the test's deadline (minus a margin
// for cleanup) or after max, whichever is first.
func ctxFor(t *testing.T, max time.Duration) context.Context {
	t.Helper()
	deadline := time.Now().Add(max)
	if d, ok := t.Deadline(); ok && d.Add(-30*time.Second).Before(deadline) {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// requireTool fails the test, saying how to build it, when a binary of
// the tools dir is missing.
func requireTool(t *testing.T, env *framework.Env, name string) string {
	t.Helper()
	bin := env.Tool(name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (run `hack/tools.sh engines`, or `make e2e-engines`)", name, err)
	}
	return bin
}

// serveExporter serves a fresh test exporter on 127.0.0.1 for the test's duration.
func serveExporter(t *testing.T) (*exporter.Exporter, string) {
	t.Helper()
	x := exporter.New(nil)
	addr, stop, err := x.Serve()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return x, addr
}

// eventually polls f every 500ms until it returns nil or timeout passes,
// then fails the test with f's last error.
func eventually(t *testing.T, ctx context.Context, timeout time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = f(ctx); err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not true after %s: %v", what, timeout, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// apiAnswer is the outcome of one GET through the aggregator.
type apiAnswer struct {
	body []byte
	code int
	err  error
}

func getAnswer(ctx context.Context, env *framework.Env, path string) apiAnswer {
	res := env.Client.Discovery().RESTClient().Get().RequestURI(path).Do(ctx)
	var a apiAnswer
	res.StatusCode(&a.code)
	a.body, a.err = res.Raw()
	return a
}

// decodeAnswer decodes a's body into a T, or returns a's error.
func decodeAnswer[T any](a apiAnswer) (*T, error) {
	if a.err != nil {
		return nil, fmt.Errorf("HTTP %d: %w", a.code, a.err)
	}
	var v T
	if err := json.Unmarshal(a.body, &v); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", a.body, err)
	}
	return &v, nil
}

// customValues reads a v1beta2 custom metrics list of pods in namespace
// into pod name -> quantity text.
func customValues(ctx context.Context, env *framework.Env, ns, metric, selector string) (map[string]string, error) {
	path := cmV1beta2 + "/namespaces/" + ns + "/pods/*/" + metric + "?labelSelector=" + url.QueryEscape(selector)
	list, err := decodeAnswer[cmv1beta2.MetricValueList](getAnswer(ctx, env, path))
	if err != nil {
		return nil, err
	}
	got := map[string]string{}
	for _, it := range list.Items {
		o := it.DescribedObject
		if it.Metric.Name != metric || o.Kind != "Pod" || o.Namespace != ns {
			return nil, fmt.Errorf("item %s/%s %s (%s): want metric %s of a pod of %s", o.Namespace, o.Name, it.Metric.Name, o.Kind, metric, ns)
		}
		got[o.Name] = it.Value.String()
	}
	return got, nil
}

// externalValues reads an external metric of namespace ns into item labels
// (selector syntax, "" for none) -> quantity text.
func externalValues(ctx context.Context, env *framework.Env, ns, metric string) (map[string]string, error) {
	list, err := decodeAnswer[emv1beta1.ExternalMetricValueList](getAnswer(ctx, env, emV1beta1+"/namespaces/"+ns+"/"+metric))
	if err != nil {
		return nil, err
	}
	got := map[string]string{}
	for _, it := range list.Items {
		if it.MetricName != metric {
			return nil, fmt.Errorf("item of metric %s, want %s", it.MetricName, metric)
		}
		got[labels.Set(it.MetricLabels).String()] = it.Value.String()
	}
	return got, nil
}

// listed returns the resource names an API group-version lists (its
// discovery document: the metrics discovery found).
func listed(ctx context.Context, env *framework.Env, gvPath string) ([]string, error) {
	list, err := decodeAnswer[metav1.APIResourceList](getAnswer(ctx, env, gvPath))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.APIResources))
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	return names, nil
}

// sameQuantity compares quantity texts by value ("1500m" == "1.5").
var sameQuantity = cmp.Comparer(func(a, b string) bool {
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return qa.Cmp(qb) == 0
})

// diffValues is nil when got holds exactly the values of want.
func diffValues(want, got map[string]string) error {
	if diff := cmp.Diff(want, got, sameQuantity); diff != "" {
		return fmt.Errorf("values (-want +got):\n%s", diff)
	}
	return nil
}

// writeFile writes data to name in the test's temporary directory.
func writeFile(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// logLines returns the lines of a process log containing s.
func logLines(p *framework.Process, s string) []string {
	data, err := os.ReadFile(p.LogFile)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}
