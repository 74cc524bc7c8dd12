package provider_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/limits"
	"github.com/promscaler/promscaler/pkg/provider/fake"
)

// fpmQuery is the seed rule's query for the given label matchers.
func fpmQuery(matchers, groupBy string) string {
	return `sum(max_over_time(pm_status{` + matchers + `,state="active processes"}[2m])) by (` + groupBy +
		`) / sum(max_over_time(pm_status{` + matchers + `,state="total processes"}[2m])) by (` + groupBy + `)`
}

func podRef(ns, name string) custom_metrics.ObjectReference {
	return custom_metrics.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: name}
}

func mv(ref custom_metrics.ObjectReference, metric string, sel *metav1.LabelSelector, when metav1.Time, v string) custom_metrics.MetricValue {
	return custom_metrics.MetricValue{
		DescribedObject: ref,
		Metric:          custom_metrics.MetricIdentifier{Name: metric, Selector: sel},
		Timestamp:       when,
		Value:           mustQuantity(v),
	}
}

func TestGetMetricByName(t *testing.T) {
	tests := []struct {
		name           string
		obj            types.NamespacedName
		gr             schema.GroupResource
		metric         string
		metricSelector string
		noIndex        bool
		keepNaN        bool // nanAsZero: false
		answer         func(string) (int, string)
		want           *custom_metrics.MetricValue
		wantQuery      string
		wantCode       int32
		wantMsg        string
	}{
		{
			name:      "seed fpm_active_rate for one pod",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "0.75", 1764493200.5})),
			want:      ptr(mv(podRef("shop", "web-1"), "fpm_active_rate", nil, ts(1764493200.5), "750m")),
			wantQuery: fpmQuery(`namespace="shop",pod_name="web-1"`, "pod_name"),
		},
		{
			name:      "singular resource name in the URL",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        schema.GroupResource{Resource: "pod"},
			metric:    "fpm_active_rate",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "1", 1764493200})),
			want:      ptr(mv(podRef("shop", "web-1"), "fpm_active_rate", nil, ts(1764493200), "1")),
			wantQuery: fpmQuery(`namespace="shop",pod_name="web-1"`, "pod_name"),
		},
		{
			name:           "metric label selector becomes matchers and is reported",
			obj:            types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:             podsGR,
			metric:         "fpm_active_rate",
			metricSelector: "pool in (www,api),env=prod",
			answer:         always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "0.5", 1764493200})),
			want: ptr(mv(podRef("shop", "web-1"), "fpm_active_rate", &metav1.LabelSelector{
				MatchLabels:      map[string]string{"env": "prod"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: metav1.LabelSelectorOpIn, Values: []string{"api", "www"}}},
			}, ts(1764493200), "500m")),
			wantQuery: fpmQuery(`env="prod",pool=~"api|www",namespace="shop",pod_name="web-1"`, "pod_name"),
		},
		{
			name:      "node metric (cluster-scoped)",
			obj:       types.NamespacedName{Name: "n1"},
			gr:        nodesGR,
			metric:    "node_load1",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"node": "n1"}, "3.25", 1764493201})),
			want:      ptr(mv(custom_metrics.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "n1"}, "node_load1", nil, ts(1764493201), "3250m")),
			wantQuery: `max(node_load1{node="n1"}) by (node)`,
		},
		{
			name:      "namespace metric",
			obj:       types.NamespacedName{Name: "shop"},
			gr:        namespacesGR,
			metric:    "namespace_cpu_used",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"namespace": "shop"}, "12", 1764493202})),
			want:      ptr(mv(custom_metrics.ObjectReference{Kind: "Namespace", APIVersion: "v1", Name: "shop"}, "namespace_cpu_used", nil, ts(1764493202), "12")),
			wantQuery: `sum(namespace_cpu_used{namespace="shop"}) by (namespace)`,
		},
		{
			name:   "cluster-scoped custom resource",
			obj:    types.NamespacedName{Name: "cq-a"},
			gr:     schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "clusterqueues"},
			metric: "kueue_pending_workloads",
			answer: always(http.StatusOK, vector(sample{map[string]string{"cluster_queue": "cq-a"}, "7", 1764493203})),
			want: ptr(mv(custom_metrics.ObjectReference{Kind: "ClusterQueue", APIVersion: "kueue.x-k8s.io/v1beta1", Name: "cq-a"},
				"kueue_pending_workloads", nil, ts(1764493203), "7")),
			wantQuery: `sum(kueue_pending_workloads{cluster_queue="cq-a"}) by (cluster_queue)`,
		},
		{
			name:      "absent series is not found, saying why",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer:    always(http.StatusOK, vector()),
			wantQuery: fpmQuery(`namespace="shop",pod_name="web-1"`, "pod_name"),
			wantCode:  http.StatusNotFound,
			wantMsg:   "the server could not find the metric fpm_active_rate for pods web-1: Prometheus returned no sample with a finite value for it (rules[0])",
		},
		{
			name:      "NaN is 0, as prometheus-adapter answers",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "NaN", 1764493200})),
			want:      ptr(mv(podRef("shop", "web-1"), "fpm_active_rate", nil, ts(1764493200), "0")),
			wantQuery: fpmQuery(`namespace="shop",pod_name="web-1"`, "pod_name"),
		},
		{
			name:      "NaN with nanAsZero: false is not a value",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        podsGR,
			metric:    "fpm_active_rate",
			keepNaN:   true,
			answer:    always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "NaN", 1764493200})),
			wantQuery: fpmQuery(`namespace="shop",pod_name="web-1"`, "pod_name"),
			wantCode:  http.StatusNotFound,
			wantMsg:   "Prometheus returned no sample with a finite value for it",
		},
		{
			name:      "+Inf is not a value",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "+Inf", 1764493200})),
			wantQuery: fpmQuery(`namespace="shop",pod_name="web-1"`, "pod_name"),
			wantCode:  http.StatusNotFound,
		},
		{
			name:      "absent series with a defaultValue answers the default, stamped now",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        podsGR,
			metric:    "jobs_waiting",
			answer:    always(http.StatusOK, vector()),
			want:      ptr(mv(podRef("shop", "web-1"), "jobs_waiting", nil, metav1.NewTime(fixedNow), "0")),
			wantQuery: `sum(jobs_waiting{namespace="shop",pod="web-1"}) by (pod)`,
		},
		{
			name:      "-Inf with a defaultValue answers the default",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        podsGR,
			metric:    "jobs_waiting",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"pod": "web-1"}, "-Inf", 1764493200})),
			want:      ptr(mv(podRef("shop", "web-1"), "jobs_waiting", nil, metav1.NewTime(fixedNow), "0")),
			wantQuery: `sum(jobs_waiting{namespace="shop",pod="web-1"}) by (pod)`,
		},
		{
			name:      "a defaultValue is not given to an object that does not exist",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-typo"},
			gr:        podsGR,
			metric:    "jobs_waiting",
			answer:    always(http.StatusOK, vector()),
			wantQuery: `sum(jobs_waiting{namespace="shop",pod="web-typo"}) by (pod)`,
			wantCode:  http.StatusNotFound,
			wantMsg:   "the server could not find the metric jobs_waiting for pods web-typo: no such object, and Prometheus returned no sample for it; the defaultValue of rules[4] is given only to existing objects",
		},
		{
			name:      "a Prometheus error is an error, never the defaultValue",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        podsGR,
			metric:    "jobs_waiting",
			answer:    always(http.StatusServiceUnavailable, `{"status":"error","errorType":"unavailable","error":"overloaded"}`),
			wantQuery: `sum(jobs_waiting{namespace="shop",pod="web-1"}) by (pod)`,
			wantCode:  http.StatusServiceUnavailable,
			wantMsg:   "metric jobs_waiting for pods (rules[4]): Prometheus did not answer",
		},
		{
			name:      "Prometheus rejecting the query is a 500 naming the rule",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer:    always(http.StatusBadRequest, `{"status":"error","errorType":"bad_data","error":"parse error"}`),
			wantQuery: fpmQuery(`namespace="shop",pod_name="web-1"`, "pod_name"),
			wantCode:  http.StatusInternalServerError,
			wantMsg:   "metric fpm_active_rate for pods (rules[0]): Prometheus rejected the query",
		},
		{
			name:      "truncated JSON is a 503",
			obj:       types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer:    always(http.StatusOK, `{"status":"success","data":{"resultType":"vector","res`),
			wantQuery: fpmQuery(`namespace="shop",pod_name="web-1"`, "pod_name"),
			wantCode:  http.StatusServiceUnavailable,
		},
		{
			name:      "known metric in a namespace discovery has not seen yet is asked at once",
			obj:       types.NamespacedName{Namespace: "ops", Name: "web-1"},
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "2", 1764493200})),
			want:      ptr(mv(podRef("ops", "web-1"), "fpm_active_rate", nil, ts(1764493200), "2")),
			wantQuery: fpmQuery(`namespace="ops",pod_name="web-1"`, "pod_name"),
		},
		{
			name:      "known metric in a namespace without its series is not found, saying why",
			obj:       types.NamespacedName{Namespace: "ops", Name: "web-1"},
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer:    always(http.StatusOK, vector()),
			wantQuery: fpmQuery(`namespace="ops",pod_name="web-1"`, "pod_name"),
			wantCode:  http.StatusNotFound,
			wantMsg:   "the server could not find the metric fpm_active_rate for pods web-1: Prometheus returned no sample with a finite value for it (rules[0])",
		},
		{
			name:     "metric unknown for the resource",
			obj:      types.NamespacedName{Namespace: "shop", Name: "web"},
			gr:       deploymentsGR,
			metric:   "fpm_active_rate",
			wantCode: http.StatusNotFound,
			wantMsg:  "the server could not find the metric fpm_active_rate for deployments.apps: no rule discovered it for deployments.apps",
		},
		{
			name:     "cluster-scoped resource asked in a namespace",
			obj:      types.NamespacedName{Namespace: "shop", Name: "n1"},
			gr:       nodesGR,
			metric:   "node_load1",
			wantCode: http.StatusNotFound,
			wantMsg:  "it is served for nodes cluster-wide: ask without a namespace",
		},
		{
			name:     "metric unknown for a cluster-scoped resource asked in a namespace",
			obj:      types.NamespacedName{Namespace: "shop", Name: "n1"},
			gr:       nodesGR,
			metric:   "fpm_active_rate",
			wantCode: http.StatusNotFound,
			wantMsg:  "nodes are cluster-scoped: ask without a namespace",
		},
		{
			name:     "namespaced metric asked without a namespace",
			obj:      types.NamespacedName{Name: "web-1"},
			gr:       podsGR,
			metric:   "fpm_active_rate",
			wantCode: http.StatusNotFound,
			wantMsg:  "it is served for pods per namespace",
		},
		{
			name:     "resource unknown to the cluster",
			obj:      types.NamespacedName{Namespace: "shop", Name: "x"},
			gr:       schema.GroupResource{Group: "example.com", Resource: "widgets"},
			metric:   "fpm_active_rate",
			wantCode: http.StatusNotFound,
			wantMsg:  `resource "widgets.example.com" is not known to the cluster`,
		},
		{
			name:           "selector operator without a PromQL form is a bad request",
			obj:            types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:             podsGR,
			metric:         "fpm_active_rate",
			metricSelector: "size>3",
			wantCode:       http.StatusBadRequest,
			wantMsg:        "unsupported label selector operator",
		},
		{
			name:     "before the first discovery",
			obj:      types.NamespacedName{Namespace: "shop", Name: "web-1"},
			gr:       podsGR,
			metric:   "fpm_active_rate",
			noIndex:  true,
			wantCode: http.StatusServiceUnavailable,
			wantMsg:  "metrics discovery has not completed yet",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{answer: tc.answer, noIndex: tc.noIndex, keepNaN: tc.keepNaN})
			got, err := e.prov.GetMetricByName(context.Background(), tc.obj,
				cmprovider.CustomMetricInfo{GroupResource: tc.gr, Namespaced: tc.obj.Namespace != "", Metric: tc.metric},
				mustSelector(t, tc.metricSelector))
			checkAPIError(t, err, tc.wantCode, tc.wantMsg)
			if diff := cmp.Diff(tc.want, got, cmpOpts); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
			checkQueries(t, e.prom.sent(), tc.wantQuery)
		})
	}
}

func TestGetMetricBySelector(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		selector  string
		gr        schema.GroupResource
		metric    string
		maxNames  int
		keepNaN   bool // nanAsZero: false
		answer    func(string) (int, string)
		listErr   error
		want      []custom_metrics.MetricValue
		wantQuery string
		wantCode  int32
		wantMsg   string
	}{
		{
			name:      "seed fpm_active_rate per pod of a selector",
			namespace: "shop",
			selector:  "app=web",
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer: always(http.StatusOK, vector(
				sample{map[string]string{"pod_name": "web-3"}, "0.25", 1764493200},
				sample{map[string]string{"pod_name": "web-1"}, "0.5", 1764493201},
				// Not selected: dropped even though Prometheus returns it.
				sample{map[string]string{"pod_name": "db-1"}, "1", 1764493200},
			)),
			want: []custom_metrics.MetricValue{
				mv(podRef("shop", "web-1"), "fpm_active_rate", nil, ts(1764493201), "500m"),
				mv(podRef("shop", "web-3"), "fpm_active_rate", nil, ts(1764493200), "250m"),
			},
			wantQuery: fpmQuery(`namespace="shop",pod_name=~"web-1|web-2|web-3"`, "pod_name"),
		},
		{
			name:      "above the name threshold the query selects every object and the adapter filters",
			namespace: "shop",
			selector:  "app=web",
			gr:        podsGR,
			metric:    "fpm_active_rate",
			maxNames:  2,
			answer: always(http.StatusOK, vector(
				// The query has no pod_name matcher: series without the
				// label sum into a group with no name, which is ignored.
				sample{map[string]string{}, "7", 1764493200},
				sample{map[string]string{"pod_name": "web-2"}, "0.5", 1764493200},
				sample{map[string]string{"pod_name": "db-1"}, "1", 1764493200},
			)),
			want:      []custom_metrics.MetricValue{mv(podRef("shop", "web-2"), "fpm_active_rate", nil, ts(1764493200), "500m")},
			wantQuery: fpmQuery(`namespace="shop"`, "pod_name"),
		},
		{
			name:      "several samples for one object: the first with a value, in answer order",
			namespace: "shop",
			selector:  "app=web",
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer: always(http.StatusOK, vector(
				sample{map[string]string{"pod_name": "web-1"}, "NaN", 1764493200},
				sample{map[string]string{"pod_name": "web-1"}, "0.5", 1764493201},
				sample{map[string]string{"pod_name": "web-2"}, "+Inf", 1764493202},
				sample{map[string]string{"pod_name": "web-2"}, "2", 1764493203},
				sample{map[string]string{"pod_name": "web-3"}, "-Inf", 1764493205},
			)),
			want: []custom_metrics.MetricValue{
				mv(podRef("shop", "web-1"), "fpm_active_rate", nil, ts(1764493200), "0"),
				mv(podRef("shop", "web-2"), "fpm_active_rate", nil, ts(1764493203), "2"),
			},
			wantQuery: fpmQuery(`namespace="shop",pod_name=~"web-1|web-2|web-3"`, "pod_name"),
		},
		{
			name:      "several samples for one object, nanAsZero: false: the first finite one, in answer order",
			namespace: "shop",
			selector:  "app=web",
			gr:        podsGR,
			metric:    "fpm_active_rate",
			keepNaN:   true,
			answer: always(http.StatusOK, vector(
				sample{map[string]string{"pod_name": "web-1"}, "NaN", 1764493200},
				sample{map[string]string{"pod_name": "web-1"}, "0.5", 1764493201},
				sample{map[string]string{"pod_name": "web-1"}, "0.75", 1764493202},
				sample{map[string]string{"pod_name": "web-2"}, "2", 1764493203},
				sample{map[string]string{"pod_name": "web-2"}, "+Inf", 1764493204},
				sample{map[string]string{"pod_name": "web-3"}, "-Inf", 1764493205},
			)),
			want: []custom_metrics.MetricValue{
				mv(podRef("shop", "web-1"), "fpm_active_rate", nil, ts(1764493201), "500m"),
				mv(podRef("shop", "web-2"), "fpm_active_rate", nil, ts(1764493203), "2"),
			},
			wantQuery: fpmQuery(`namespace="shop",pod_name=~"web-1|web-2|web-3"`, "pod_name"),
		},
		{
			name:     "nodes by label (cluster-scoped)",
			selector: "role=worker",
			gr:       nodesGR,
			metric:   "node_load1",
			answer: always(http.StatusOK, vector(
				sample{map[string]string{"node": "n1"}, "1.5", 1764493200},
				sample{map[string]string{"node": "n2"}, "+Inf", 1764493200},
			)),
			want: []custom_metrics.MetricValue{
				mv(custom_metrics.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "n1"}, "node_load1", nil, ts(1764493200), "1500m"),
			},
			wantQuery: `max(node_load1{node=~"n1|n2"}) by (node)`,
		},
		{
			name:      "objects without a sample get the defaultValue",
			namespace: "shop",
			selector:  "app=web",
			gr:        podsGR,
			metric:    "jobs_waiting",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"pod": "web-2"}, "4", 1764493200})),
			want: []custom_metrics.MetricValue{
				mv(podRef("shop", "web-1"), "jobs_waiting", nil, metav1.NewTime(fixedNow), "0"),
				mv(podRef("shop", "web-2"), "jobs_waiting", nil, ts(1764493200), "4"),
				mv(podRef("shop", "web-3"), "jobs_waiting", nil, metav1.NewTime(fixedNow), "0"),
			},
			wantQuery: `sum(jobs_waiting{namespace="shop",pod=~"web-1|web-2|web-3"}) by (pod)`,
		},
		{
			name:      "no object matches: an empty list and no query",
			namespace: "shop",
			selector:  "app=nothing",
			gr:        podsGR,
			metric:    "fpm_active_rate",
			want:      []custom_metrics.MetricValue{},
		},
		{
			name:      "objects match but none has a value: an empty list, as prometheus-adapter answers",
			namespace: "shop",
			selector:  "app=web",
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer:    always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "+Inf", 1764493200})),
			want:      []custom_metrics.MetricValue{},
			wantQuery: fpmQuery(`namespace="shop",pod_name=~"web-1|web-2|web-3"`, "pod_name"),
		},
		{
			name:      "objects match, no series: an empty list",
			namespace: "shop",
			selector:  "app=web",
			gr:        podsGR,
			metric:    "fpm_active_rate",
			answer:    always(http.StatusOK, vector()),
			want:      []custom_metrics.MetricValue{},
			wantQuery: fpmQuery(`namespace="shop",pod_name=~"web-1|web-2|web-3"`, "pod_name"),
		},
		{
			name:      "objects match, only NaN and nanAsZero: false: an empty list",
			namespace: "shop",
			selector:  "app=web",
			gr:        podsGR,
			metric:    "fpm_active_rate",
			keepNaN:   true,
			answer:    always(http.StatusOK, vector(sample{map[string]string{"pod_name": "web-1"}, "NaN", 1764493200})),
			want:      []custom_metrics.MetricValue{},
			wantQuery: fpmQuery(`namespace="shop",pod_name=~"web-1|web-2|web-3"`, "pod_name"),
		},
		{
			name:      "object cache failure is a 503",
			namespace: "shop",
			selector:  "app=web",
			gr:        podsGR,
			metric:    "fpm_active_rate",
			listErr:   errors.New("object cache not synced: pods not listed within 10s"),
			wantCode:  http.StatusServiceUnavailable,
			wantMsg:   "listing pods in namespace shop from the object cache: not available (request id ",
		},
		{
			name:      "a Prometheus error is an error",
			namespace: "shop",
			selector:  "app=web",
			gr:        podsGR,
			metric:    "jobs_waiting",
			answer:    always(http.StatusInternalServerError, "boom"),
			wantQuery: `sum(jobs_waiting{namespace="shop",pod=~"web-1|web-2|web-3"}) by (pod)`,
			wantCode:  http.StatusServiceUnavailable,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{answer: tc.answer, maxNames: tc.maxNames, keepNaN: tc.keepNaN})
			if tc.listErr != nil {
				e.objects.SetError(tc.listErr)
			}
			got, err := e.prov.GetMetricBySelector(context.Background(), tc.namespace, mustSelector(t, tc.selector),
				cmprovider.CustomMetricInfo{GroupResource: tc.gr, Namespaced: tc.namespace != "", Metric: tc.metric},
				labels.Everything())
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

func TestListAllMetrics(t *testing.T) {
	e := newEnv(t, envOptions{})
	got := e.prov.ListAllMetrics()
	// Series with a namespace label also serve their namespace, as in
	// prometheus-adapter.
	want := []cmprovider.CustomMetricInfo{
		{GroupResource: namespacesGR, Metric: "fpm_active_rate"},
		{GroupResource: namespacesGR, Metric: "jobs_waiting"},
		{GroupResource: namespacesGR, Metric: "namespace_cpu_used"},
		{GroupResource: nodesGR, Metric: "node_load1"},
		{GroupResource: podsGR, Namespaced: true, Metric: "fpm_active_rate"},
		{GroupResource: podsGR, Namespaced: true, Metric: "jobs_waiting"},
		{GroupResource: clusterQueuesGR, Metric: "kueue_pending_workloads"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListAllMetrics (-want +got):\n%s", diff)
	}
	if got := newEnv(t, envOptions{noIndex: true}).prov.ListAllMetrics(); len(got) != 0 {
		t.Errorf("ListAllMetrics before discovery = %v, want none", got)
	}
}

func ptr[T any](v T) *T { return &v }

func mustSelector(t testing.TB, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatalf("labels.Parse(%q): %v", s, err)
	}
	return sel
}

// checkAPIError checks err is a StatusError with code and a message
// containing msg, or nil when code is 0.
func checkAPIError(t *testing.T, err error, code int32, msg string) {
	t.Helper()
	if code == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("error = %v (%T), want an API status error with code %d", err, err, code)
	}
	if se.ErrStatus.Code != code {
		t.Errorf("code = %d, want %d (message %q)", se.ErrStatus.Code, code, se.ErrStatus.Message)
	}
	if !strings.Contains(se.ErrStatus.Message, msg) {
		t.Errorf("message = %q, want it to contain %q", se.ErrStatus.Message, msg)
	}
	if strings.Contains(se.ErrStatus.Message, "goroutine ") || strings.Contains(se.ErrStatus.Message, ".go:") {
		t.Errorf("message looks like a stack trace: %q", se.ErrStatus.Message)
	}
	checkNoLeak(t, se.ErrStatus.Message)
}

// checkQueries checks exactly one query was sent (want) or none ("").
func checkQueries(t *testing.T, sent []string, want string) {
	t.Helper()
	if want == "" {
		if len(sent) != 0 {
			t.Errorf("queries sent = %q, want none", sent)
		}
		return
	}
	if diff := cmp.Diff([]string{want}, sent); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
}

// checkNoLeak fails when an error message shows what only the adapter's
// log may: the Prometheus URL or the rendered PromQL.
func checkNoLeak(t *testing.T, msg string) {
	t.Helper()
	for _, leak := range []string{"http://", "127.0.0.1", "sum(", "max(", "{namespace=", "/api/v1/"} {
		if strings.Contains(msg, leak) {
			t.Errorf("message %q shows %q: the Prometheus URL and PromQL belong in the log", msg, leak)
		}
	}
}

// TestNotFoundNamesNoOtherNamespace: a caller allowed in one namespace
// learns nothing of the others (issue 21: the 404 listed them).
func TestNotFoundNamesNoOtherNamespace(t *testing.T) {
	e := newEnv(t, envOptions{fpmNamespaces: []string{"tenant-secret"}})
	_, errCustom := e.prov.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "tenant1", Name: "web-1"},
		fpmInfo, labels.Everything())
	checkAPIError(t, errCustom, http.StatusNotFound, "for pods web-1: Prometheus returned no sample with a finite value for it (rules[0])")
	for _, other := range []string{"shop", "blog", "tenant-secret"} {
		if strings.Contains(errCustom.Error(), other) {
			t.Errorf("message %q names namespace %q", errCustom, other)
		}
	}
}

// TestLimitsLeaveRealUseInside: a `*` over 5,000 pods (the largest real
// use) renders a query far inside MaxRenderedQueryBytes and answers; a
// selector over a limit is a 400 naming it, with no query sent.
func TestLimitsLeaveRealUseInside(t *testing.T) {
	objs := fake.NewObjects()
	var pods []fake.Object
	for i := range 5000 {
		pods = append(pods, fake.Object{Namespace: "shop", Name: fmt.Sprintf("web-%05d-%s", i, strings.Repeat("x", 40)), Labels: map[string]string{"app": "web"}})
	}
	objs.Add(podsGR, pods...)
	e := newEnv(t, envOptions{objects: objs, answer: always(http.StatusOK, vector(sample{map[string]string{"pod_name": pods[7].Name}, "1", 1764493200}))})
	list, err := e.prov.GetMetricBySelector(context.Background(), "shop", mustSelector(t, "app=web"), fpmInfo, labels.Everything())
	if err != nil {
		t.Fatalf("pods/* over 5,000 pods: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].DescribedObject.Name != pods[7].Name {
		t.Errorf("items = %+v, want the one pod with a sample", list.Items)
	}
	sent := e.prom.sent()
	if len(sent) != 1 || len(sent[0])*16 > limits.MaxRenderedQueryBytes {
		t.Fatalf("queries sent = %d, first %d bytes: want one of under 1/16 of the %d-byte limit", len(sent), len(sent[0]), limits.MaxRenderedQueryBytes)
	}
	t.Logf("pods/* over 5,000 pods: query of %d bytes (limit %d)", len(sent[0]), limits.MaxRenderedQueryBytes)

	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprintf("p%d", i)
	}
	_, err = e.prov.GetMetricBySelector(context.Background(), "shop", mustSelector(t, "app=web"), fpmInfo,
		mustSelector(t, "pod_name in ("+strings.Join(many, ",")+")"))
	checkAPIError(t, err, http.StatusBadRequest, "metricLabelSelector: requirement on \"pod_name\" has 1001 values, more than the limit of 1000")
	_, err = e.prov.GetMetricBySelector(context.Background(), "shop", mustSelector(t, "app in ("+strings.Join(many, ",")+")"), fpmInfo, labels.Everything())
	checkAPIError(t, err, http.StatusBadRequest, "labelSelector: requirement on \"app\" has 1001 values")
	_, err = e.prov.GetExternalMetric(context.Background(), "shop", mustSelector(t, "queue in ("+strings.Join(many, ",")+")"),
		cmprovider.ExternalMetricInfo{Metric: "rabbitmq_queue_length"})
	checkAPIError(t, err, http.StatusBadRequest, "labelSelector: requirement on \"queue\" has 1001 values")
	if n := len(e.prom.sent()); n != 1 {
		t.Errorf("%d queries sent, want none for the requests over a limit", n-1)
	}
}
