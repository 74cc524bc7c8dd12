package provider_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

func em(metric string, lbls map[string]string, when metav1.Time, v string) external_metrics.ExternalMetricValue {
	return external_metrics.ExternalMetricValue{MetricName: metric, MetricLabels: lbls, Timestamp: when, Value: mustQuantity(v)}
}

func TestGetExternalMetric(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		selector  string
		metric    string
		noIndex   bool
		keepNaN   bool // nanAsZero: false
		answer    func(string) (int, string)
		want      []external_metrics.ExternalMetricValue
		wantQuery string
		wantCode  int32
		wantMsg   string
	}{
		{
			name:      "namespaced rule: selector and namespace become matchers, every series an item",
			namespace: "shop",
			selector:  "queue in (orders,refunds)",
			metric:    "rabbitmq_queue_length",
			answer: always(http.StatusOK, vector(
				sample{map[string]string{"queue": "refunds"}, "3", 1764493210},
				sample{map[string]string{"queue": "orders", "__name__": "rabbitmq_queue_length"}, "12.5", 1764493211},
			)),
			want: []external_metrics.ExternalMetricValue{
				em("rabbitmq_queue_length", map[string]string{"queue": "orders"}, ts(1764493211), "12500m"),
				em("rabbitmq_queue_length", map[string]string{"queue": "refunds"}, ts(1764493210), "3"),
			},
			wantQuery: `sum(rabbitmq_queue_length{queue=~"orders|refunds",namespace="shop"}) by (queue)`,
		},
		{
			name:      "namespaced rule in a namespace discovery has not seen yet is asked at once",
			namespace: "blog",
			metric:    "rabbitmq_queue_length",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"queue": "posts"}, "4", 1764493210})),
			want:      []external_metrics.ExternalMetricValue{em("rabbitmq_queue_length", map[string]string{"queue": "posts"}, ts(1764493210), "4")},
			wantQuery: `sum(rabbitmq_queue_length{namespace="blog"}) by (queue)`,
		},
		{
			name:      "resources.namespaced: false adds no namespace matcher",
			namespace: "blog",
			selector:  "queue_name=q1",
			metric:    "cloud_sqs_messages",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"queue_name": "q1"}, "40", 1764493212})),
			want: []external_metrics.ExternalMetricValue{
				em("cloud_sqs_messages", map[string]string{"queue_name": "q1"}, ts(1764493212), "40"),
			},
			wantQuery: `max(cloud_sqs_messages{queue_name="q1"}) by (queue_name)`,
		},
		{
			name:      "externalQueries entry, not namespaced",
			namespace: "shop",
			selector:  "topic=payments",
			metric:    "kafka_lag",
			answer: always(http.StatusOK, vector(
				sample{map[string]string{"topic": "payments"}, "1e20", 1764493213},
				sample{map[string]string{"topic": "payments-dlq"}, "NaN", 1764493213},
			)),
			want: []external_metrics.ExternalMetricValue{
				em("kafka_lag", map[string]string{"topic": "payments"}, ts(1764493213), "100e18"),
				em("kafka_lag", map[string]string{"topic": "payments-dlq"}, ts(1764493213), "0"),
			},
			wantQuery: `sum(kafka_consumergroup_lag{topic="payments"}) by (topic)`,
		},
		{
			name:      "externalQueries entry served before the first discovery",
			namespace: "shop",
			metric:    "kafka_lag",
			noIndex:   true,
			answer:    always(http.StatusOK, vector(sample{map[string]string{"topic": "a"}, "5", 1764493214})),
			want: []external_metrics.ExternalMetricValue{
				em("kafka_lag", map[string]string{"topic": "a"}, ts(1764493214), "5"),
			},
			wantQuery: `sum(kafka_consumergroup_lag{}) by (topic)`,
		},
		{
			name:      "namespaced externalQueries entry with a defaultValue",
			namespace: "shop",
			metric:    "orders_backlog",
			answer:    always(http.StatusOK, vector()),
			want: []external_metrics.ExternalMetricValue{
				em("orders_backlog", map[string]string{}, metav1.NewTime(fixedNow), "0"),
			},
			wantQuery: `sum(orders_backlog{namespace="shop"})`,
		},
		{
			name:      "NaN is 0, ±Inf no value",
			namespace: "shop",
			metric:    "rabbitmq_queue_length",
			answer: always(http.StatusOK, vector(
				sample{map[string]string{"queue": "a"}, "NaN", 1764493210},
				sample{map[string]string{"queue": "b"}, "-Inf", 1764493210},
				sample{map[string]string{"queue": "c"}, "+Inf", 1764493210},
			)),
			want:      []external_metrics.ExternalMetricValue{em("rabbitmq_queue_length", map[string]string{"queue": "a"}, ts(1764493210), "0")},
			wantQuery: `sum(rabbitmq_queue_length{namespace="shop"}) by (queue)`,
		},
		{
			name:      "only NaN (nanAsZero: false) and Inf samples and no default: an empty list, as prometheus-adapter answers",
			namespace: "shop",
			metric:    "rabbitmq_queue_length",
			keepNaN:   true,
			answer: always(http.StatusOK, vector(
				sample{map[string]string{"queue": "a"}, "NaN", 1764493210},
				sample{map[string]string{"queue": "b"}, "-Inf", 1764493210},
			)),
			want:      []external_metrics.ExternalMetricValue{},
			wantQuery: `sum(rabbitmq_queue_length{namespace="shop"}) by (queue)`,
		},
		{
			name:      "no series and no default: an empty list",
			namespace: "shop",
			metric:    "rabbitmq_queue_length",
			answer:    always(http.StatusOK, vector()),
			want:      []external_metrics.ExternalMetricValue{},
			wantQuery: `sum(rabbitmq_queue_length{namespace="shop"}) by (queue)`,
		},
		{
			name:      "externalQueries entry: NaN is 0",
			namespace: "shop",
			metric:    "orders_backlog",
			answer:    always(http.StatusOK, vector(sample{map[string]string{}, "NaN", 1764493210})),
			want:      []external_metrics.ExternalMetricValue{em("orders_backlog", map[string]string{}, ts(1764493210), "0")},
			wantQuery: `sum(orders_backlog{namespace="shop"})`,
		},
		{
			name:      "a Prometheus error is an error, never the defaultValue",
			namespace: "shop",
			metric:    "orders_backlog",
			answer:    always(http.StatusBadGateway, "<html>bad gateway</html>"),
			wantQuery: `sum(orders_backlog{namespace="shop"})`,
			wantCode:  http.StatusServiceUnavailable,
			wantMsg:   "external metric orders_backlog (externalQueries[1]): Prometheus did not answer",
		},
		{
			name:      "a query Prometheus rejects is a 500 naming the rule, not the query",
			namespace: "shop",
			metric:    "orders_backlog",
			answer:    always(http.StatusBadRequest, `{"status":"error","errorType":"bad_data","error":"1:5: parse error in sum(orders_backlog{namespace=\"shop\"})"}`),
			wantQuery: `sum(orders_backlog{namespace="shop"})`,
			wantCode:  http.StatusInternalServerError,
			wantMsg:   "external metric orders_backlog (externalQueries[1]): Prometheus rejected the query (check the rule's query; request id ",
		},
		{
			name:      "namespaced rule mapping no namespace label: says why",
			namespace: "shop",
			metric:    "broker_backlog",
			wantCode:  http.StatusNotFound,
			wantMsg:   "externalRules[2] discovers it but is namespaced (resources.namespaced defaults to true) and maps no label to namespaces",
		},
		{
			name:      "unknown metric",
			namespace: "shop",
			metric:    "nope",
			wantCode:  http.StatusNotFound,
			wantMsg:   "no external rule discovered it and no externalQueries entry serves it",
		},
		{
			name:      "discovered metric before the first discovery",
			namespace: "shop",
			metric:    "rabbitmq_queue_length",
			noIndex:   true,
			wantCode:  http.StatusServiceUnavailable,
		},
		{
			name:      "unsupported selector",
			namespace: "shop",
			selector:  "queue>1",
			metric:    "rabbitmq_queue_length",
			wantCode:  http.StatusBadRequest,
			wantMsg:   "cannot be expressed as a PromQL label matcher",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{answer: tc.answer, noIndex: tc.noIndex, keepNaN: tc.keepNaN})
			got, err := e.prov.GetExternalMetric(context.Background(), tc.namespace, mustSelector(t, tc.selector),
				cmprovider.ExternalMetricInfo{Metric: tc.metric})
			checkAPIError(t, err, tc.wantCode, tc.wantMsg)
			if tc.wantCode == 0 {
				if diff := cmp.Diff(tc.want, got.Items, cmpOpts); diff != "" {
					t.Errorf("items (-want +got):\n%s", diff)
				}
			}
			checkQueries(t, e.prom.sent(), tc.wantQuery)
		})
	}
}

func TestListAllExternalMetrics(t *testing.T) {
	want := []cmprovider.ExternalMetricInfo{
		{Metric: "cloud_sqs_messages"},
		{Metric: "kafka_lag"},
		{Metric: "orders_backlog"},
		{Metric: "rabbitmq_queue_length"},
	}
	if diff := cmp.Diff(want, newEnv(t, envOptions{}).prov.ListAllExternalMetrics()); diff != "" {
		t.Errorf("ListAllExternalMetrics (-want +got):\n%s", diff)
	}
	// Before the first discovery, the externalQueries are listed.
	want = []cmprovider.ExternalMetricInfo{{Metric: "kafka_lag"}, {Metric: "orders_backlog"}}
	if diff := cmp.Diff(want, newEnv(t, envOptions{noIndex: true}).prov.ListAllExternalMetrics()); diff != "" {
		t.Errorf("ListAllExternalMetrics before discovery (-want +got):\n%s", diff)
	}
}
