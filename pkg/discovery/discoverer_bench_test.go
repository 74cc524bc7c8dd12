package discovery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/internal/prom"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/discovery/fakeprom"
)

// benchSeries returns series for the seed rule: per pod, perPod series
// (distinct "le" values) with a dozen labels, over 50 namespaces.
func benchSeries(pods, perPod int) []model.LabelSet {
	out := make([]model.LabelSet, 0, pods*perPod)
	for p := range pods {
		for s := range perPod {
			out = append(out, model.LabelSet{
				"__name__": "pm_status", "state": "active processes",
				"namespace": model.LabelValue(fmt.Sprintf("ns-%d", p%50)), "pod_name": model.LabelValue(fmt.Sprintf("pod-%d", p)),
				"le": model.LabelValue(fmt.Sprint(s)), "instance": model.LabelValue(fmt.Sprintf("10.0.%d.%d:9253", p/250, p%250)),
				"job": "php-fpm", "container": "fpm", "node": model.LabelValue(fmt.Sprintf("node-%d", p%20)),
				"pool": "www", "scrape_pool": "kubernetes-pods", "app": "shop", "version": "v1.2.3",
			})
		}
	}
	return out
}

// BenchmarkDiscovery measures one discovery pass, Prometheus answering from
// an httptest fake, with both strategies. The grouped strategy's cost grows
// with distinct (metric, resource, namespace) combinations (pods here), the
// series strategy's with every series and label.
func BenchmarkDiscovery(b *testing.B) {
	rules := compile(b, testConfig)
	for _, size := range []struct{ pods, perPod int }{{1000, 10}, {5000, 20}} {
		series := benchSeries(size.pods, size.perPod)
		fake := fakeprom.New(series)
		client, err := prom.New(prom.Config{Address: fake.URL, HTTPClient: fake.Client(), Timeout: time.Minute, Metrics: metrics.New()})
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range []discovery.Strategy{discovery.StrategyGrouped, discovery.StrategySeries} {
			b.Run(fmt.Sprintf("%s/series=%d", st, len(series)), func(b *testing.B) {
				d, err := discovery.New(discovery.Options{Prometheus: client, Rules: rules, Interval: time.Minute, Strategy: st, Metrics: metrics.New()})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := d.RunOnce(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				if n := len(d.Index().CustomMetrics()); n != 2 {
					b.Fatalf("%d custom metrics, want 2", n)
				}
			})
		}
		fake.Close()
	}
}
