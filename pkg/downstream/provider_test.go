package downstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

func TestForwardsDownstreamOnlyMetrics(t *testing.T) {
	d := newFakeDownstream(t)
	s, ours, _ := setup(t, d, "")
	custom, external := s.WrapCustom(ours), s.WrapExternal(ours)
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	msel := labels.SelectorFromSet(labels.Set{"le": "1"})

	list, err := custom.GetMetricBySelector(t.Context(), "ns", sel, cmprovider.CustomMetricInfo{GroupResource: pods, Namespaced: true, Metric: "downstream_only"}, msel)
	if err != nil {
		t.Fatal(err)
	}
	w := int64(60)
	want := []custom_metrics.MetricValue{
		{DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-1", APIVersion: "v1"}, Timestamp: metav1.Unix(1700000000, 0), WindowSeconds: &w,
			Metric: custom_metrics.MetricIdentifier{Name: "downstream_only", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"sel": "app=web"}}}, Value: resource.MustParse("1500m")},
		{DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-2", APIVersion: "v1"}, Timestamp: metav1.Unix(1700000000, 0), WindowSeconds: &w,
			Metric: custom_metrics.MetricIdentifier{Name: "downstream_only", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"sel": "app=web"}}}, Value: resource.MustParse("7")},
	}
	if diff := cmp.Diff(want, list.Items); diff != "" {
		t.Errorf("forwarded custom metric (-want +got):\n%s", diff)
	}
	one, err := custom.GetMetricByName(t.Context(), types.NamespacedName{Namespace: "ns", Name: "web-1"}, cmprovider.CustomMetricInfo{GroupResource: pods, Namespaced: true, Metric: "downstream_only"}, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if one.DescribedObject.Name != "web-1" || one.Value.String() != "1500m" {
		t.Errorf("forwarded by name = %+v", one)
	}
	ext, err := external.GetExternalMetric(t.Context(), "ns", msel, cmprovider.ExternalMetricInfo{Metric: "queue_depth"})
	if err != nil {
		t.Fatal(err)
	}
	wantExt := []external_metrics.ExternalMetricValue{{MetricName: "queue_depth", MetricLabels: map[string]string{"queue": "jobs", "sel": "le=1"},
		Timestamp: metav1.Unix(1700000000, 0), Value: resource.MustParse("42")}}
	if diff := cmp.Diff(wantExt, ext.Items); diff != "" {
		t.Errorf("forwarded external metric (-want +got):\n%s", diff)
	}
	wantReqs := []string{
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/%2A/downstream_only?labelSelector=app%3Dweb&metricLabelSelector=le%3D1",
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/web-1/downstream_only",
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue_depth?labelSelector=le%3D1",
	}
	if diff := cmp.Diff(wantReqs, d.metricRequests()); diff != "" {
		t.Errorf("requests the downstream saw (-want +got):\n%s", diff)
	}
	for _, a := range d.auth {
		if a != "Bearer adapter-token" {
			t.Errorf("downstream saw Authorization %q, want the adapter's token", a)
		}
	}
	if got := ours.askedFor(); len(got) != 0 {
		t.Errorf("promscaler was asked %q for downstream-only metrics", got)
	}
}

func TestOursAndOverlapsServedByUs(t *testing.T) {
	d := newFakeDownstream(t)
	s, ours, reg := setup(t, d, "")
	custom, external := s.WrapCustom(ours), s.WrapExternal(ours)
	for _, m := range []string{"ours", "shared", "absent_everywhere"} {
		if _, err := custom.GetMetricBySelector(t.Context(), "ns", labels.Everything(), cmprovider.CustomMetricInfo{GroupResource: pods, Namespaced: true, Metric: m}, labels.Everything()); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{"ours_ext", "shared_ext"} {
		if _, err := external.GetExternalMetric(t.Context(), "ns", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: m}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"custom ns/* ours", "custom ns/* shared", "custom ns/* absent_everywhere", "external ns ours_ext", "external ns shared_ext"}
	if diff := cmp.Diff(want, ours.askedFor()); diff != "" {
		t.Errorf("promscaler was asked (-want +got):\n%s", diff)
	}
	if got := d.metricRequests(); len(got) != 0 {
		t.Errorf("downstream asked %q for metrics promscaler serves", got)
	}
	wantOverlaps := []Overlap{
		{API: Custom, Name: "pods/shared", Downstream: "sample", ServedBy: "promscaler"},
		{API: External, Name: "shared_ext", Downstream: "sample", ServedBy: "promscaler"},
	}
	if diff := cmp.Diff(wantOverlaps, s.Overlaps()); diff != "" {
		t.Errorf("overlaps (-want +got):\n%s", diff)
	}
	exp := `
# HELP promscaler_downstream_overlap 1 for each metric both promscaler and a downstream serve; served_by says who answers it (promscaler unless the configuration routes it to the downstream).
# TYPE promscaler_downstream_overlap gauge
promscaler_downstream_overlap{api="custom",downstream="sample",metric="pods/shared",served_by="promscaler"} 1
promscaler_downstream_overlap{api="external",downstream="sample",metric="shared_ext",served_by="promscaler"} 1
# HELP promscaler_downstream_metrics Metrics the downstream lists in its last good discovery document, by api.
# TYPE promscaler_downstream_metrics gauge
promscaler_downstream_metrics{api="custom",downstream="sample"} 2
promscaler_downstream_metrics{api="external",downstream="sample"} 2
# HELP promscaler_downstream_up 1 while the downstream answers, 0 while it is known down (its metrics answer 503 at once until a probe gets an answer) or not resolved.
# TYPE promscaler_downstream_up gauge
promscaler_downstream_up{downstream="sample"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "promscaler_downstream_overlap", "promscaler_downstream_metrics", "promscaler_downstream_up"); err != nil {
		t.Error(err)
	}
}

func TestRoutesSendOverlapsDownstream(t *testing.T) {
	d := newFakeDownstream(t)
	s, ours, _ := setup(t, d, "  routes:\n    custom: [shared]\n    external: [shared_ext]\n")
	if _, err := s.WrapCustom(ours).GetMetricBySelector(t.Context(), "ns", labels.Everything(), cmprovider.CustomMetricInfo{GroupResource: pods, Namespaced: true, Metric: "shared"}, labels.Everything()); err != nil {
		t.Fatal(err)
	}
	// The downstream answers 404 for shared_ext: passed on unchanged.
	_, err := s.WrapExternal(ours).GetExternalMetric(t.Context(), "ns", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "shared_ext"})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "no such metric at the downstream") {
		t.Errorf("routed shared_ext = %v, want the downstream's 404", err)
	}
	if got := ours.askedFor(); len(got) != 0 {
		t.Errorf("promscaler was asked %q for routed metrics", got)
	}
	for _, o := range s.Overlaps() {
		if o.ServedBy != "sample" {
			t.Errorf("overlap %+v: want served by the downstream", o)
		}
	}
}

func TestDownstreamStatusPassedOn(t *testing.T) {
	d := newFakeDownstream(t)
	s, ours, reg := setup(t, d, "")
	_, err := s.WrapExternal(ours).GetExternalMetric(t.Context(), "forbidden", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "queue_depth"})
	if !apierrors.IsForbidden(err) || err.Error() != "downstream says no" {
		t.Errorf("err = %v, want the downstream's 403 unchanged", err)
	}
	if got := testutil.ToFloat64(s.metrics.requests.WithLabelValues("sample", "external", "403")); got != 1 {
		t.Errorf("requests{code=403} = %v, want 1", got)
	}
	_ = reg
}

func TestUnionDiscovery(t *testing.T) {
	d := newFakeDownstream(t)
	s, ours, _ := setup(t, d, "")
	gotCustom := s.WrapCustom(ours).ListAllMetrics()
	wantCustom := []cmprovider.CustomMetricInfo{
		{GroupResource: pods, Namespaced: true, Metric: "ours"},
		{GroupResource: pods, Namespaced: true, Metric: "shared"},
		{GroupResource: pods, Namespaced: true, Metric: "downstream_only"},
	}
	if diff := cmp.Diff(wantCustom, gotCustom); diff != "" {
		t.Errorf("custom union (-want +got):\n%s", diff)
	}
	gotExt := s.WrapExternal(ours).ListAllExternalMetrics()
	wantExt := []cmprovider.ExternalMetricInfo{{Metric: "ours_ext"}, {Metric: "shared_ext"}, {Metric: "queue_depth"}}
	if diff := cmp.Diff(wantExt, gotExt); diff != "" {
		t.Errorf("external union (-want +got):\n%s", diff)
	}
	// A downstream that stops answering keeps its last list.
	d.Close()
	s.Refresh(t.Context())
	if diff := cmp.Diff(wantExt, s.WrapExternal(ours).ListAllExternalMetrics()); diff != "" {
		t.Errorf("external union after the downstream stopped (-want +got):\n%s", diff)
	}
	st := s.Status()
	if len(st) != 1 || st[0].DiscoveryError == "" || st[0].External != 2 {
		t.Errorf("status after a failed discovery = %+v", st)
	}
}

func TestDownstreamDownAnswers503AndOursServe(t *testing.T) {
	d := newFakeDownstream(t)
	s, ours, reg := setup(t, d, "  breaker: {failures: 2, openFor: 1h}\n")
	d.Close() // a real listener gone: connections refused
	ext := s.WrapExternal(ours)
	info := cmprovider.ExternalMetricInfo{Metric: "queue_depth"}
	for i := range 3 {
		_, err := ext.GetExternalMetric(t.Context(), "ns", labels.Everything(), info)
		if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), `downstream metrics server "sample"`) {
			t.Fatalf("request %d: err = %v, want 503 naming the downstream", i, err)
		}
		if i == 2 && !strings.Contains(err.Error(), "known down") {
			t.Errorf("after the breaker opened: %v, want it to say the downstream is known down", err)
		}
	}
	if _, err := ext.GetExternalMetric(t.Context(), "ns", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "ours_ext"}); err != nil {
		t.Errorf("our metric while the downstream is down: %v", err)
	}
	if got := testutil.ToFloat64(s.metrics.requests.WithLabelValues("sample", "external", "503")); got != 3 {
		t.Errorf("requests{code=503} = %v, want 3", got)
	}
	lines := s.Details()
	if len(lines) != 1 || !strings.Contains(lines[0], `downstream "sample": down since`) {
		t.Errorf("readyz details = %q", lines)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader("# HELP promscaler_downstream_up 1 while the downstream answers, 0 while it is known down (its metrics answer 503 at once until a probe gets an answer) or not resolved.\n# TYPE promscaler_downstream_up gauge\npromscaler_downstream_up{downstream=\"sample\"} 0\n"), "promscaler_downstream_up"); err != nil {
		t.Error(err)
	}
}

// A slow downstream answers 503 at its timeout, and ours are served while
// its requests hang.
func TestSlowDownstreamTimesOutAndOursDoNotWait(t *testing.T) {
	d := newFakeDownstream(t)
	s, ours, _ := setup(t, d, "  timeout: 2s\n")
	d.mu.Lock()
	d.block = make(chan struct{})
	d.mu.Unlock()
	defer close(d.block)
	ext := s.WrapExternal(ours)
	errs := make(chan error, 1)
	go func() {
		_, err := ext.GetExternalMetric(context.Background(), "ns", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "queue_depth"})
		errs <- err
	}()
	for len(d.metricRequests()) == 0 { // until the forwarded request hangs at the downstream
		select {
		case err := <-errs:
			t.Fatalf("forwarded request ended before reaching the downstream: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	if _, err := ext.GetExternalMetric(t.Context(), "ns", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: "ours_ext"}); err != nil {
		t.Fatalf("our metric while the downstream hangs: %v", err)
	}
	select {
	case err := <-errs:
		t.Fatalf("forwarded request finished before ours was served: %v", err)
	default:
	}
	if err := <-errs; !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "did not answer within its timeout") {
		t.Errorf("slow downstream: %v, want 503 at its timeout", err)
	}
}

func TestServedByHeader(t *testing.T) {
	d := newFakeDownstream(t)
	s, ours, _ := setup(t, d, "")
	ext := s.WrapExternal(ours)
	h := WithServedBy(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := ext.GetExternalMetric(r.Context(), "ns", labels.Everything(), cmprovider.ExternalMetricInfo{Metric: r.URL.Query().Get("m")})
		if err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusOK)
	}))
	for m, want := range map[string]string{"queue_depth": "sample", "ours_ext": "promscaler"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x?m="+m, nil))
		if got := rec.Header().Get(ServedByHeader); got != want {
			t.Errorf("%s: %s = %q, want %q", m, ServedByHeader, got, want)
		}
	}
}
