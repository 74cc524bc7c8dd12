//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cmv1beta1 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta1"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/google/go-cmp/cmp"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// getRaw is `kubectl get --raw path` through the admin client.
func getRaw(ctx context.Context, env *framework.Env, path string) ([]byte, error) {
	body, err := env.Client.Discovery().RESTClient().Get().RequestURI(path).DoRaw(ctx)
	if err != nil && len(body) > 0 {
		// The discovery client does not decode an aggregated API's Status:
		// keep the adapter's reason in the error.
		return body, fmt.Errorf("%w: %s", err, bytes.TrimSpace(body))
	}
	return body, err
}

// getJSON is getRaw decoding the answer into a T; it returns the answer too.
func getJSON[T any](ctx context.Context, env *framework.Env, path string) (*T, []byte, error) {
	body, err := getRaw(ctx, env, path)
	if err != nil {
		return nil, body, err
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, body, fmt.Errorf("decoding %s: %w", body, err)
	}
	return &v, body, nil
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

func resourceNames(body []byte) ([]string, error) {
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decoding APIResourceList: %w", err)
	}
	names := make([]string, 0, len(list.APIResources))
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	return names, nil
}

func containsAll(have, want []string) error {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	var missing []string
	for _, w := range want {
		if !set[w] {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %v in %v", missing, have)
	}
	return nil
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// startMetricsStack starts the control plane, Prometheus scraping a test
// exporter, and the adapter with testdata/metrics-config.yaml.
func startMetricsStack(t *testing.T) (*framework.Env, *exporter.Exporter, *framework.Adapter) {
	t.Helper()
	env, x, prom := startStack(t)
	requireAdapter(t, env)
	a := env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: testdata("metrics-config.yaml"), PrometheusURL: prom.URL})
	return env, x, a
}

// TestMetricsAPIs covers the metric lists (discovery), the seed fpm rule per
// pod through v1beta1 and v1beta2, an Object metric on a Service, and an
// external metric filtered by an HPA-style labelSelector.
func TestMetricsAPIs(t *testing.T) {
	env, x, _ := startMetricsStack(t)
	ctx := ctxFor(t, 5*time.Minute)
	const ns = "fpm"
	if err := env.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"fpm-a": 0.25, "fpm-b": 0.5, "fpm-c": 0.75}
	for pod, ratio := range want {
		if err := x.FPM(ns, pod, ratio*8, 8); err != nil {
			t.Fatal(err)
		}
	}
	// A pod of another namespace, which must not show up.
	if err := x.FPM("other", "fpm-a", 8, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CreateReadyPods(ctx, ns, map[string]string{"app": "fpm"}, time.Minute, 50*time.Second, "fpm-a", "fpm-b", "fpm-c"); err != nil {
		t.Fatal(err)
	}
	for _, rate := range []struct {
		labels map[string]string
		rate   float64
	}{
		{map[string]string{"namespace": ns, "service": "frontend", "method": "GET"}, 20},
		{map[string]string{"namespace": ns, "service": "frontend", "method": "POST"}, 5},
		{map[string]string{"namespace": ns, "service": "backend", "method": "GET"}, 100},
	} {
		if err := x.SetCounterRate("http_requests_total", rate.labels, rate.rate); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Set(exporter.Series{Name: "queue_messages_ready", Labels: map[string]string{"queue": "orders"}, Value: 42}); err != nil {
		t.Fatal(err)
	}

	t.Run("discovery lists", func(t *testing.T) {
		for _, gv := range []string{"/apis/custom.metrics.k8s.io/v1beta2", "/apis/custom.metrics.k8s.io/v1beta1"} {
			eventually(t, ctx, 60*time.Second, gv+" lists the metrics", func(ctx context.Context) error {
				body, err := getRaw(ctx, env, gv)
				if err != nil {
					return err
				}
				names, err := resourceNames(body)
				if err != nil {
					return err
				}
				return containsAll(names, []string{"pods/fpm_active_rate", "namespaces/fpm_active_rate",
					"services/http_requests_per_second", "namespaces/http_requests_per_second"})
			})
		}
		eventually(t, ctx, 60*time.Second, "external.metrics.k8s.io lists the metrics", func(ctx context.Context) error {
			body, err := getRaw(ctx, env, "/apis/external.metrics.k8s.io/v1beta1")
			if err != nil {
				return err
			}
			names, err := resourceNames(body)
			if err != nil {
				return err
			}
			return containsAll(names, []string{"http_requests_per_second", "queue_messages_ready"})
		})
	})

	t.Run("fpm_active_rate per pod v1beta2", func(t *testing.T) {
		eventually(t, ctx, 60*time.Second, "each pod's ratio", func(ctx context.Context) error {
			list, _, err := getJSON[cmv1beta2.MetricValueList](ctx, env, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/pods/*/fpm_active_rate")
			if err != nil {
				return err
			}
			got := map[string]float64{}
			for _, it := range list.Items {
				if it.DescribedObject.Kind != "Pod" || it.DescribedObject.Namespace != ns || it.Metric.Name != "fpm_active_rate" {
					return fmt.Errorf("unexpected item %+v", it)
				}
				got[it.DescribedObject.Name] = it.Value.AsApproximateFloat64()
			}
			return compareValues(want, got, 0.002)
		})
	})

	t.Run("fpm_active_rate per pod v1beta1 and by name", func(t *testing.T) {
		eventually(t, ctx, 30*time.Second, "v1beta1 ratio of fpm-b", func(ctx context.Context) error {
			list, body, err := getJSON[cmv1beta1.MetricValueList](ctx, env, "/apis/custom.metrics.k8s.io/v1beta1/namespaces/"+ns+"/pods/fpm-b/fpm_active_rate")
			if err != nil {
				return err
			}
			if len(list.Items) != 1 || list.Items[0].MetricName != "fpm_active_rate" || list.Items[0].DescribedObject.Name != "fpm-b" {
				return fmt.Errorf("want one fpm-b item, got %s", body)
			}
			if v := list.Items[0].Value.AsApproximateFloat64(); !near(v, 0.5, 0.002) {
				return fmt.Errorf("fpm-b = %g, want 0.5", v)
			}
			return nil
		})
	})

	t.Run("object metric on a service", func(t *testing.T) {
		eventually(t, ctx, 60*time.Second, "frontend requests per second", func(ctx context.Context) error {
			list, body, err := getJSON[cmv1beta2.MetricValueList](ctx, env, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/services/frontend/http_requests_per_second")
			if err != nil {
				return err
			}
			if len(list.Items) != 1 {
				return fmt.Errorf("want one item, got %s", body)
			}
			if v := list.Items[0].Value.AsApproximateFloat64(); !near(v, 25, 2.5) {
				return fmt.Errorf("frontend = %g/s, want 25/s (20 GET + 5 POST)", v)
			}
			return nil
		})
	})

	t.Run("external metric with labelSelector", func(t *testing.T) {
		sel := url.QueryEscape("service=frontend")
		eventually(t, ctx, 60*time.Second, "only frontend series", func(ctx context.Context) error {
			list, _, err := getJSON[emv1beta1.ExternalMetricValueList](ctx, env, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/http_requests_per_second?labelSelector="+sel)
			if err != nil {
				return err
			}
			got := map[string]float64{}
			for _, it := range list.Items {
				if it.MetricName != "http_requests_per_second" || it.MetricLabels["service"] != "frontend" {
					return fmt.Errorf("unexpected item %+v", it)
				}
				got[it.MetricLabels["method"]] = it.Value.AsApproximateFloat64()
			}
			return compareValues(map[string]float64{"GET": 20, "POST": 5}, got, 2)
		})
		eventually(t, ctx, 30*time.Second, "a set-based selector", func(ctx context.Context) error {
			body, err := getRaw(ctx, env, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/http_requests_per_second?labelSelector="+
				url.QueryEscape("service in (backend),method!=POST"))
			if err != nil {
				return err
			}
			var list emv1beta1.ExternalMetricValueList
			if err := json.Unmarshal(body, &list); err != nil {
				return fmt.Errorf("decoding %s: %w", body, err)
			}
			if len(list.Items) != 1 || list.Items[0].MetricLabels["service"] != "backend" || !near(list.Items[0].Value.AsApproximateFloat64(), 100, 10) {
				return fmt.Errorf("want one backend item at 100/s, got %s", body)
			}
			return nil
		})
	})

	t.Run("external metric not namespaced", func(t *testing.T) {
		eventually(t, ctx, 30*time.Second, "queue depth", func(ctx context.Context) error {
			list, body, err := getJSON[emv1beta1.ExternalMetricValueList](ctx, env, "/apis/external.metrics.k8s.io/v1beta1/namespaces/anywhere/queue_messages_ready?labelSelector=queue%3Dorders")
			if err != nil {
				return err
			}
			if len(list.Items) != 1 || list.Items[0].Value.AsApproximateFloat64() != 42 {
				return fmt.Errorf("want one item at 42, got %s", body)
			}
			return nil
		})
	})

	t.Run("kubectl get --raw", func(t *testing.T) {
		out, err := env.Kubectl(ctx, "get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/pods/*/fpm_active_rate")
		if err != nil {
			t.Fatal(err)
		}
		for pod := range want {
			if !strings.Contains(out, `"name":"`+pod+`"`) {
				t.Errorf("kubectl output lacks pod %s:\n%s", pod, out)
			}
		}
	})
}

func compareValues(want, got map[string]float64, tol float64) error {
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return near(a, b, tol) })); diff != "" {
		return fmt.Errorf("values (-want +got):\n%s", diff)
	}
	return nil
}
