package discovery_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/promtest"
)

// Example shows how the server wires discovery: a Prometheus client, the
// compiled rules, the relist interval and max age, the RESTMapper's scopes
// and the adapter's metrics. Run(ctx) would loop; RunOnce runs one pass.
func Example() {
	fake := promtest.New([]model.LabelSet{
		{"__name__": "pm_status", "namespace": "abtest", "pod_name": "a", "state": "active processes"},
	})
	defer fake.Close()
	defer fake.Client().CloseIdleConnections()

	cfg, err := config.Parse([]byte(`
rules:
- seriesQuery: '{__name__="pm_status",namespace!="",pod_name!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod_name: {resource: pod}
  name: {as: fpm_active_rate}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`), "config.yaml")
	if err != nil {
		panic(err)
	}
	mapper := kubemapper.New()
	ruleList, err := rules.Compile(cfg, mapper)
	if err != nil {
		panic(err)
	}
	m := metrics.New()
	client, err := promclient.New(promclient.Config{Address: fake.URL, HTTPClient: fake.Client(), Metrics: m, Timeout: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	d, err := discovery.New(discovery.Options{
		Backends: promclient.Single[discovery.Prometheus](client.WithTimeout(time.Minute)), // discovery reads more than a metric query
		Rules:    ruleList,
		Interval: time.Minute,     // --metrics-relist-interval
		MaxAge:   2 * time.Minute, // --metrics-max-age
		Scoper:   discovery.MapperScoper{Mapper: mapper},
		Metrics:  m,
	})
	if err != nil {
		panic(err)
	}
	if err := d.RunOnce(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("ready:", d.Ready(), d.Checker().Check((*http.Request)(nil)) == nil)
	e, ok := d.Index().Custom(schema.GroupResource{Resource: "pods"}, "abtest", "fpm_active_rate")
	fmt.Println(e, ok)
	q, err := e.Rule.QueryForSeries(rules.CustomRequest{Series: e.SeriesName, Resource: schema.GroupResource{Resource: "pods"}, Namespace: "abtest", Names: []string{"a"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(q.Expr)
	// Output:
	// ready: true true
	// rules[0] (series "pm_status") true
	// sum(pm_status{namespace="abtest",pod_name="a"}) by (pod_name)
}
