// Package apiencode writes the metrics APIs' list answers (custom.metrics.k8s.io
// v1beta1 and v1beta2, external.metrics.k8s.io v1beta1) as compact JSON
// without reflection, byte for byte what the API server's codec writes.
//
// NewNegotiatedSerializer wraps an API group's negotiated serializer: the
// encoder it hands out for the compact JSON serializer and one of those
// group-versions writes the internal MetricValueList and
// ExternalMetricValueList itself and passes every other object to the
// library's codec. Every other serializer (pretty JSON, YAML, protobuf) is the
// library's, unchanged.
package apiencode

import (
	"io"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmv1beta1 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta1"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
)

// The group-versions this package writes.
var (
	customV1beta1   = cmv1beta1.SchemeGroupVersion
	customV1beta2   = cmv1beta2.SchemeGroupVersion
	externalV1beta1 = emv1beta1.SchemeGroupVersion
)

// negotiatedSerializer is a runtime.NegotiatedSerializer that encodes the
// metrics lists directly when the compact JSON serializer is asked for.
type negotiatedSerializer struct {
	runtime.NegotiatedSerializer
	// jsonID identifies the compact (not pretty, not YAML) JSON serializer
	// of the wrapped serializer; empty when it has none.
	jsonID runtime.Identifier
}

var _ runtime.NegotiatedSerializer = (*negotiatedSerializer)(nil)

// NewNegotiatedSerializer wraps s, normally an API group's CodecFactory:
// the encoder it hands out for s's compact JSON serializer and one of the
// metrics group-versions writes the metric lists directly, byte for byte
// what s's own would write.
func NewNegotiatedSerializer(s runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	n := &negotiatedSerializer{NegotiatedSerializer: s}
	if info, ok := runtime.SerializerInfoForMediaType(s.SupportedMediaTypes(), runtime.ContentTypeJSON); ok && info.Serializer != nil {
		n.jsonID = info.Serializer.Identifier()
	}
	return n
}

// EncoderForVersion returns the wrapped serializer's encoder, behind the
// direct list encoder when encoder is the compact JSON serializer and gv one
// of the metrics group-versions.
func (n *negotiatedSerializer) EncoderForVersion(encoder runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	codec := n.NegotiatedSerializer.EncoderForVersion(encoder, gv)
	if n.jsonID == "" || encoder == nil || encoder.Identifier() != n.jsonID {
		return codec
	}
	target, ok := gv.(schema.GroupVersion)
	if !ok {
		return codec
	}
	switch target {
	case customV1beta1, customV1beta2, externalV1beta1:
		return &listEncoder{codec: codec, gv: target}
	}
	return codec
}

// listEncoder writes the metrics lists of one group-version as compact JSON
// and hands anything else to the library's codec.
type listEncoder struct {
	codec runtime.Encoder
	gv    schema.GroupVersion
}

// Encode implements runtime.Encoder.
func (e *listEncoder) Encode(obj runtime.Object, w io.Writer) error {
	if !quantityStringReadable {
		return e.codec.Encode(obj, w)
	}
	var bp *[]byte
	var b []byte
	switch list := obj.(type) {
	case *custom_metrics.MetricValueList:
		switch e.gv {
		case customV1beta1:
			bp = buffers.Get().(*[]byte)
			b = appendCustomV1beta1((*bp)[:0], list)
		case customV1beta2:
			bp = buffers.Get().(*[]byte)
			b = appendCustomV1beta2((*bp)[:0], list)
		}
	case *external_metrics.ExternalMetricValueList:
		if e.gv == externalV1beta1 {
			bp = buffers.Get().(*[]byte)
			b = appendExternalV1beta1((*bp)[:0], list)
		}
	}
	if bp == nil {
		return e.codec.Encode(obj, w)
	}
	_, err := w.Write(b)
	if cap(b) <= maxPooledBuffer {
		*bp = b
		buffers.Put(bp)
	}
	return err
}

// Identifier implements runtime.Encoder: the output is the codec's, byte for
// byte.
func (e *listEncoder) Identifier() runtime.Identifier { return e.codec.Identifier() }

// maxPooledBuffer bounds the buffers kept for reuse (a 5,000-item answer is
// about 1.5 MB).
const maxPooledBuffer = 8 << 20

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// appendCustomV1beta1 appends list as the API server's JSON encoder writes
// it converted to custom.metrics.k8s.io/v1beta1, newline included.
func appendCustomV1beta1(b []byte, list *custom_metrics.MetricValueList) []byte {
	return appendList(b, `{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/v1beta1",`, &list.ListMeta, list.Items, appendCustomV1beta1Item)
}

func appendCustomV1beta1Item(b []byte, m *custom_metrics.MetricValue, times *timeText) []byte {
	b = append(b, `{"describedObject":`...)
	b = appendObjectReference(b, &m.DescribedObject)
	b = append(b, `,"metricName":`...)
	b = appendString(b, m.Metric.Name)
	b = append(b, `,"timestamp":`...)
	b = times.append(b, m.Timestamp)
	b = appendWindowValue(b, `,"window":`, m.WindowSeconds, &m.Value)
	b = append(b, `,"selector":`...)
	b = appendLabelSelector(b, m.Metric.Selector)
	return append(b, '}')
}

// appendCustomV1beta2 appends list as the API server's JSON encoder writes
// it converted to custom.metrics.k8s.io/v1beta2, newline included.
func appendCustomV1beta2(b []byte, list *custom_metrics.MetricValueList) []byte {
	return appendList(b, `{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/v1beta2",`, &list.ListMeta, list.Items, appendCustomV1beta2Item)
}

func appendCustomV1beta2Item(b []byte, m *custom_metrics.MetricValue, times *timeText) []byte {
	b = append(b, `{"describedObject":`...)
	b = appendObjectReference(b, &m.DescribedObject)
	b = append(b, `,"metric":{"name":`...)
	b = appendString(b, m.Metric.Name)
	b = append(b, `,"selector":`...)
	b = appendLabelSelector(b, m.Metric.Selector)
	b = append(b, `},"timestamp":`...)
	b = times.append(b, m.Timestamp)
	b = appendWindowValue(b, `,"windowSeconds":`, m.WindowSeconds, &m.Value)
	return append(b, '}')
}

// appendExternalV1beta1 appends list as the API server's JSON encoder writes
// it converted to external.metrics.k8s.io/v1beta1, newline included. The
// conversion keeps the items' kind and apiVersion (it shares the items).
func appendExternalV1beta1(b []byte, list *external_metrics.ExternalMetricValueList) []byte {
	return appendList(b, `{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1",`, &list.ListMeta, list.Items, appendExternalV1beta1Item)
}

func appendExternalV1beta1Item(b []byte, m *external_metrics.ExternalMetricValue, times *timeText) []byte {
	b = append(b, '{')
	b = appendTypeMeta(b, &m.TypeMeta)
	b = append(b, `"metricName":`...)
	b = appendString(b, m.MetricName)
	b = append(b, `,"metricLabels":`...)
	b = appendStringMap(b, m.MetricLabels)
	b = append(b, `,"timestamp":`...)
	b = times.append(b, m.Timestamp)
	b = appendWindowValue(b, `,"window":`, m.WindowSeconds, &m.Value)
	return append(b, '}')
}

// appendList appends a list answer: head (its opening brace, kind and
// apiVersion), its metadata, then its items, each written by item, and a
// newline.
func appendList[T any](b []byte, head string, meta *metav1.ListMeta, items []T, item func([]byte, *T, *timeText) []byte) []byte {
	b = append(b, head...)
	b = appendListMeta(b, meta)
	if items == nil {
		return append(b, `"items":null}`+"\n"...)
	}
	b = append(b, `"items":[`...)
	var times timeText
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = item(b, &items[i], &times)
	}
	return append(b, "]}\n"...)
}

// appendWindowValue appends the window member (named by window, omitted
// when nil) and the value member.
func appendWindowValue(b []byte, window string, seconds *int64, value *resource.Quantity) []byte {
	if seconds != nil {
		b = append(b, window...)
		b = strconv.AppendInt(b, *seconds, 10)
	}
	b = append(b, `,"value":`...)
	return appendQuantity(b, value)
}

// appendTypeMeta appends the kind and apiVersion members that are set, each
// followed by a comma.
func appendTypeMeta(b []byte, t *metav1.TypeMeta) []byte {
	if t.Kind != "" {
		b = append(b, `"kind":`...)
		b = appendString(b, t.Kind)
		b = append(b, ',')
	}
	if t.APIVersion != "" {
		b = append(b, `"apiVersion":`...)
		b = appendString(b, t.APIVersion)
		b = append(b, ',')
	}
	return b
}

// appendListMeta appends the "metadata" member and a comma.
func appendListMeta(b []byte, m *metav1.ListMeta) []byte {
	b = append(b, `"metadata":{`...)
	n := len(b)
	sep := func(b []byte) []byte {
		if len(b) > n {
			b = append(b, ',')
		}
		return b
	}
	//lint:ignore SA1019 deprecated but still encoded when set.
	if selfLink := m.SelfLink; selfLink != "" {
		b = append(b, `"selfLink":`...)
		b = appendString(b, selfLink)
	}
	if m.ResourceVersion != "" {
		b = sep(b)
		b = append(b, `"resourceVersion":`...)
		b = appendString(b, m.ResourceVersion)
	}
	if m.Continue != "" {
		b = sep(b)
		b = append(b, `"continue":`...)
		b = appendString(b, m.Continue)
	}
	if m.RemainingItemCount != nil {
		b = sep(b)
		b = append(b, `"remainingItemCount":`...)
		b = strconv.AppendInt(b, *m.RemainingItemCount, 10)
	}
	if m.ShardInfo != nil {
		b = sep(b)
		b = append(b, `"shardInfo":{"selector":`...)
		b = appendString(b, m.ShardInfo.Selector)
		b = append(b, '}')
	}
	return append(b, "},"...)
}

// appendObjectReference appends a core/v1 ObjectReference (every member
// omitted when empty).
func appendObjectReference(b []byte, r *custom_metrics.ObjectReference) []byte {
	b = append(b, '{')
	n := len(b)
	field := func(b []byte, name, v string) []byte {
		if v == "" {
			return b
		}
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, name...)
		return appendString(b, v)
	}
	b = field(b, `"kind":`, r.Kind)
	b = field(b, `"namespace":`, r.Namespace)
	b = field(b, `"name":`, r.Name)
	b = field(b, `"uid":`, string(r.UID))
	b = field(b, `"apiVersion":`, r.APIVersion)
	b = field(b, `"resourceVersion":`, r.ResourceVersion)
	b = field(b, `"fieldPath":`, r.FieldPath)
	return append(b, '}')
}

// appendLabelSelector appends a *metav1.LabelSelector (null when nil).
func appendLabelSelector(b []byte, s *metav1.LabelSelector) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	if len(s.MatchLabels) > 0 {
		b = append(b, `"matchLabels":`...)
		b = appendStringMap(b, s.MatchLabels)
	}
	if len(s.MatchExpressions) > 0 {
		if len(s.MatchLabels) > 0 {
			b = append(b, ',')
		}
		b = append(b, `"matchExpressions":[`...)
		for i := range s.MatchExpressions {
			r := &s.MatchExpressions[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"key":`...)
			b = appendString(b, r.Key)
			b = append(b, `,"operator":`...)
			b = appendString(b, string(r.Operator))
			if len(r.Values) > 0 {
				b = append(b, `,"values":[`...)
				for j, v := range r.Values {
					if j > 0 {
						b = append(b, ',')
					}
					b = appendString(b, v)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendStringMap appends a map[string]string as encoding/json does: null
// when nil, keys sorted.
func appendStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	switch len(m) {
	case 0:
	case 1:
		for k, v := range m {
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, v)
		}
	default:
		var small [16]string
		keys := small[:0]
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, m[k])
		}
	}
	return append(b, '}')
}

// appendTime appends a metav1.Time as its MarshalJSON does: null when zero,
// else RFC 3339 in UTC, whole seconds.
func appendTime(b []byte, t metav1.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339)
	return append(b, '"')
}

// timeText is appendTime remembering its last answer: the items of a list
// mostly share one timestamp (one Prometheus evaluation), and formatting
// it is most of what an item's time costs. The text depends only on the
// whole seconds.
type timeText struct {
	unix int64
	n    int // length of the text in buf; 0: none yet
	buf  [40]byte
}

func (c *timeText) append(b []byte, t metav1.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	if u := t.Unix(); c.n > 0 && u == c.unix {
		return append(b, c.buf[:c.n]...)
	}
	start := len(b)
	b = appendTime(b, t)
	if text := b[start:]; len(text) <= len(c.buf) {
		c.unix, c.n = t.Unix(), copy(c.buf[:], text)
	}
	return b
}

// quantityString is the index of resource.Quantity's cached string form
// (the unexported field s), which its MarshalJSON writes when set; -1 when
// the field is not there, and then quantityStringReadable is false and the
// lists go to the library's codec.
var quantityString, quantityStringReadable = func() (int, bool) {
	f, ok := reflect.TypeFor[resource.Quantity]().FieldByName("s")
	if !ok || f.Type.Kind() != reflect.String || len(f.Index) != 1 {
		return -1, false
	}
	return f.Index[0], true
}()

// appendQuantity appends q as its MarshalJSON does: its cached string when
// set, else the canonical form. q is only read: String would cache the form
// in q, a write to an object that may be shared between requests.
func appendQuantity(b []byte, q *resource.Quantity) []byte {
	b = append(b, '"')
	if s := reflect.ValueOf(q).Elem().Field(quantityString).String(); s != "" {
		b = append(b, s...)
		return append(b, '"')
	}
	// A copy, as MarshalJSON (a value method) works on one. The number is
	// written into b's spare room when it fits, else (zero is a shared "0",
	// a long one a new slice) elsewhere; append covers both.
	c := *q
	b = slices.Grow(b, 32)
	number, suffix := c.CanonicalizeBytes(b[len(b):])
	b = append(b, number...)
	b = append(b, suffix...)
	return append(b, '"')
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json does with
// HTML escaping on (the API server's encoder): <, > and & as \u00XX, U+2028
// and U+2029 escaped, invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// safe reports the ASCII bytes written as they are: printable, not a quote,
// backslash or HTML special.
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
