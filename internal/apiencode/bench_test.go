package apiencode

import (
	"fmt"
	"io"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
)

// podList is a pods/* answer as the provider builds it.
func podList(n int) *custom_metrics.MetricValueList {
	ts := metav1.NewTime(time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC))
	l := &custom_metrics.MetricValueList{Items: make([]custom_metrics.MetricValue, n)}
	for i := range l.Items {
		l.Items[i] = custom_metrics.MetricValue{
			DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", APIVersion: "/v1", Namespace: "load-test", Name: fmt.Sprintf("web-7d9f8c6b5-%05d", i)},
			Metric:          custom_metrics.MetricIdentifier{Name: "http_requests_per_second"},
			Timestamp:       ts,
			Value:           *resource.NewMilliQuantity(int64(1000+i*37), resource.DecimalSI),
		}
	}
	return l
}

// queueList is an external answer with labels.
func queueList(n int) *external_metrics.ExternalMetricValueList {
	ts := metav1.NewTime(time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC))
	l := &external_metrics.ExternalMetricValueList{Items: make([]external_metrics.ExternalMetricValue, n)}
	for i := range l.Items {
		l.Items[i] = external_metrics.ExternalMetricValue{
			MetricName:   "queue_depth",
			MetricLabels: map[string]string{"queue": fmt.Sprintf("q-%d", i), "region": "eu-west-1", "tier": "gold"},
			Timestamp:    ts,
			Value:        *resource.NewQuantity(int64(i*13), resource.DecimalSI),
		}
	}
	return l
}

// BenchmarkEncode compares the library's codec ("library") with the direct
// encoder ("direct"), both as the API server calls them: EncoderForVersion
// for the negotiated compact JSON serializer, then Encode to the response.
func BenchmarkEncode(b *testing.B) {
	s := serializer(b, runtime.ContentTypeJSON, false)
	encoders := []struct {
		name string
		ns   runtime.NegotiatedSerializer
	}{
		{"library", cmapiserver.Codecs},
		{"direct", NewNegotiatedSerializer(cmapiserver.Codecs)},
	}
	for _, n := range []int{100, 5000} {
		objs := []struct {
			name string
			gv   schema.GroupVersion
			obj  runtime.Object
		}{
			{"custom-v1beta2", customV1beta2, podList(n)},
			{"custom-v1beta1", customV1beta1, podList(n)},
			{"external-v1beta1", externalV1beta1, queueList(n)},
		}
		for _, o := range objs {
			for _, e := range encoders {
				b.Run(fmt.Sprintf("%s/items=%d/%s", o.name, n, e.name), func(b *testing.B) {
					b.ReportAllocs()
					var w countingWriter
					for b.Loop() {
						if err := e.ns.EncoderForVersion(s, o.gv).Encode(o.obj, &w); err != nil {
							b.Fatal(err)
						}
					}
					b.SetBytes(w.n / int64(b.N))
				})
			}
		}
	}
}

// countingWriter discards what it is given and counts it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)
