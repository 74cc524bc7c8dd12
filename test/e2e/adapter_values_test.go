//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cmv1beta1 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta1"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// API paths of the values test.
const (
	cmV1beta2 = "/apis/custom.metrics.k8s.io/v1beta2"
	cmV1beta1 = "/apis/custom.metrics.k8s.io/v1beta1"
	emV1beta1 = "/apis/external.metrics.k8s.io/v1beta1"
	valuesNS  = "av-pods"
)

// apiAnswer is the outcome of one GET through the aggregator.
type apiAnswer struct {
	body []byte
	code int
	err  error
}

// getAnswer is getRaw keeping the HTTP status and the error body.
func getAnswer(ctx context.Context, env *framework.Env, path string) apiAnswer {
	res := env.Client.Discovery().RESTClient().Get().RequestURI(path).Do(ctx)
	var a apiAnswer
	res.StatusCode(&a.code)
	a.body, a.err = res.Raw()
	return a
}

// wantError checks that an answer is an API error: HTTP code, and a
// metav1.Status body with that code, reason and a message containing each
// of msgs. (The discovery REST client does not decode Status bodies, so the
// body is decoded here.)
func (a apiAnswer) wantError(code int, reason metav1.StatusReason, msgs ...string) error {
	if a.err == nil {
		return fmt.Errorf("want HTTP %d %s, got HTTP %d: %s", code, reason, a.code, a.body)
	}
	var s metav1.Status
	if err := json.Unmarshal(a.body, &s); err != nil || s.Kind != "Status" {
		return fmt.Errorf("want HTTP %d %s, got HTTP %d without a Status body (%v): %s", code, reason, a.code, a.err, a.body)
	}
	if a.code != code || s.Code != int32(code) || s.Reason != reason || s.Status != metav1.StatusFailure {
		return fmt.Errorf("want HTTP %d %s, got HTTP %d: %s", code, reason, a.code, a.body)
	}
	for _, m := range msgs {
		if !strings.Contains(s.Message, m) {
			return fmt.Errorf("HTTP %d message %q lacks %q", a.code, s.Message, m)
		}
	}
	return nil
}

// objectRef is what a custom metrics item says it describes.
type objectRef struct{ Kind, APIVersion, Namespace string }

// customValuesV1beta2 decodes a v1beta2 MetricValueList into object name ->
// quantity text, checking that every item is metric about an object of ref.
func customValuesV1beta2(a apiAnswer, metric string, ref objectRef) (map[string]string, error) {
	list, err := decodeAnswer[cmv1beta2.MetricValueList](a)
	if err != nil {
		return nil, err
	}
	return customValues(list.Items, a.body, metric, ref)
}

// customValuesV1beta1 is customValuesV1beta2 for a v1beta1 answer.
func customValuesV1beta1(a apiAnswer, metric string, ref objectRef) (map[string]string, error) {
	list, err := decodeAnswer[cmv1beta1.MetricValueList](a)
	if err != nil {
		return nil, err
	}
	items := make([]cmv1beta2.MetricValue, len(list.Items))
	for i, it := range list.Items {
		items[i] = cmv1beta2.MetricValue{DescribedObject: it.DescribedObject, Metric: cmv1beta2.MetricIdentifier{Name: it.MetricName}, Value: it.Value}
	}
	return customValues(items, a.body, metric, ref)
}

func customValues(items []cmv1beta2.MetricValue, body []byte, metric string, ref objectRef) (map[string]string, error) {
	got := map[string]string{}
	for _, it := range items {
		o := it.DescribedObject
		if it.Metric.Name != metric || (objectRef{o.Kind, o.APIVersion, o.Namespace}) != ref {
			return nil, fmt.Errorf("item %s/%s %s (%s %s): want metric %s of a %+v", o.Namespace, o.Name, it.Metric.Name, o.Kind, o.APIVersion, metric, ref)
		}
		if _, dup := got[o.Name]; dup {
			return nil, fmt.Errorf("object %s twice in %s", o.Name, body)
		}
		got[o.Name] = it.Value.String()
	}
	return got, nil
}

// externalValues decodes an ExternalMetricValueList into item labels
// (selector syntax, "" for none) -> quantity text.
func externalValues(a apiAnswer, metric string) (map[string]string, error) {
	list, err := decodeAnswer[emv1beta1.ExternalMetricValueList](a)
	if err != nil {
		return nil, err
	}
	got := map[string]string{}
	for _, it := range list.Items {
		k := labels.Set(it.MetricLabels).String()
		if it.MetricName != metric {
			return nil, fmt.Errorf("item %s of metric %s, want %s", k, it.MetricName, metric)
		}
		if _, dup := got[k]; dup {
			return nil, fmt.Errorf("labels {%s} twice in %s", k, a.body)
		}
		got[k] = it.Value.String()
	}
	return got, nil
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

// sameQuantity compares quantity texts by value ("1500m" == "1.5"); other
// strings (map keys are not compared with it) must be equal.
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

// sel is a labelSelector query parameter.
func sel(s string) string { return "?labelSelector=" + url.QueryEscape(s) }

// TestAdapterValues runs, through the real aggregator and a real Prometheus,
// the value handling that the provider's unit tests cover with httptest:
// metrics of cluster-scoped objects (nodes, namespaces), samples that are
// NaN (0 by default, no value with nanAsZero: false), +Inf or -Inf, pods
// without a series, lists whose objects all lack a value (200, empty),
// defaultValue, a query Prometheus rejects, and Prometheus going away.
// Every answer is compared value by value, and no error message shows
// the Prometheus URL, PromQL or a namespace other than the request's. It runs against the suite's Prometheus (3.x by default,
// $PROMSCALER_PROMETHEUS to choose) and, when installed and not already
// that one, Debian's 2.42, each with its own control plane.
func TestAdapterValues(t *testing.T) {
	bins := []string{""}
	def := os.Getenv(framework.EnvPrometheus)
	if _, err := os.Stat(debianPrometheus); err == nil && def != debianPrometheus {
		bins = append(bins, debianPrometheus)
	}
	for _, bin := range bins {
		name := "prometheus-default"
		if bin != "" {
			name = "prometheus-debian"
		}
		t.Run(name, func(t *testing.T) { testAdapterValues(t, bin) })
	}
}

// testAdapterValues is TestAdapterValues against one Prometheus binary
// ("" for the suite's default).
func testAdapterValues(t *testing.T, promBinary string) {
	t0 := time.Now()
	env := framework.New(t, framework.Config{})
	requireAdapter(t, env)
	x, addr := serveExporter(t)
	prom := env.MustStartPrometheus(t, framework.PrometheusConfig{
		Binary:  promBinary,
		Targets: []framework.ScrapeTarget{{Job: "exporter", Targets: []string{addr}, HonorLabels: true}},
	})
	ctx := ctxFor(t, 3*time.Minute)
	if v, err := runVersion(ctx, prom.Process.Args[0]); err == nil {
		t.Logf("%s", v)
	}
	must := fatalOn(t)

	// Nodes, created through the API (nothing runs on them). av-n4 has no
	// series; av-ghost has a series and no Node.
	nodes := map[string]string{"av-n1": "a", "av-n2": "a", "av-n3": "b", "av-n4": "a"}
	for name, zone := range nodes {
		_, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"av-zone": zone},
		}}, metav1.CreateOptions{})
		must(err)
	}
	for node, v := range map[string]float64{"av-n1": 1.5, "av-n2": 2, "av-n3": 4, "av-ghost": 9} {
		must(x.Set(exporter.Series{Name: "node_thing", Labels: map[string]string{"node": node}, Value: v}))
	}

	// Namespaces: av-nan's value is NaN, av-none has no series.
	for _, ns := range []string{valuesNS, "av-nan", "av-none"} {
		must(env.EnsureNamespace(ctx, ns))
	}
	for ns, v := range map[string]float64{valuesNS: 3, "av-nan": math.NaN()} {
		must(x.Set(exporter.Series{Name: "namespace_thing", Labels: map[string]string{"namespace": ns}, Value: v}))
	}

	// Pods: finite values (one beyond what int64 milli-units hold), NaN,
	// ±Inf, and one without a series; p-gone has a series and no Pod.
	podValues := map[string]float64{
		"p-ok": 1.5, "p-neg": -2.5, "p-big": 1e20,
		"p-nan": math.NaN(), "p-pinf": math.Inf(1), "p-ninf": math.Inf(-1),
		"p-gone": 5,
	}
	for pod, v := range podValues {
		must(x.Set(exporter.Series{Name: "pod_thing", Labels: map[string]string{"namespace": valuesNS, "pod": pod}, Value: v}))
	}
	for kind, pods := range map[string][]string{
		"finite": {"p-ok", "p-neg", "p-big"},
		"notnum": {"p-nan", "p-pinf", "p-ninf"},
		"absent": {"p-absent"},
	} {
		_, err := env.CreateReadyPods(ctx, valuesNS, map[string]string{"av-value": kind}, time.Minute, time.Minute, pods...)
		must(err)
	}

	// External series by case.
	for c, v := range map[string]float64{"ok": 42, "neg": -1, "nan": math.NaN(), "pinf": math.Inf(1), "ninf": math.Inf(-1)} {
		must(x.Set(exporter.Series{Name: "ext_thing", Labels: map[string]string{"case": c}, Value: v}))
	}

	// Every series scraped before the adapter's first discovery.
	_, err := prom.WaitForQuery(ctx, `count(node_thing) + count(namespace_thing) + count(pod_thing) + count(ext_thing) == 18`, 1, time.Minute)
	must(err)
	env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: testdata("adapter-values-config.yaml"), PrometheusURL: prom.URL})
	t.Logf("stack, objects and series ready after %s", time.Since(t0).Round(time.Millisecond))

	nodeRef := objectRef{Kind: "Node", APIVersion: "v1"}
	podRef := objectRef{Kind: "Pod", APIVersion: "v1", Namespace: valuesNS}
	podsPath := cmV1beta2 + "/namespaces/" + valuesNS + "/pods/"
	wantFinite := map[string]string{"p-ok": "1.5", "p-neg": "-2.5", "p-big": "1e20"}
	wantValues := map[string]string{"p-nan": "0"} // pod_thing: NaN is 0
	for k, v := range wantFinite {
		wantValues[k] = v
	}

	// Discovery has served each rule once its first answer is complete.
	eventually(t, ctx, 60*time.Second, "first complete answers", func(ctx context.Context) error {
		got, err := customValuesV1beta2(getAnswer(ctx, env, cmV1beta2+"/nodes/*/node_thing"), "node_thing", nodeRef)
		if err != nil {
			return fmt.Errorf("nodes: %w", err)
		}
		if err := diffValues(map[string]string{"av-n1": "1.5", "av-n2": "2", "av-n3": "4"}, got); err != nil {
			return fmt.Errorf("nodes: %w", err)
		}
		for _, m := range []string{"pod_thing", "pod_thing_keep_nan", "pod_thing_or_default", "pod_thing_bad_query"} {
			// pod_thing_bad_query answers 500 once discovered, 404 before.
			if ans := getAnswer(ctx, env, podsPath+"p-ok/"+m); ans.code == http.StatusNotFound {
				return fmt.Errorf("%s not discovered yet: %v", m, ans.err)
			}
		}
		for _, m := range []string{"ext_thing", "ext_thing_or_default", "ext_thing_keep_nan"} {
			if ans := getAnswer(ctx, env, emV1beta1+"/namespaces/"+valuesNS+"/"+m+sel("case=ok")); ans.err != nil {
				return fmt.Errorf("%s: %v", m, ans.err)
			}
		}
		if ans := getAnswer(ctx, env, cmV1beta2+"/namespaces/"+valuesNS+"/metrics/namespace_thing"); ans.err != nil {
			return fmt.Errorf("namespace_thing: %v", ans.err)
		}
		return nil
	})
	t.Logf("adapter serving every rule after %s", time.Since(t0).Round(time.Millisecond))

	// check runs one request and its assertion (no retries: the data is
	// static and discovered).
	check := func(t *testing.T, what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	// noLeak checks an error answer shows neither Prometheus' address nor
	// PromQL (issue 21: they go to the adapter's log, under the request
	// id the message carries).
	noLeak := func(t *testing.T, what string, a apiAnswer) {
		t.Helper()
		for _, leak := range []string{prom.URL, "127.0.0.1", "sum(", "rate(", "{namespace="} {
			if strings.Contains(string(a.body), leak) {
				t.Errorf("%s: answer shows %q: %s", what, leak, a.body)
			}
		}
		if !strings.Contains(string(a.body), "request id ") {
			t.Errorf("%s: answer carries no request id: %s", what, a.body)
		}
	}
	values := func(want map[string]string) func(map[string]string, error) error {
		return func(got map[string]string, err error) error {
			if err != nil {
				return err
			}
			return diffValues(want, got)
		}
	}

	t.Run("node metric", func(t *testing.T) {
		for _, c := range []struct {
			path string
			want map[string]string
		}{
			{"/nodes/av-n1/node_thing", map[string]string{"av-n1": "1.5"}},
			{"/nodes/*/node_thing" + sel("av-zone=a"), map[string]string{"av-n1": "1.5", "av-n2": "2"}},
			{"/nodes/*/node_thing" + sel("av-zone in (b)"), map[string]string{"av-n3": "4"}},
		} {
			check(t, "v1beta2 "+c.path, values(c.want)(customValuesV1beta2(getAnswer(ctx, env, cmV1beta2+c.path), "node_thing", nodeRef)))
			check(t, "v1beta1 "+c.path, values(c.want)(customValuesV1beta1(getAnswer(ctx, env, cmV1beta1+c.path), "node_thing", nodeRef)))
		}
		// A Node without a series (av-ghost, a series without a Node, is
		// left out of every nodes/* answer above).
		check(t, "av-n4 by name", getAnswer(ctx, env, cmV1beta2+"/nodes/av-n4/node_thing").wantError(http.StatusNotFound, metav1.StatusReasonNotFound, "no sample with a finite value"))
		// No Node selected: an empty list (objects without values would be a 404).
		check(t, "nodes/* of zone c", values(map[string]string{})(customValuesV1beta2(getAnswer(ctx, env, cmV1beta2+"/nodes/*/node_thing"+sel("av-zone=c")), "node_thing", nodeRef)))
		// Nodes are cluster-scoped: asking in a namespace says so.
		check(t, "node metric in a namespace", getAnswer(ctx, env, cmV1beta2+"/namespaces/"+valuesNS+"/nodes/av-n1/node_thing").
			wantError(http.StatusNotFound, metav1.StatusReasonNotFound, "ask without a namespace"))
	})

	t.Run("namespace metric", func(t *testing.T) {
		nsRef := objectRef{Kind: "Namespace", APIVersion: "v1"}
		want := map[string]string{valuesNS: "3"}
		check(t, "v1beta2", values(want)(customValuesV1beta2(getAnswer(ctx, env, cmV1beta2+"/namespaces/"+valuesNS+"/metrics/namespace_thing"), "namespace_thing", nsRef)))
		check(t, "v1beta1", values(want)(customValuesV1beta1(getAnswer(ctx, env, cmV1beta1+"/namespaces/"+valuesNS+"/metrics/namespace_thing"), "namespace_thing", nsRef)))
		check(t, "av-nan (NaN is 0)", values(map[string]string{"av-nan": "0"})(customValuesV1beta2(getAnswer(ctx, env, cmV1beta2+"/namespaces/av-nan/metrics/namespace_thing"), "namespace_thing", nsRef)))
		check(t, "av-none", getAnswer(ctx, env, cmV1beta2+"/namespaces/av-none/metrics/namespace_thing").wantError(http.StatusNotFound, metav1.StatusReasonNotFound, "no sample with a finite value"))
	})

	t.Run("pods NaN Inf absent", func(t *testing.T) {
		check(t, "pods/*", values(wantValues)(customValuesV1beta2(getAnswer(ctx, env, podsPath+"*/pod_thing"), "pod_thing", podRef)))
		check(t, "pods/* v1beta1", values(wantValues)(customValuesV1beta1(getAnswer(ctx, env, cmV1beta1+"/namespaces/"+valuesNS+"/pods/*/pod_thing"), "pod_thing", podRef)))
		for pod, v := range wantValues {
			check(t, pod, values(map[string]string{pod: v})(customValuesV1beta2(getAnswer(ctx, env, podsPath+pod+"/pod_thing"), "pod_thing", podRef)))
		}
		for _, pod := range []string{"p-pinf", "p-ninf", "p-absent"} {
			check(t, pod+" by name", getAnswer(ctx, env, podsPath+pod+"/pod_thing").
				wantError(http.StatusNotFound, metav1.StatusReasonNotFound, pod, "no sample with a finite value"))
		}
		// kubectl get --raw shows the adapter's reason.
		out, err := env.Kubectl(ctx, "get", "--raw", podsPath+"p-pinf/pod_thing")
		if err == nil || !strings.Contains(err.Error(), "Error from server (NotFound): the server could not find the metric pod_thing for pods p-pinf: Prometheus returned no sample with a finite value for it") {
			t.Errorf("kubectl get --raw p-pinf: want the NotFound reason, got %q, %v", out, err)
		}
		// NaN is 0; ±Inf is no value.
		check(t, "pods/* of notnum", values(map[string]string{"p-nan": "0"})(customValuesV1beta2(getAnswer(ctx, env, podsPath+"*/pod_thing"+sel("av-value=notnum")), "pod_thing", podRef)))
		// Only pods without a value selected: 200 with an empty list, as
		// prometheus-adapter answers (never a made-up value).
		check(t, "pods/* of absent", values(map[string]string{})(customValuesV1beta2(getAnswer(ctx, env, podsPath+"*/pod_thing"+sel("av-value=absent")), "pod_thing", podRef)))
	})

	t.Run("pods nanAsZero false", func(t *testing.T) {
		check(t, "pods/*", values(wantFinite)(customValuesV1beta2(getAnswer(ctx, env, podsPath+"*/pod_thing_keep_nan"), "pod_thing_keep_nan", podRef)))
		check(t, "pods/* of notnum", values(map[string]string{})(customValuesV1beta2(getAnswer(ctx, env, podsPath+"*/pod_thing_keep_nan"+sel("av-value=notnum")), "pod_thing_keep_nan", podRef)))
		check(t, "p-nan by name", getAnswer(ctx, env, podsPath+"p-nan/pod_thing_keep_nan").
			wantError(http.StatusNotFound, metav1.StatusReasonNotFound, "p-nan", "no sample with a finite value"))
	})

	t.Run("404 names no other namespace", func(t *testing.T) {
		// pod_thing's series are all in av-pods; a caller asking in
		// av-none must not learn that name.
		p := cmV1beta2 + "/namespaces/av-none/pods/p-ok/pod_thing"
		a := getAnswer(ctx, env, p)
		check(t, p, a.wantError(http.StatusNotFound, metav1.StatusReasonNotFound, "no sample with a finite value"))
		if strings.Contains(string(a.body), valuesNS) {
			t.Errorf("%s: the 404 names namespace %s: %s", p, valuesNS, a.body)
		}
		// No pod in av-none: an empty list.
		check(t, "av-none pods/*", values(map[string]string{})(customValuesV1beta2(getAnswer(ctx, env, cmV1beta2+"/namespaces/av-none/pods/*/pod_thing"), "pod_thing", objectRef{Kind: "Pod", APIVersion: "v1", Namespace: "av-none"})))
	})

	t.Run("pods defaultValue", func(t *testing.T) {
		// NaN is a value (0); the default stands in for ±Inf and absence.
		want := map[string]string{"p-pinf": "7.5", "p-ninf": "7.5", "p-absent": "7.5"}
		for k, v := range wantValues {
			want[k] = v
		}
		check(t, "pods/*", values(want)(customValuesV1beta2(getAnswer(ctx, env, podsPath+"*/pod_thing_or_default"), "pod_thing_or_default", podRef)))
		check(t, "pods/* of notnum", values(map[string]string{"p-nan": "0", "p-pinf": "7.5", "p-ninf": "7.5"})(
			customValuesV1beta2(getAnswer(ctx, env, podsPath+"*/pod_thing_or_default"+sel("av-value=notnum")), "pod_thing_or_default", podRef)))
		for _, pod := range []string{"p-ok", "p-nan", "p-absent"} {
			check(t, pod+" by name", values(map[string]string{pod: want[pod]})(
				customValuesV1beta2(getAnswer(ctx, env, podsPath+pod+"/pod_thing_or_default"), "pod_thing_or_default", podRef)))
		}
		// A name no pod has (an HPA target's typo) never reads as the default.
		check(t, "p-typo by name", getAnswer(ctx, env, podsPath+"p-typo/pod_thing_or_default").
			wantError(http.StatusNotFound, metav1.StatusReasonNotFound, "p-typo", "given only to existing objects"))
	})

	t.Run("external NaN Inf absent defaultValue", func(t *testing.T) {
		ext := emV1beta1 + "/namespaces/" + valuesNS + "/"
		for _, c := range []struct {
			metric, selector string
			want             map[string]string
		}{
			{"ext_thing", "", map[string]string{"case=ok": "42", "case=neg": "-1", "case=nan": "0"}},
			{"ext_thing", "case in (ok,nan,pinf)", map[string]string{"case=ok": "42", "case=nan": "0"}},
			{"ext_thing", "case=nan", map[string]string{"case=nan": "0"}},
			// No value: 200 with an empty list, as prometheus-adapter answers.
			{"ext_thing", "case=pinf", map[string]string{}},
			{"ext_thing", "case=ninf", map[string]string{}},
			{"ext_thing", "case=absent", map[string]string{}},
			{"ext_thing_keep_nan", "", map[string]string{"case=ok": "42", "case=neg": "-1"}},
			{"ext_thing_keep_nan", "case=nan", map[string]string{}},
			{"ext_thing_or_default", "case in (ok,nan)", map[string]string{"case=ok": "42", "case=nan": "0"}},
			{"ext_thing_or_default", "case=nan", map[string]string{"case=nan": "0"}},
			{"ext_thing_or_default", "case=ninf", map[string]string{"": "250m"}},
			{"ext_thing_or_default", "case=absent", map[string]string{"": "250m"}},
			{"ext_query_or_default", "case in (ok,neg)", map[string]string{"": "41"}},
			{"ext_query_or_default", "case=pinf", map[string]string{"": "0"}},
			{"ext_query_or_default", "case=absent", map[string]string{"": "0"}},
		} {
			path := ext + c.metric
			if c.selector != "" {
				path += sel(c.selector)
			}
			ans := getAnswer(ctx, env, path)
			check(t, c.metric+" "+c.selector, values(c.want)(externalValues(ans, c.metric)))
		}
		// A namespaced rule mapping no namespace label serves nothing,
		// and says why.
		check(t, "ext_thing_unscoped", getAnswer(ctx, env, ext+"ext_thing_unscoped").wantError(http.StatusNotFound, metav1.StatusReasonNotFound,
			"discovers it but is namespaced (resources.namespaced defaults to true) and maps no label to namespaces"))
	})

	t.Run("request limits", func(t *testing.T) {
		// 1,001 values in one `in`: a 400 naming the limit, through the
		// aggregator, before anything reaches Prometheus.
		vs := make([]string, 1001)
		for i := range vs {
			vs[i] = fmt.Sprintf("v%d", i)
		}
		in := "(" + strings.Join(vs, ",") + ")"
		for _, p := range []string{
			podsPath + "*/pod_thing" + sel("av-value in "+in),
			podsPath + "*/pod_thing?metricLabelSelector=" + url.QueryEscape("pod in "+in),
			emV1beta1 + "/namespaces/" + valuesNS + "/ext_thing" + sel("case in "+in),
		} {
			check(t, p[:60], getAnswer(ctx, env, p).wantError(http.StatusBadRequest, metav1.StatusReasonBadRequest, "has 1001 values, more than the limit of 1000"))
		}
	})

	t.Run("query rejected by Prometheus", func(t *testing.T) {
		// A 500 naming the cause, although the rule has a defaultValue.
		for _, p := range []string{"p-ok/pod_thing_bad_query", "*/pod_thing_bad_query"} {
			a := getAnswer(ctx, env, podsPath+p)
			check(t, p, a.wantError(http.StatusInternalServerError, metav1.StatusReasonInternalError, "Prometheus rejected the query"))
			noLeak(t, p, a)
		}
	})

	t.Run("prometheus down", func(t *testing.T) {
		prom.Process.Stop(10 * time.Second)
		// 503 saying why: never a value, a zero or the defaultValue.
		for _, p := range []string{
			podsPath + "p-ok/pod_thing",
			podsPath + "*/pod_thing",
			podsPath + "p-absent/pod_thing_or_default",
			podsPath + "*/pod_thing_or_default",
			cmV1beta2 + "/nodes/*/node_thing" + sel("av-zone=a"),
			cmV1beta1 + "/nodes/av-n1/node_thing",
			emV1beta1 + "/namespaces/" + valuesNS + "/ext_thing_or_default" + sel("case=absent"),
			emV1beta1 + "/namespaces/" + valuesNS + "/ext_query_or_default" + sel("case=absent"),
		} {
			a := getAnswer(ctx, env, p)
			check(t, p, a.wantError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "Prometheus did not answer"))
			noLeak(t, p, a)
		}
	})
	t.Logf("done after %s", time.Since(t0).Round(time.Millisecond))
}
