package provider_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/provider"
	"github.com/promscaler/promscaler/pkg/rules"
)

const backendsRules = `
rules:
- &reqs
  seriesQuery: '{__name__="reqs",namespace!="",pod_name!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod_name: {resource: pod}}}
  name: {as: default_reqs}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- {<<: *reqs, name: {as: thanos_reqs}, backend: thanos}
externalRules:
- &queue
  seriesQuery: '{__name__="queue"}'
  resources: {namespaced: false}
  name: {as: default_queue}
  metricsQuery: 'sum(<<.Series>>)'
- {<<: *queue, name: {as: thanos_queue}, backend: thanos}
externalQueries:
- {name: thanos_fixed, query: 'sum(queue)', backend: thanos}
- {name: default_fixed, query: 'sum(queue)'}
`

// Each metric is read from its rule's backend, and one backend down makes
// only its metrics unavailable (503); the others keep their values.
func TestBackendsRoutingAndFailure(t *testing.T) {
	mapper := testMapper()
	cfg, err := config.Parse([]byte(backendsRules), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rules.Compile(cfg, mapper)
	if err != nil {
		t.Fatal(err)
	}
	pod := model.LabelSet{"__name__": "reqs", "namespace": "default", "pod_name": "web-1"}
	var in []discovery.RuleSeries
	for _, r := range rs.Rules() {
		s := rules.Series{Name: "queue", Labels: model.LabelSet{"__name__": "queue"}}
		if r.Kind() == rules.KindCustom {
			s = rules.Series{Name: "reqs", Labels: pod}
		}
		in = append(in, discovery.RuleSeries{Rule: r, Series: []rules.Series{s}})
	}
	idx := discovery.BuildIndex(in, discovery.IndexOptions{Scoper: discovery.MapperScoper{Mapper: mapper}})

	// Each backend answers every query with its own value.
	answer := func(v string) func(string) (int, string) {
		return always(http.StatusOK, vector(sample{labels: map[string]string{"pod_name": "web-1"}, value: v, ts: 1}))
	}
	def := newFakeProm(t, answer("1"))
	thanos := newFakeProm(t, answer("2"))
	m := metrics.New()
	queriers := map[string]promclient.SampleQuerier{
		"default": def.client(t, 5*time.Second, m),
		"thanos":  thanos.client(t, 5*time.Second, m),
	}
	p, err := provider.New(provider.Config{
		Index: provider.IndexSource(func() *discovery.Index { return idx }),
		Rules: func() *rules.RuleSet { return rs },
		Backends: func(name string) (promclient.SampleQuerier, bool) {
			q, ok := queriers[defaultName(name)]
			return q, ok
		},
		Objects: testObjects(),
		Mapper:  mapper,
		Clock:   clocktesting.NewFakeClock(fixedNow),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	read := func(metric string) string {
		if metric == "default_reqs" || metric == "thanos_reqs" {
			v, err := p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "web-1"},
				cmprovider.CustomMetricInfo{GroupResource: podsGR, Namespaced: true, Metric: metric}, labels.Everything())
			if err != nil {
				return outcome(err)
			}
			return v.Value.String()
		}
		v, err := p.GetExternalMetric(ctx, "default", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: metric})
		if err != nil {
			return outcome(err)
		}
		if len(v.Items) != 1 {
			return fmt.Sprintf("%d items", len(v.Items))
		}
		return v.Items[0].Value.String()
	}
	metricsRead := []string{"default_reqs", "thanos_reqs", "default_queue", "thanos_queue", "default_fixed", "thanos_fixed"}
	tests := []struct {
		name       string
		thanosDown bool
		want       map[string]string
	}{{
		name: "both up",
		want: map[string]string{
			"default_reqs": "1", "thanos_reqs": "2", "default_queue": "1", "thanos_queue": "2", "default_fixed": "1", "thanos_fixed": "2",
		},
	}, {
		name:       "thanos down",
		thanosDown: true,
		want: map[string]string{
			"default_reqs": "1", "thanos_reqs": "503", "default_queue": "1", "thanos_queue": "503", "default_fixed": "1", "thanos_fixed": "503",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.thanosDown {
				thanos.HandleQuery(always(http.StatusServiceUnavailable, `{"status":"error","errorType":"unavailable","error":"down"}`))
			}
			got := map[string]string{}
			for _, metric := range metricsRead {
				got[metric] = read(metric)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("answers (-want +got):\n%s", d)
			}
		})
	}
}

// While a backend's discovery has not completed, a metric the index lacks
// is a 503 naming the backend (it may be one of its metrics), not a 404.
func TestBackendPendingIsUnavailable(t *testing.T) {
	tests := []struct {
		name    string
		pending []string
		want    string
	}{
		{name: "none pending", want: "404"},
		{name: "thanos pending", pending: []string{"thanos"}, want: "503: external metric nope is not discovered: discovery has not completed for backend thanos; retry shortly"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := provider.New(provider.Config{
				Index:    provider.IndexSource(func() *discovery.Index { return discovery.EmptyIndex() }),
				Backends: promclient.Single[promclient.SampleQuerier](newFakeProm(t, always(http.StatusOK, vector())).client(t, time.Second, metrics.New())),
				Pending:  func() []string { return tt.pending },
				Objects:  testObjects(),
				Mapper:   testMapper(),
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.GetExternalMetric(context.Background(), "default", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "nope"})
			got := outcome(err)
			if tt.want != "404" {
				got += ": " + err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// outcome is the HTTP code of an API error.
func outcome(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok {
		return fmt.Sprint(s.Status().Code)
	}
	return "error: " + err.Error()
}

// defaultName is name, or "default" for the default backend's "".
func defaultName(name string) string {
	if name == "" {
		return "default"
	}
	return name
}
