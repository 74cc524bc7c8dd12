package apiencode

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apitypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmv1beta1 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta1"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
)

// serializer returns the library's serializer for a media type, as the
// API server negotiates it.
func serializer(t testing.TB, mediaType string, pretty bool) runtime.Encoder {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(cmapiserver.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	if pretty {
		return info.PrettySerializer
	}
	return info.Serializer
}

// encodeBoth encodes obj for gv with the library's codec and with the
// wrapped one, for the serializer s.
func encodeBoth(t testing.TB, s runtime.Encoder, gv schema.GroupVersion, obj runtime.Object) (want, got []byte) {
	t.Helper()
	var wb, gb bytes.Buffer
	if err := cmapiserver.Codecs.EncoderForVersion(s, gv).Encode(obj, &wb); err != nil {
		t.Fatalf("library encode: %v", err)
	}
	if err := NewNegotiatedSerializer(cmapiserver.Codecs).EncoderForVersion(s, gv).Encode(obj, &gb); err != nil {
		t.Fatalf("direct encode: %v", err)
	}
	return wb.Bytes(), gb.Bytes()
}

// checkSame encodes obj both ways for gv as compact JSON and fails on any
// difference.
func checkSame(t testing.TB, gv schema.GroupVersion, obj runtime.Object) {
	t.Helper()
	want, got := encodeBoth(t, serializer(t, runtime.ContentTypeJSON, false), gv, obj)
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Fatalf("%s: output differs from the library's (-library +direct):\n%s", gv, diff)
	}
}

// gen builds random metric lists over awkward strings, quantities and times.
type gen struct {
	r       *rand.Rand
	strings []string
	nums    []int64
}

var awkward = []string{
	"", "pod-a", "kube-system", "x", `quote"d`, `back\slash`, "<script>&amp;</script>", "tab\tnl\nret\r",
	"\b\f\x00\x01\x1f\x7f", "caf\u00e9", "\u2028line\u2029para", "\U0001F600", "invalid\xff\xfeutf8", "\xe2\x80",
	"日本語", "a/b.c_d-e", "http_requests_per_second", "*", "custom.metrics.k8s.io/v1beta2",
}

var quantityStrings = []string{
	"0", "1", "+5", "-5", "100m", "1500m", "1.5", "1.5Gi", "1Ki", "1024", "1e3", "1E3", "5E3", "2.5e-3", "0.001",
	"123456789012345678901234567890", "-98765432109876543210.123456789", "1n", "999999999999999999", "9223372036854775807",
	"1Ei", "8Ei", "1.000", "0.1m", "12345.6789k", "-0", "01", "1000000000000m",
}

func (g *gen) str() string {
	if len(g.strings) > 0 && g.r.IntN(3) == 0 {
		return g.strings[g.r.IntN(len(g.strings))]
	}
	return awkward[g.r.IntN(len(awkward))]
}

func (g *gen) num() int64 {
	if len(g.nums) > 0 && g.r.IntN(3) == 0 {
		return g.nums[g.r.IntN(len(g.nums))]
	}
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return g.r.Int64N(1000)
	case 2:
		return -g.r.Int64N(1 << 40)
	case 3:
		return math.MaxInt64 - g.r.Int64N(10)
	case 4:
		return math.MinInt64 + g.r.Int64N(10)
	}
	return int64(g.r.Uint64())
}

func (g *gen) quantity() resource.Quantity {
	formats := []resource.Format{resource.DecimalSI, resource.BinarySI, resource.DecimalExponent, ""}
	var q resource.Quantity
	switch g.r.IntN(8) {
	case 0:
		q = *resource.NewMilliQuantity(g.num(), formats[g.r.IntN(len(formats))])
	case 1:
		q = *resource.NewQuantity(g.num(), formats[g.r.IntN(len(formats))])
	case 2:
		q = *resource.NewScaledQuantity(g.num(), resource.Scale(g.r.IntN(40)-20))
		q.Format = formats[g.r.IntN(len(formats))]
	case 3:
		s := quantityStrings[g.r.IntN(len(quantityStrings))]
		if len(g.strings) > 0 && g.r.IntN(2) == 0 {
			s = g.strings[g.r.IntN(len(g.strings))]
		}
		p, err := resource.ParseQuantity(s)
		if err != nil {
			p = resource.MustParse("42")
		}
		q = p
	case 4:
		// Overflows into the inf.Dec form.
		q = *resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
		q.Add(*resource.NewQuantity(g.num(), resource.DecimalSI))
		q.Add(*resource.NewQuantity(math.MaxInt64, resource.DecimalSI))
	case 5:
		q = resource.Quantity{}
	case 6:
		q = *resource.NewMilliQuantity(g.num(), resource.DecimalSI)
		_ = q.String() // caches the string form
	default:
		q = resource.MustParse(quantityStrings[g.r.IntN(len(quantityStrings))])
		q.Add(*resource.NewMilliQuantity(g.r.Int64N(100000), resource.DecimalSI))
	}
	return q
}

func (g *gen) time() metav1.Time {
	locs := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+1800), time.FixedZone("y", -7*3600)}
	switch g.r.IntN(7) {
	case 0:
		return metav1.Time{}
	case 5:
		// One second, any fraction and zone: items sharing a timestamp
		// (the encoder reuses the text of the previous item's time).
		return metav1.NewTime(time.Unix(1_700_000_000, g.r.Int64N(1e9)).In(locs[g.r.IntN(len(locs))]))
	case 1:
		return metav1.NewTime(time.Unix(1_700_000_000+g.r.Int64N(1e6), 0).In(locs[g.r.IntN(len(locs))]))
	case 2:
		return metav1.NewTime(time.Unix(g.r.Int64N(4e9), g.r.Int64N(1e9)).In(locs[g.r.IntN(len(locs))]))
	case 3:
		return metav1.NewTime(time.Unix(0, g.num()).In(locs[g.r.IntN(len(locs))]))
	case 4:
		// Years outside 0000-9999.
		return metav1.NewTime(time.Date(g.r.IntN(40000)-20000, time.Month(1+g.r.IntN(12)), 1+g.r.IntN(28), 1, 2, 3, g.r.IntN(1e9), locs[g.r.IntN(len(locs))]))
	}
	return metav1.NewTime(time.Unix(0, 0))
}

func (g *gen) window() *int64 {
	if g.r.IntN(2) == 0 {
		return nil
	}
	v := g.num()
	return &v
}

func (g *gen) labels() map[string]string {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	n := 1 + g.r.IntN(20)
	if g.r.IntN(4) == 0 {
		n = 1
	}
	m := make(map[string]string, n)
	for range n {
		m[g.str()+fmt.Sprint(g.r.IntN(3))] = g.str()
	}
	return m
}

func (g *gen) selector() *metav1.LabelSelector {
	if g.r.IntN(3) == 0 {
		return nil
	}
	s := &metav1.LabelSelector{MatchLabels: g.labels()}
	switch g.r.IntN(3) {
	case 0:
	case 1:
		s.MatchExpressions = []metav1.LabelSelectorRequirement{}
	default:
		for range 1 + g.r.IntN(3) {
			req := metav1.LabelSelectorRequirement{Key: g.str(), Operator: metav1.LabelSelectorOperator(g.str())}
			switch g.r.IntN(3) {
			case 1:
				req.Values = []string{}
			case 2:
				for range 1 + g.r.IntN(3) {
					req.Values = append(req.Values, g.str())
				}
			}
			s.MatchExpressions = append(s.MatchExpressions, req)
		}
	}
	return s
}

func (g *gen) typeMeta() metav1.TypeMeta {
	if g.r.IntN(4) != 0 {
		return metav1.TypeMeta{}
	}
	return metav1.TypeMeta{Kind: g.str(), APIVersion: g.str()}
}

func (g *gen) listMeta() metav1.ListMeta {
	if g.r.IntN(3) != 0 {
		return metav1.ListMeta{}
	}
	//lint:ignore SA1019 deprecated but still encoded when set.
	m := metav1.ListMeta{SelfLink: g.str(), ResourceVersion: g.str(), Continue: g.str()}
	if g.r.IntN(2) == 0 {
		n := g.num()
		m.RemainingItemCount = &n
	}
	if g.r.IntN(2) == 0 {
		m.ShardInfo = &metav1.ShardInfo{Selector: g.str()}
	}
	return m
}

func (g *gen) count() int {
	switch g.r.IntN(5) {
	case 0:
		return -1 // nil items
	case 1:
		return 0
	}
	return 1 + g.r.IntN(12)
}

func (g *gen) customList() *custom_metrics.MetricValueList {
	return &custom_metrics.MetricValueList{TypeMeta: g.typeMeta(), ListMeta: g.listMeta(), Items: genItems(g, func() custom_metrics.MetricValue {
		return custom_metrics.MetricValue{
			TypeMeta: g.typeMeta(),
			DescribedObject: custom_metrics.ObjectReference{
				Kind: g.str(), Namespace: g.str(), Name: g.str(), UID: apitypes.UID(g.str()),
				APIVersion: g.str(), ResourceVersion: g.str(), FieldPath: g.str(),
			},
			Metric:        custom_metrics.MetricIdentifier{Name: g.str(), Selector: g.selector()},
			Timestamp:     g.time(),
			WindowSeconds: g.window(),
			Value:         g.quantity(),
		}
	})}
}

func (g *gen) externalList() *external_metrics.ExternalMetricValueList {
	return &external_metrics.ExternalMetricValueList{TypeMeta: g.typeMeta(), ListMeta: g.listMeta(), Items: genItems(g, func() external_metrics.ExternalMetricValue {
		return external_metrics.ExternalMetricValue{
			TypeMeta:      g.typeMeta(),
			MetricName:    g.str(),
			MetricLabels:  g.labels(),
			Timestamp:     g.time(),
			WindowSeconds: g.window(),
			Value:         g.quantity(),
		}
	})}
}

// genItems returns g.count() items made by item: nil, none, or 1 to 12.
func genItems[T any](g *gen, item func() T) []T {
	n := g.count()
	if n < 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = item()
	}
	return out
}

// checkGenerated encodes one random custom and one random external list
// both ways for every group-version.
func checkGenerated(t testing.TB, g *gen) {
	t.Helper()
	cl := g.customList()
	checkSame(t, customV1beta1, cl)
	checkSame(t, customV1beta2, cl)
	checkSame(t, externalV1beta1, g.externalList())
}

func TestEncodeMatchesLibrary(t *testing.T) {
	ts := metav1.NewTime(time.Date(2026, 11, 30, 14, 0, 0, 123456789, time.FixedZone("z", 3600)))
	win := int64(60)
	tests := []struct {
		name string
		gvs  []schema.GroupVersion
		obj  runtime.Object
	}{
		{name: "custom nil items", gvs: []schema.GroupVersion{customV1beta1, customV1beta2}, obj: &custom_metrics.MetricValueList{}},
		{name: "custom empty items", gvs: []schema.GroupVersion{customV1beta1, customV1beta2}, obj: &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{}}},
		{name: "custom one pod", gvs: []schema.GroupVersion{customV1beta1, customV1beta2}, obj: &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{{
			DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-<1>&", APIVersion: "/v1"},
			Metric:          custom_metrics.MetricIdentifier{Name: "http_requests_per_second"},
			Timestamp:       ts,
			WindowSeconds:   &win,
			Value:           *resource.NewMilliQuantity(1500, resource.DecimalSI),
		}}}},
		{name: "custom selector and zero time", gvs: []schema.GroupVersion{customV1beta1, customV1beta2}, obj: &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{{
			Metric: custom_metrics.MetricIdentifier{Name: "m", Selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"b": "2", "a": "1", "\u2028": "<"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}}, {Key: "e", Operator: metav1.LabelSelectorOpExists}},
			}},
			Value: resource.MustParse("123456789012345678901234567890"),
		}}}},
		{name: "external nil items", gvs: []schema.GroupVersion{externalV1beta1}, obj: &external_metrics.ExternalMetricValueList{}},
		{name: "external labels", gvs: []schema.GroupVersion{externalV1beta1}, obj: &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{
			{MetricName: "queue", MetricLabels: map[string]string{"z": "1", "a": "&", "m": ""}, Timestamp: ts, Value: resource.MustParse("+5")},
			{TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValue"}, MetricName: "q2", MetricLabels: map[string]string{}, Value: *resource.NewQuantity(1<<40, resource.BinarySI)},
		}}},
	}
	for _, tc := range tests {
		for _, gv := range tc.gvs {
			t.Run(tc.name+"/"+gv.String(), func(t *testing.T) {
				checkSame(t, gv, tc.obj)
			})
		}
	}
}

func TestEncodeRandomListsMatchLibrary(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 200
	}
	g := &gen{r: rand.New(rand.NewPCG(1, 2))}
	for range n {
		checkGenerated(t, g)
	}
}

func FuzzEncode(f *testing.F) {
	f.Add(uint64(1), "pod-a", "1500m", int64(0))
	f.Add(uint64(2), "<&>\u2028", "+5", int64(-1))
	f.Add(uint64(3), "\xff", "1.5Gi", int64(math.MaxInt64))
	f.Add(uint64(4), `"\`, "123456789012345678901234567890", int64(1_700_000_000_123_456_789))
	f.Fuzz(func(t *testing.T, seed uint64, s1, s2 string, n int64) {
		g := &gen{r: rand.New(rand.NewPCG(seed, uint64(n))), strings: []string{s1, s2}, nums: []int64{n}}
		checkGenerated(t, g)
	})
}

// TestOtherSerializersAreTheLibrarys: pretty JSON, YAML and protobuf (and
// other group-versions) get the library's codec itself.
func TestOtherSerializersAreTheLibrarys(t *testing.T) {
	// YAML refuses control characters: printable strings only.
	g := &gen{r: rand.New(rand.NewPCG(3, 4)), strings: []string{"pod-a", "<&>", "caf\u00e9"}}
	obj := g.customList()
	for i := range obj.Items {
		obj.Items[i].DescribedObject = custom_metrics.ObjectReference{Kind: "Pod", Name: fmt.Sprint("pod-", i)}
		obj.Items[i].Metric = custom_metrics.MetricIdentifier{Name: "m<&>", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
	}
	tests := []struct {
		name      string
		mediaType string
		pretty    bool
		gv        schema.GroupVersion
		direct    bool
	}{
		{name: "json", mediaType: runtime.ContentTypeJSON, gv: customV1beta2, direct: true},
		{name: "pretty json", mediaType: runtime.ContentTypeJSON, pretty: true, gv: customV1beta2},
		{name: "yaml", mediaType: runtime.ContentTypeYAML, gv: customV1beta2},
		{name: "protobuf", mediaType: runtime.ContentTypeProtobuf, gv: customV1beta2},
		{name: "json other version", mediaType: runtime.ContentTypeJSON, gv: schema.GroupVersion{Version: "v1"}},
	}
	ns := NewNegotiatedSerializer(cmapiserver.Codecs)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := serializer(t, tc.mediaType, tc.pretty)
			_, direct := ns.EncoderForVersion(s, tc.gv).(*listEncoder)
			if direct != tc.direct {
				t.Fatalf("direct encoder = %v, want %v", direct, tc.direct)
			}
			if tc.gv.Version != customV1beta2.Version {
				return
			}
			want, got := encodeBoth(t, s, tc.gv, obj)
			if !bytes.Equal(want, got) {
				t.Errorf("output differs from the library's:\n%s", cmp.Diff(string(want), string(got)))
			}
		})
	}
}

// TestOtherObjectsGoToTheLibrary: errors (Status) and versioned lists are
// encoded by the library's codec.
func TestOtherObjectsGoToTheLibrary(t *testing.T) {
	tests := []struct {
		name string
		gv   schema.GroupVersion
		obj  runtime.Object
	}{
		{name: "status", gv: customV1beta2, obj: &metav1.Status{Status: metav1.StatusFailure, Message: "<nope>", Code: 404}},
		{name: "versioned list", gv: customV1beta1, obj: &cmv1beta1.MetricValueList{Items: []cmv1beta1.MetricValue{{MetricName: "m"}}}},
		{name: "external list for custom", gv: customV1beta1, obj: &external_metrics.ExternalMetricValueList{}},
		{name: "custom list for external", gv: externalV1beta1, obj: &custom_metrics.MetricValueList{}},
	}
	s := serializer(t, runtime.ContentTypeJSON, false)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var wb, gb bytes.Buffer
			werr := cmapiserver.Codecs.EncoderForVersion(s, tc.gv).Encode(tc.obj, &wb)
			gerr := NewNegotiatedSerializer(cmapiserver.Codecs).EncoderForVersion(s, tc.gv).Encode(tc.obj, &gb)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) {
				t.Fatalf("error = %v, want the library's %v", gerr, werr)
			}
			if diff := cmp.Diff(wb.String(), gb.String()); diff != "" {
				t.Errorf("output differs from the library's (-library +direct):\n%s", diff)
			}
		})
	}
}

// TestEncodedTypesUnchanged pins the fields of the types this package
// writes by hand: a new or renamed field in a dependency bump fails here
// rather than going missing from the answers.
func TestEncodedTypesUnchanged(t *testing.T) {
	tests := []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[custom_metrics.MetricValueList](), `TypeMeta; ListMeta metadata,omitempty; Items items`},
		{reflect.TypeFor[custom_metrics.MetricValue](), `TypeMeta; DescribedObject; Metric; Timestamp; WindowSeconds; Value`},
		{reflect.TypeFor[custom_metrics.MetricIdentifier](), `Name; Selector`},
		{reflect.TypeFor[custom_metrics.ObjectReference](), `Kind; Namespace; Name; UID; APIVersion; ResourceVersion; FieldPath`},
		{reflect.TypeFor[cmv1beta1.MetricValueList](), `TypeMeta; ListMeta metadata,omitempty; Items items`},
		{reflect.TypeFor[cmv1beta1.MetricValue](), `TypeMeta; DescribedObject describedObject; MetricName metricName; Timestamp timestamp; WindowSeconds window,omitempty; Value value; Selector selector`},
		{reflect.TypeFor[cmv1beta2.MetricValueList](), `TypeMeta; ListMeta metadata,omitempty; Items items`},
		{reflect.TypeFor[cmv1beta2.MetricValue](), `TypeMeta; DescribedObject describedObject; Metric metric; Timestamp timestamp; WindowSeconds windowSeconds,omitempty; Value value`},
		{reflect.TypeFor[cmv1beta2.MetricIdentifier](), `Name name; Selector selector`},
		{reflect.TypeFor[external_metrics.ExternalMetricValueList](), `TypeMeta; ListMeta metadata,omitempty; Items items`},
		{reflect.TypeFor[external_metrics.ExternalMetricValue](), `TypeMeta; MetricName metricName; MetricLabels metricLabels; Timestamp timestamp; WindowSeconds window,omitempty; Value value`},
		{reflect.TypeFor[emv1beta1.ExternalMetricValueList](), `TypeMeta; ListMeta metadata,omitempty; Items items`},
		{reflect.TypeFor[emv1beta1.ExternalMetricValue](), `TypeMeta; MetricName metricName; MetricLabels metricLabels; Timestamp timestamp; WindowSeconds window,omitempty; Value value`},
		{reflect.TypeFor[corev1.ObjectReference](), `Kind kind,omitempty; Namespace namespace,omitempty; Name name,omitempty; UID uid,omitempty; APIVersion apiVersion,omitempty; ResourceVersion resourceVersion,omitempty; FieldPath fieldPath,omitempty`},
		{reflect.TypeFor[metav1.TypeMeta](), `Kind kind,omitempty; APIVersion apiVersion,omitempty`},
		{reflect.TypeFor[metav1.ListMeta](), `SelfLink selfLink,omitempty; ResourceVersion resourceVersion,omitempty; Continue continue,omitempty; RemainingItemCount remainingItemCount,omitempty; ShardInfo shardInfo,omitempty`},
		{reflect.TypeFor[metav1.ShardInfo](), `Selector selector`},
		{reflect.TypeFor[metav1.LabelSelector](), `MatchLabels matchLabels,omitempty; MatchExpressions matchExpressions,omitempty`},
		{reflect.TypeFor[metav1.LabelSelectorRequirement](), `Key key; Operator operator; Values values,omitempty`},
	}
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			var fields []string
			for i := range tc.typ.NumField() {
				f := tc.typ.Field(i)
				fields = append(fields, strings.TrimSpace(f.Name+" "+f.Tag.Get("json")))
			}
			if diff := cmp.Diff(tc.want, strings.Join(fields, "; ")); diff != "" {
				t.Errorf("fields changed (-want +got):\n%s", diff)
			}
		})
	}
	if !quantityStringReadable {
		t.Error("resource.Quantity has no string field s: every list goes to the library's codec")
	}
}
