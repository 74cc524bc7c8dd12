package provider_test

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/provider"
	"github.com/promscaler/promscaler/pkg/provider/fake"
	"github.com/promscaler/promscaler/pkg/rules"
	"github.com/promscaler/promscaler/test/promtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Resources used by the tests.
var (
	podsGR          = schema.GroupResource{Resource: "pods"}
	nodesGR         = schema.GroupResource{Resource: "nodes"}
	namespacesGR    = schema.GroupResource{Resource: "namespaces"}
	clusterQueuesGR = schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "clusterqueues"}
	deploymentsGR   = schema.GroupResource{Group: "apps", Resource: "deployments"}
)

// fpmInfo is the seed rule's metric of pods.
var fpmInfo = cmprovider.CustomMetricInfo{GroupResource: podsGR, Namespaced: true, Metric: "fpm_active_rate"}

// fixedNow is the fake clock's time, stamped on defaultValue answers.
var fixedNow = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// testMapper knows the built-in resources plus a cluster-scoped custom
// resource (Kueue's ClusterQueue).
func testMapper() meta.RESTMapper {
	crd := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "kueue.x-k8s.io", Version: "v1beta1"}})
	crd.AddSpecific(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta1", Kind: "ClusterQueue"},
		schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "clusterqueues"},
		schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta1", Resource: "clusterqueue"},
		meta.RESTScopeRoot)
	return meta.MultiRESTMapper{kubemapper.New(), crd}
}

func strPtr(s string) *string { return &s }
func boolPtr(b bool) *bool    { return &b }

const seedQuery = `sum(max_over_time(<<.Series>>{<<.LabelMatchers>>,state="active processes"}[2m])) by (<<.GroupBy>>) / sum(max_over_time(<<.Series>>{<<.LabelMatchers>>,state="total processes"}[2m])) by (<<.GroupBy>>)`

// testConfig is the configuration every provider test serves.
func testConfig() *config.Config {
	ns := config.GroupResource{Resource: "namespace"}
	return &config.Config{
		Rules: []config.DiscoveryRule{
			{ // rules[0]: the seed example.
				SeriesQuery: `{__name__="pm_status",namespace!="",pod_name!="",state="active processes"}`,
				Resources: config.ResourceMapping{Overrides: map[string]config.GroupResource{
					"namespace": ns, "pod_name": {Resource: "pod"},
				}},
				Name:         config.NameMapping{As: "fpm_active_rate"},
				MetricsQuery: seedQuery,
			},
			{ // rules[1]: a node metric (cluster-scoped).
				SeriesQuery:  `{__name__="node_load1",node!=""}`,
				Resources:    config.ResourceMapping{Overrides: map[string]config.GroupResource{"node": {Resource: "node"}}},
				MetricsQuery: `max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`,
			},
			{ // rules[2]: a namespace metric.
				SeriesQuery:  `{__name__="namespace_cpu_used",namespace!=""}`,
				Resources:    config.ResourceMapping{Overrides: map[string]config.GroupResource{"namespace": ns}},
				MetricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`,
			},
			{ // rules[3]: a cluster-scoped custom resource.
				SeriesQuery: `{__name__="kueue_pending_workloads",cluster_queue!=""}`,
				Resources: config.ResourceMapping{Overrides: map[string]config.GroupResource{
					"cluster_queue": {Group: "kueue.x-k8s.io", Resource: "clusterqueue"},
				}},
				MetricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`,
			},
			{ // rules[4]: a pod metric with a defaultValue.
				SeriesQuery: `{__name__="jobs_waiting",namespace!="",pod!=""}`,
				Resources: config.ResourceMapping{Overrides: map[string]config.GroupResource{
					"namespace": ns, "pod": {Resource: "pod"},
				}},
				MetricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)`,
				DefaultValue: strPtr("0"),
			},
		},
		ExternalRules: []config.DiscoveryRule{
			{ // externalRules[0]: namespaced (the default).
				SeriesQuery:  `{__name__="rabbitmq_queue_length",namespace!=""}`,
				Resources:    config.ResourceMapping{Overrides: map[string]config.GroupResource{"namespace": ns}},
				MetricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)`,
			},
			{ // externalRules[1]: resources.namespaced: false.
				SeriesQuery:  `{__name__="cloud_sqs_messages"}`,
				Resources:    config.ResourceMapping{Namespaced: boolPtr(false)},
				MetricsQuery: `max(<<.Series>>{<<.LabelMatchers>>}) by (queue_name)`,
			},
			{ // externalRules[2]: namespaced (the default) with no namespace label mapped: serves nothing.
				SeriesQuery:  `{__name__="broker_backlog"}`,
				MetricsQuery: `sum(<<.Series>>{<<.LabelMatchers>>})`,
			},
		},
		ExternalQueries: []config.ExternalQuery{
			{Name: "kafka_lag", Query: `sum(kafka_consumergroup_lag{<<.LabelMatchers>>}) by (topic)`},
			{Name: "orders_backlog", Query: `sum(orders_backlog{<<.LabelMatchers>>})`, Namespaced: boolPtr(true), DefaultValue: strPtr("0")},
		},
	}
}

// testSeries is what discovery found for each rule of testConfig.
func testSeries(rs *rules.RuleSet) []discovery.RuleSeries {
	series := func(name string, kv ...string) rules.Series {
		ls := model.LabelSet{model.MetricNameLabel: model.LabelValue(name)}
		for i := 0; i+1 < len(kv); i += 2 {
			ls[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
		}
		return rules.Series{Name: name, Labels: ls}
	}
	custom, external := rs.CustomRules(), rs.ExternalRules()
	return []discovery.RuleSeries{
		{Rule: custom[0], Series: []rules.Series{
			series("pm_status", "namespace", "shop", "pod_name", "web-1", "state", "active processes"),
			series("pm_status", "namespace", "blog", "pod_name", "b-1", "state", "active processes"),
		}},
		{Rule: custom[1], Series: []rules.Series{series("node_load1", "node", "n1")}},
		{Rule: custom[2], Series: []rules.Series{series("namespace_cpu_used", "namespace", "shop")}},
		{Rule: custom[3], Series: []rules.Series{series("kueue_pending_workloads", "cluster_queue", "cq-a")}},
		{Rule: custom[4], Series: []rules.Series{series("jobs_waiting", "namespace", "shop", "pod", "web-1")}},
		{Rule: external[0], Series: []rules.Series{series("rabbitmq_queue_length", "namespace", "shop", "queue", "orders")}},
		{Rule: external[1], Series: []rules.Series{series("cloud_sqs_messages", "queue_name", "q1")}},
		{Rule: external[2], Series: []rules.Series{series("broker_backlog", "broker", "b1")}},
	}
}

// testObjects are the cluster's objects.
func testObjects() *fake.Objects {
	web := map[string]string{"app": "web"}
	worker := map[string]string{"role": "worker"}
	return fake.NewObjects().
		Add(podsGR,
			fake.Object{Namespace: "shop", Name: "web-2", Labels: web},
			fake.Object{Namespace: "shop", Name: "web-1", Labels: web},
			fake.Object{Namespace: "shop", Name: "web-3", Labels: web},
			fake.Object{Namespace: "shop", Name: "db-1", Labels: map[string]string{"app": "db"}},
			fake.Object{Namespace: "blog", Name: "b-1", Labels: web},
		).
		Add(nodesGR,
			fake.Object{Name: "n1", Labels: worker},
			fake.Object{Name: "n2", Labels: worker},
			fake.Object{Name: "n3", Labels: map[string]string{"role": "control-plane"}},
		).
		Add(namespacesGR, fake.Object{Name: "shop"}, fake.Object{Name: "blog"}).
		Add(clusterQueuesGR, fake.Object{Name: "cq-a"})
}

// fakeProm is the test kit's Prometheus answering instant queries from a
// function of the query.
type fakeProm struct{ *promtest.Server }

func newFakeProm(t testing.TB, answer func(query string) (int, string)) *fakeProm {
	t.Helper()
	s := promtest.New(nil)
	s.HandleQuery(answer)
	t.Cleanup(s.Close)
	return &fakeProm{s}
}

// sent returns the queries received, in order.
func (f *fakeProm) sent() []string { return f.Queries() }

// client returns a real pkg/promclient client for the fake, with its own
// transport closed at the end of the test.
func (f *fakeProm) client(t testing.TB, timeout time.Duration, m *metrics.Metrics) *promclient.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := promclient.New(promclient.Config{
		Address:    f.URL,
		HTTPClient: &http.Client{Transport: tr},
		Timeout:    timeout,
		Metrics:    m,
	})
	if err != nil {
		t.Fatalf("promclient.New: %v", err)
	}
	return c
}

// sample is one series of a canned answer.
type sample struct {
	labels map[string]string
	value  string // "0.5", "NaN", "+Inf"
	ts     float64
}

// vector renders a successful instant query answer.
func vector(samples ...sample) string {
	var b strings.Builder
	b.WriteString(`{"status":"success","data":{"resultType":"vector","result":[`)
	for i, s := range samples {
		if i > 0 {
			b.WriteByte(',')
		}
		keys := make([]string, 0, len(s.labels))
		for k := range s.labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(`{"metric":{`)
		for j, k := range keys {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:%q", k, s.labels[k])
		}
		fmt.Fprintf(&b, `},"value":[%s,%q]}`, strconv.FormatFloat(s.ts, 'f', -1, 64), s.value)
	}
	b.WriteString(`]}}`)
	return b.String()
}

// always answers every query with the same answer.
func always(code int, body string) func(string) (int, string) {
	return func(string) (int, string) { return code, body }
}

// env is a provider wired to a fake Prometheus and fake objects.
type env struct {
	prov    *provider.Provider
	prom    *fakeProm
	objects *fake.Objects
	rules   *rules.RuleSet
	index   *discovery.Index
	metrics *metrics.Metrics
}

type envOptions struct {
	answer   func(string) (int, string)
	noIndex  bool
	maxNames int
	maxBytes int
	timeout  time.Duration
	objects  *fake.Objects
	// keepNaN sets the configuration's nanAsZero to false.
	keepNaN bool
	// fpmNamespaces are more namespaces where discovery found the seed
	// rule's series.
	fpmNamespaces []string
	// clock, when set, is the provider's clock (default: fixed at fixedNow).
	clock *clocktesting.FakeClock
	// shared configures shared evaluation.
	shared provider.SharedConfig
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	mapper := testMapper()
	cfg := testConfig()
	if o.keepNaN {
		cfg.NaNAsZero = boolPtr(false)
	}
	rs, err := rules.Compile(cfg, mapper)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	series := testSeries(rs)
	for _, ns := range o.fpmNamespaces {
		series[0].Series = append(series[0].Series, rules.Series{Name: "pm_status", Labels: model.LabelSet{
			"__name__": "pm_status", "namespace": model.LabelValue(ns), "pod_name": "any", "state": "active processes",
		}})
	}
	idx := discovery.BuildIndex(series, discovery.IndexOptions{Scoper: discovery.MapperScoper{Mapper: mapper}})
	if o.answer == nil {
		o.answer = always(http.StatusOK, vector())
	}
	if o.timeout == 0 {
		o.timeout = 5 * time.Second
	}
	if o.objects == nil {
		o.objects = testObjects()
	}
	if o.clock == nil {
		o.clock = clocktesting.NewFakeClock(fixedNow)
	}
	fp := newFakeProm(t, o.answer)
	e := &env{prom: fp, objects: o.objects, rules: rs, index: idx, metrics: metrics.New()}
	current := func() *discovery.Index { return idx }
	if o.noIndex {
		current = func() *discovery.Index { return nil }
	}
	p, err := provider.New(provider.Config{
		Index:           provider.IndexSource(current),
		Rules:           func() *rules.RuleSet { return rs },
		Backends:        promclient.Single[promclient.SampleQuerier](fp.client(t, o.timeout, e.metrics)),
		Objects:         o.objects,
		Mapper:          mapper,
		Clock:           o.clock,
		Shared:          o.shared,
		MaxNamesInQuery: o.maxNames,
		MaxQueryBytes:   o.maxBytes,
	})
	if err != nil {
		t.Fatalf("provider.New: %v", err)
	}
	e.prov = p
	return e
}

// cmpOpts compare API objects: quantities by value and format, times by
// instant.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 && a.String() == b.String() }),
	cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) }),
}

// ts is a sample timestamp as the API reports it.
func ts(sec float64) metav1.Time {
	return metav1.NewTime(time.UnixMilli(int64(sec * 1000)))
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// hold makes every later request wait until release is called, reporting
// each arrival on the returned channel (buffered for n arrivals).
func (f *fakeProm) hold(n int) (arrived <-chan struct{}, release func()) { return f.Hold(n) }
