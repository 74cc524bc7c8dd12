package promclient

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// This file decodes the answer of an instant query (/api/v1/query) into
// Samples with a single-pass scanner (scan.go) instead of client_golang's
// reflection-based decoding into a model.Vector. It is a performance
// work-around of the library, kept for its A/B figures in
// docs/performance.md. decodeQuery is its one seam: Client.query calls it
// and nothing else does, so going back to the library is replacing that
// call by client_golang's v1 Query and a conversion to Samples.
//
// The accepted language and the values produced (as Samples.Vector gives
// them) are those of client_golang (api/prometheus/v1 over encoding/json) on
// the same body, quirks included,
// so that behaviour does not depend on the decoder: object member names
// match case-insensitively, the last of duplicate members wins (duplicate
// "metric" objects merge), a null label value is "", a null timestamp
// leaves it at zero, extra elements of "value" are ignored, timestamps keep millisecond precision (truncated),
// sample values are the raw text between the quotes as strconv.ParseFloat
// reads it ("NaN", "+Inf", "-Inf"), invalid UTF-8 and lone surrogates become
// U+FFFD, and the whole body must be valid JSON. FuzzDecodeVector checks the
// agreement. Deliberate differences: a null element of the result is an
// error here, where client_golang returns a nil *model.Sample that every
// caller would dereference; a sample without a value (no "value", fewer
// than two elements, a null value, and no "histogram") is an error here,
// where client_golang gives it the value 0, which would be served as a real
// value; and a matrix result, which an instant query
// never returns and the client refuses, is refused without being decoded,
// even when a duplicate "data" member follows it (client_golang decodes it
// with json-iterator's rules, and may then take the later member).
//
// Native histogram samples ("histogram") are rare in the answers the adapter
// asks for; their value is handed to model.SampleHistogramPair's own
// decoding.

// decodeQuery turns an instant query answer (its HTTP status code and body)
// into Samples whose Vector is what client_golang's v1 API followed by
// toVector would give: errors are *v1.Error values with the same Type, Msg
// and Detail, so that classify gives the same outcome, and warnings are
// returned whenever they could be read.
func decodeQuery(code int, body []byte) (Samples, v1.Warnings, error) {
	smps, _, warnings, err := decodeInstant(code, body)
	return smps, warnings, err
}

// decodeInstant is decodeQuery, also saying whether the result was a
// scalar (one sample with empty labels, like a vector's sample whose
// labels are empty).
func decodeInstant(code int, body []byte) (smps Samples, scalar bool, warnings v1.Warnings, err error) {
	if code/100 != 2 {
		smps, warnings, err = decodeErrorAnswer(code, body)
		return smps, false, warnings, err
	}
	a, err := decodeAnswer(body, true)
	if err != nil {
		return nil, false, a.warnings, &v1.Error{Type: v1.ErrBadResponse, Msg: err.Error()}
	}
	smps, err = a.samples()
	return smps, a.kind == resultScalar && err == nil, a.warnings, err
}

// decodeErrorAnswer decodes the answer of an HTTP error status.
func decodeErrorAnswer(code int, body []byte) (Samples, v1.Warnings, error) {
	if code != http.StatusBadRequest && code != http.StatusUnprocessableEntity {
		typ, msg := errorTypeAndMsgFor(code)
		return nil, nil, &v1.Error{Type: typ, Msg: msg, Detail: string(body)}
	}
	// Prometheus' own error envelope; data, if any, is not looked at.
	a, err := decodeAnswer(body, false)
	if err != nil {
		typ, msg := errorTypeAndMsgFor(code)
		return nil, nil, &v1.Error{Type: typ, Msg: msg, Detail: string(body)}
	}
	if a.status == "success" {
		return nil, a.warnings, &v1.Error{Type: v1.ErrBadResponse, Msg: "inconsistent body for response code"}
	}
	if a.errorType == "" {
		a.errorType = string(v1.ErrClient)
	}
	if a.errMsg == "" {
		a.errMsg = fmt.Sprintf("client error: %d", code)
	}
	return nil, a.warnings, &v1.Error{Type: v1.ErrorType(a.errorType), Msg: a.errMsg}
}

// samples is the result of a success answer.
func (a *answer) samples() (Samples, error) {
	if a.status == "error" {
		return nil, &v1.Error{Type: v1.ErrorType(a.errorType), Msg: a.errMsg}
	}
	if a.sawMatrix {
		return nil, &v1.Error{Type: v1.ErrBadResponse, Msg: "unexpected result type matrix for an instant query (want vector or scalar)"}
	}
	switch a.kind {
	case resultVector:
		if a.res.hasNull {
			return nil, &v1.Error{Type: v1.ErrBadResponse, Msg: "a sample of the result is null"}
		}
		if a.res.hasUnvalued {
			return nil, &v1.Error{Type: v1.ErrBadResponse, Msg: errSampleWithoutValue.Error()}
		}
		return a.res.samples, nil
	case resultScalar:
		return Samples{{Labels: Labels{}, Value: a.scalar.Value, Timestamp: a.scalar.Timestamp}}, nil
	default:
		return nil, &v1.Error{Type: v1.ErrBadResponse, Msg: "no result in the answer"}
	}
}

// errorTypeAndMsgFor describes an HTTP error status the way client_golang does.
func errorTypeAndMsgFor(code int) (v1.ErrorType, string) {
	switch code / 100 {
	case 4:
		return v1.ErrClient, fmt.Sprintf("client error: %d", code)
	case 5:
		return v1.ErrServer, fmt.Sprintf("server error: %d", code)
	}
	return v1.ErrBadResponse, fmt.Sprintf("bad response code %d", code)
}

type resultKind uint8

const (
	resultNone resultKind = iota
	resultVector
	resultScalar
)

// answer is the decoded envelope of a Prometheus API answer.
type answer struct {
	status    string
	errorType string
	errMsg    string
	warnings  []string

	kind   resultKind
	res    vecResult
	scalar model.Scalar
	// sawMatrix is set when any "data" member held a matrix, even one a
	// later duplicate member replaced.
	sawMatrix bool
}

// vecResult is a decoded vector. A null vector has nil samples.
type vecResult struct {
	samples Samples
	// hasNull is set when an element of the vector was null.
	hasNull bool
	// hasUnvalued is set when a sample of the vector had no value (see
	// errSampleWithoutValue).
	hasUnvalued bool
}

// decodeAnswer decodes a whole body. With withData false the "data" member
// is only checked to be JSON.
func decodeAnswer(body []byte, withData bool) (answer, error) {
	d := decoder{s: scanner{b: body}}
	var a answer
	err := d.answer(&a, withData)
	if err == nil {
		d.s.ws()
		if d.s.i < len(d.s.b) {
			err = d.s.errUnexpected("after the top-level value")
		}
	}
	return a, err
}

// decoder holds the state of one decoding: the scanner and the label names
// and values of the previous sample, reused by the next one when equal (the
// samples of an answer usually share their label names and some values).
type decoder struct {
	s      scanner
	names  map[string]string
	labels []Label // the sample being decoded
	prev   []Label // the previous sample's labels
	// lslab holds the labels of the samples: one allocation per many.
	lslab []Label
	// arena holds the bytes of the label values: one allocation per chunk
	// instead of one per value. nextChunk is the size of the next chunk
	// (0: arenaChunk); a vector sizes it from its first sample.
	arena     []byte
	nextChunk int
	// valued reports that the last sample decoded had a value or a
	// histogram.
	valued bool
}

// arenaChunk is the size of the arena's chunks, at most; firstChunk the
// size of a vector's first chunk, before its first sample tells how many
// bytes of values the others will need.
const (
	arenaChunk = 8 << 10
	firstChunk = 256
)

// open reads the start of the next value, which is null or begins with
// want ('{', '[', '"', or '0' for a number): null is consumed (null is
// true); a value of another kind is skipped and refused as "<what> is a
// JSON <kind>, not <expected>".
func (d *decoder) open(want byte, what, expected string) (null bool, err error) {
	s := &d.s
	c, err := s.peek()
	if err != nil {
		return false, err
	}
	switch {
	case c == 'n':
		return true, s.literal("null")
	case c == want, want == '0' && (c == '-' || c >= '0' && c <= '9'):
		return false, nil
	}
	if err := s.skip(); err != nil {
		return false, err
	}
	return false, fmt.Errorf("%s is a JSON %s, not %s", what, kindOf(c), expected)
}

func (d *decoder) answer(a *answer, withData bool) error {
	s := &d.s
	if null, err := d.open('{', "the answer", "an object"); err != nil || null {
		return err
	}
	dataDetached := false
	empty, err := s.objStart()
	for more := !empty; more && err == nil; more, err = s.objNext() {
		var key []byte
		var plain bool
		if key, plain, err = s.key(); err != nil {
			return err
		}
		switch {
		case keyIs(key, plain, "status"):
			err = d.optString(&a.status, `"status"`)
		case keyIs(key, plain, "data"):
			switch {
			case !withData || dataDetached:
				err = s.skip()
			default:
				var null bool
				if null, err = d.open('{', `"data"`, "an object"); err == nil && null {
					// encoding/json sets the interface holding the
					// result to nil: later "data" members are not
					// decoded into it, the result decoded so far stays.
					dataDetached = true
				} else if err == nil {
					err = d.data(a)
				}
			}
		case keyIs(key, plain, "errorType"):
			err = d.optString(&a.errorType, `"errorType"`)
		case keyIs(key, plain, "error"):
			err = d.optString(&a.errMsg, `"error"`)
		case keyIs(key, plain, "warnings"):
			a.warnings, err = d.stringList(`"warnings"`)
		case keyIs(key, plain, "infos"):
			_, err = d.stringList(`"infos"`)
		default:
			err = s.skip()
		}
		if err != nil {
			return err
		}
	}
	return err
}

// optString decodes a string member (what, quoted, in errors) into *dst;
// null leaves *dst alone.
func (d *decoder) optString(dst *string, what string) error {
	if null, err := d.open('"', what, "a string"); err != nil || null {
		return err
	}
	raw, plain, err := d.s.str()
	if err != nil {
		return err
	}
	*dst = unquote(raw, plain)
	return nil
}

// stringList decodes null or an array of strings (a null element is "").
func (d *decoder) stringList(what string) ([]string, error) {
	s := &d.s
	if null, err := d.open('[', what, "a list of strings"); err != nil || null {
		return nil, err
	}
	out := []string{}
	empty, err := s.arrStart()
	for more := !empty; more && err == nil; more, err = s.arrNext() {
		var v string
		if err = d.optString(&v, what); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, err
}

// data decodes the "data" object of a query answer (d.open has read that it
// is one): resultType and result, in either order. A result that follows
// resultType "vector", or comes first, is decoded as a vector as it is
// read; otherwise (and when that attempt failed, which is not an error if a
// later duplicate "result" replaces it) the result is decoded from its
// recorded position once the whole object has been read and the type is
// known.
func (d *decoder) data(a *answer) error {
	s := &d.s
	var (
		typ        model.ValueType // ValNone until read
		resStart   = -1
		resEnd     int
		vec        vecResult
		vecStart   = -1 // where vec was decoded from
		empty, err = s.objStart()
	)
	for more := !empty; more && err == nil; more, err = s.objNext() {
		var key []byte
		var plain bool
		if key, plain, err = s.key(); err != nil {
			return err
		}
		switch {
		case keyIs(key, plain, "resultType"):
			if typ, err = d.valueType(); err != nil {
				return err
			}
		case keyIs(key, plain, "result"):
			s.ws()
			resStart = s.i
			// Before resultType (as when an encoder sorts member
			// names), a vector is the likely type: try it.
			if typ == model.ValVector || typ == model.ValNone {
				if v, verr := d.vector(); verr == nil {
					vec, vecStart = v, resStart
				} else {
					s.i = resStart
					err = s.skip()
				}
			} else {
				err = s.skip()
			}
			resEnd = s.i
		default:
			err = s.skip()
		}
		if err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}

	switch typ {
	case model.ValVector:
		if resStart < 0 {
			return errors.New(`no "result" in the vector answer`)
		}
		if vecStart != resStart {
			if vec, err = d.at(resStart, resEnd, d.vector); err != nil {
				return err
			}
		}
		a.kind, a.res = resultVector, vec
	case model.ValScalar:
		if resStart < 0 {
			return errors.New(`no "result" in the scalar answer`)
		}
		var sc model.Scalar
		if _, err = d.at(resStart, resEnd, func() (vecResult, error) { return vecResult{}, d.scalar(&sc) }); err != nil {
			return err
		}
		a.kind, a.scalar = resultScalar, sc
	case model.ValMatrix:
		if resStart < 0 {
			return errors.New(`no "result" in the matrix answer`)
		}
		a.kind, a.res, a.sawMatrix = resultNone, vecResult{}, true
	default:
		return fmt.Errorf("unexpected value type %q", typ.String())
	}
	return nil
}

// at runs fn with the scanner over b[start:end], then restores it.
func (d *decoder) at(start, end int, fn func() (vecResult, error)) (vecResult, error) {
	s := &d.s
	saved, savedB := s.i, s.b
	s.i, s.b = start, s.b[:end]
	v, err := fn()
	if err == nil {
		s.ws()
		if s.i != end {
			err = s.errUnexpected("after the result")
		}
	}
	s.i, s.b = saved, savedB
	return v, err
}

// valueType decodes "resultType"; null is no type, an error.
func (d *decoder) valueType() (model.ValueType, error) {
	var name string
	if err := d.optString(&name, `"resultType"`); err != nil {
		return model.ValNone, err
	}
	switch name {
	case "<ValNone>":
		return model.ValNone, nil
	case "scalar":
		return model.ValScalar, nil
	case "vector":
		return model.ValVector, nil
	case "matrix":
		return model.ValMatrix, nil
	case "string":
		return model.ValString, nil
	}
	return model.ValNone, fmt.Errorf("unknown value type %q", name)
}

// vector decodes null (a nil vector) or an array of samples.
func (d *decoder) vector() (vecResult, error) {
	s := &d.s
	if null, err := d.open('[', "the vector", "an array"); err != nil || null {
		return vecResult{}, err
	}
	r := vecResult{samples: Samples{}}
	empty, err := s.arrStart()
	for more := !empty; more && err == nil; more, err = s.arrNext() {
		var null bool
		if null, err = d.open('{', "a sample", "an object"); err != nil {
			return vecResult{}, err
		}
		if null {
			// Refused by decodeQuery if it is in the final result.
			r.hasNull = true
			continue
		}
		start := s.i
		var smp model.Sample
		var hasMetric bool
		if len(r.samples) == 0 {
			d.nextChunk = firstChunk
		}
		if hasMetric, err = d.sample(&smp); err != nil {
			return vecResult{}, err
		}
		r.hasUnvalued = r.hasUnvalued || !d.valued
		if len(r.samples) == 0 {
			d.sizeFor(&r, s.i-start)
		}
		r.samples = append(r.samples, Sample{Labels: d.keepLabels(hasMetric), Value: smp.Value, Timestamp: smp.Timestamp, Histogram: smp.Histogram})
		d.labels, d.prev = d.prev[:0], d.labels
	}
	if err != nil {
		return vecResult{}, err
	}
	return r, nil
}

// minSampleLen is the length of the shortest sample Prometheus writes:
// {"metric":{},"value":[0,"0"]}.
const minSampleLen = 29

// sizeFor sizes the samples and the next slab of labels for the rest of
// the body, guessing from the length of the first sample (just decoded, its
// labels in d.labels) that the others are about as long and have as many
// labels (answers are usually regular), so that neither grows by copying.
// The guess is bounded by what the body can hold.
func (d *decoder) sizeFor(r *vecResult, firstLen int) {
	rest := len(d.s.b) - d.s.i
	n := rest/max(firstLen, minSampleLen) + 1
	n = min(n, rest/minSampleLen+1, 1<<16)
	if n <= 1 {
		return
	}
	r.samples = slices.Grow(r.samples, n)
	if k := len(d.labels); len(d.lslab) < n*k {
		d.lslab = make([]Label, n*k)
	}
	// The first sample's values are the arena's bytes so far; the others
	// need at most as many each (equal values are shared, see metric).
	d.nextChunk = min(max((n-1)*len(d.arena), 1), arenaChunk)
}

// keepLabels returns a copy of the labels of the sample just decoded,
// allocated in slabs: nil when it had no "metric", empty but not nil when
// it had an empty one.
func (d *decoder) keepLabels(hasMetric bool) Labels {
	if !hasMetric {
		return nil
	}
	k := len(d.labels)
	if k == 0 {
		return Labels{}
	}
	if len(d.lslab) < k {
		d.lslab = make([]Label, max(k, min(64*k, 4096)))
	}
	ls := d.lslab[:k:k]
	d.lslab = d.lslab[k:]
	copy(ls, d.labels)
	return ls
}

// sample decodes one element of a vector (an object: d.open has read
// that) into smp, which is zero, except for its labels, left in d.labels; hasMetric reports that the sample had a
// "metric" object (the last "metric" member was not null).
func (d *decoder) sample(smp *model.Sample) (hasMetric bool, err error) {
	s := &d.s
	d.labels = d.labels[:0]
	var hist *model.SampleHistogramPair
	valued := false
	empty, err := s.objStart()
	for more := !empty; more && err == nil; more, err = s.objNext() {
		var key []byte
		var plain bool
		if key, plain, err = s.key(); err != nil {
			return false, err
		}
		switch {
		case keyIs(key, plain, "metric"):
			var null bool
			if null, err = d.open('{', `"metric"`, "an object"); err == nil {
				if hasMetric = !null; null {
					d.labels = d.labels[:0]
				} else {
					err = d.metric()
				}
			}
		case keyIs(key, plain, "value"):
			var v bool
			v, err = d.samplePair(smp)
			valued = valued || v
		case keyIs(key, plain, "histogram"):
			s.ws()
			start := s.i
			if err = s.skip(); err != nil {
				return false, err
			}
			if hist == nil {
				hist = &model.SampleHistogramPair{}
			}
			err = hist.UnmarshalJSON(s.b[start:s.i])
		default:
			err = s.skip()
		}
		if err != nil {
			return false, err
		}
	}
	if err != nil {
		return false, err
	}
	if hist != nil && hist.Histogram != nil {
		smp.Timestamp, smp.Histogram, smp.Value = hist.Timestamp, hist.Histogram, 0
		valued = true
	}
	d.valued = valued
	return hasMetric, nil
}

// metric decodes a label set object (d.open has read that it is one),
// appending to d.labels.
func (d *decoder) metric() error {
	s := &d.s
	empty, err := s.objStart()
	for more := !empty; more && err == nil; more, err = s.objNext() {
		var raw []byte
		var plain bool
		if raw, plain, err = s.key(); err != nil {
			return err
		}
		i := len(d.labels)
		var name string
		switch {
		case plain && i < len(d.prev) && d.prev[i].Name == string(raw):
			name = d.prev[i].Name
		default:
			name = d.labelName(raw, plain)
		}
		var value string
		var c byte
		if c, err = s.peek(); err != nil {
			return err
		}
		switch c {
		case '"':
			if raw, plain, err = s.str(); err != nil {
				return err
			}
			switch {
			case plain && i < len(d.prev) && d.prev[i].Value == string(raw) && d.prev[i].Name == name:
				value = d.prev[i].Value
			case plain:
				value = d.arenaString(raw)
			default:
				value = unquote(raw, plain)
			}
		case 'n':
			err = s.literal("null")
		default:
			if err = s.skip(); err == nil {
				err = fmt.Errorf("the value of label %q is a JSON %s, not a string", name, kindOf(c))
			}
		}
		if err != nil {
			return err
		}
		d.labels = append(d.labels, Label{Name: name, Value: value})
	}
	return err
}

// arenaString returns a string of raw's bytes, copied into the arena. The
// arena's bytes are never written again once a string refers to them: a
// chunk that is full is left to its strings and a new one started.
func (d *decoder) arenaString(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	if len(raw) > cap(d.arena)-len(d.arena) {
		d.arena = make([]byte, 0, max(len(raw), cmp.Or(d.nextChunk, arenaChunk)))
		d.nextChunk = 0
	}
	start := len(d.arena)
	d.arena = append(d.arena, raw...)
	return unsafe.String(&d.arena[start], len(raw))
}

// labelName interns a label name for the duration of the decoding.
func (d *decoder) labelName(raw []byte, plain bool) string {
	if !plain {
		return unquote(raw, plain)
	}
	if n, ok := d.names[string(raw)]; ok {
		return n
	}
	if d.names == nil {
		d.names = make(map[string]string, 8)
	}
	n := string(raw)
	d.names[n] = n
	return n
}

// samplePair decodes "value": null, or [timestamp, "value", ...] where a
// null element is left alone; valued reports that the sample value was
// there (the second element, not null). client_golang reads a missing or
// null value as 0; a sample without its value is refused here instead
// (decodeQuery), so that a broken answer is never served as the value 0.
func (d *decoder) samplePair(smp *model.Sample) (valued bool, err error) {
	if null, err := d.open('[', `"value"`, "an array"); err != nil || null {
		return false, err
	}
	err = d.pair(&smp.Timestamp, func() (err error) {
		valued, err = d.sampleValue(&smp.Value)
		return err
	})
	return valued, err
}

// pair decodes the rest of an array [timestamp, second, ...] (d.open has
// read its start): the timestamp into *t, the second element with second,
// the others skipped.
func (d *decoder) pair(t *model.Time, second func() error) error {
	s := &d.s
	empty, err := s.arrStart()
	n := 0
	for more := !empty; more && err == nil; more, err = s.arrNext() {
		switch n {
		case 0:
			err = d.timestamp(t)
		case 1:
			err = second()
		default:
			err = s.skip()
		}
		if err != nil {
			return err
		}
		n++
	}
	return err
}

// timestamp decodes a timestamp element: null (left alone) or a number.
func (d *decoder) timestamp(t *model.Time) error {
	if null, err := d.open('0', "a timestamp", "a number"); err != nil || null {
		return err
	}
	raw, err := d.s.num()
	if err != nil {
		return err
	}
	return parseTime(raw, t)
}

// sampleValue decodes a value element: null (left alone) or a string whose
// raw text (escapes are not interpreted) strconv.ParseFloat accepts;
// valued reports that it was not null.
func (d *decoder) sampleValue(v *model.SampleValue) (valued bool, err error) {
	if null, err := d.open('"', "sample value", "a quoted string"); err != nil || null {
		return false, err
	}
	raw, _, err := d.s.str()
	if err != nil {
		return false, err
	}
	f, err := parseSampleValue(raw)
	if err != nil {
		return false, fmt.Errorf("sample value: %w", err)
	}
	*v = model.SampleValue(f)
	return true, nil
}

// parseSampleValue is strconv.ParseFloat(string(raw), 64), faster for the
// plain decimals most values are: -?digits(.digits)? with at most 15
// significant digits (leading zeros aside) and 15 decimals. Such a number is
// an integer below 2^53 divided by a power of ten up to 10^15, both exact in
// a float64, so the one rounding of the division gives the nearest float64,
// which ParseFloat returns too.
func parseSampleValue(raw []byte) (float64, error) {
	i, neg := 0, false
	if len(raw) > 0 && raw[0] == '-' {
		i, neg = 1, true
	}
	var mant uint64
	digits, decimals, sawDot, ok := 0, 0, false, i < len(raw)
	for ; ok && i < len(raw); i++ {
		c := raw[i]
		switch {
		case c >= '0' && c <= '9':
			if mant != 0 || c != '0' {
				digits++
			}
			mant = mant*10 + uint64(c-'0')
			if sawDot {
				decimals++
			}
		case c == '.' && !sawDot && i > 0 && raw[i-1] != '-':
			sawDot = true
		default:
			ok = false
		}
	}
	if ok && digits <= 15 && decimals <= 15 && !(sawDot && raw[len(raw)-1] == '.') {
		f := float64(mant) / pow10[decimals]
		if neg {
			f = -f
		}
		return f, nil
	}
	return strconv.ParseFloat(string(raw), 64)
}

// pow10 are the powers of ten parseSampleValue divides by, all exact.
var pow10 = [16]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// scalar decodes a scalar result: [timestamp, "value", ...]. Unlike a
// sample's value, the string is unescaped before parsing; a missing or null
// value is an error (model.Scalar's decoding).
func (d *decoder) scalar(sc *model.Scalar) error {
	var text string
	null, err := d.open('[', "the scalar", "an array")
	if err == nil && !null {
		err = d.pair(&sc.Timestamp, func() error { return d.optString(&text, `"scalar value"`) })
	}
	if err != nil {
		return err
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return fmt.Errorf("error parsing sample value: %w", err)
	}
	sc.Value = model.SampleValue(f)
	return nil
}

// parseTime reads a JSON number as model.Time's UnmarshalJSON does: whole
// seconds, then at most three digits of fraction (truncated); a number with
// an exponent is an error; overflow wraps as int64 arithmetic does.
func parseTime(raw []byte, t *model.Time) error {
	// Fast path: digits, optionally a fraction of digits, no sign, no
	// exponent, small enough not to overflow.
	sec, frac, ok := int64(0), int64(0), len(raw) > 0
	i := 0
	for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
		sec = sec*10 + int64(raw[i]-'0')
	}
	if i == 0 || i > 15 {
		ok = false
	}
	if ok && i < len(raw) {
		if raw[i] != '.' {
			ok = false
		} else {
			digits := 0
			for i++; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
				if digits < 3 {
					frac = frac*10 + int64(raw[i]-'0')
				}
				digits++
			}
			if i < len(raw) || digits == 0 {
				ok = false
			}
			for ; digits < 3; digits++ {
				frac *= 10
			}
		}
	}
	if ok {
		*t = model.Time(sec*1000 + frac)
		return nil
	}
	return parseTimeSlow(string(raw), t)
}

// parseTimeSlow is model.Time's UnmarshalJSON for any number text.
func parseTimeSlow(text string, t *model.Time) error {
	const second = 1000
	base, frac, found := strings.Cut(text, ".")
	v, err := strconv.ParseInt(base, 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	if !found {
		*t = model.Time(v * second)
		return nil
	}
	prec := 3 - len(frac)
	if prec < 0 {
		frac = frac[:3]
	}
	va, err := strconv.ParseInt(frac, 10, 32)
	if err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	switch prec {
	case 1:
		va *= 10
	case 2:
		va *= 100
	}
	if len(base) > 0 && base[0] == '-' {
		va = -va
	}
	*t = model.Time(v*second + va)
	return nil
}

// keyIs reports whether an object member name (raw, as in the body) is name
// as encoding/json matches struct fields: exactly, or else case-insensitively
// after unescaping.
func keyIs(raw []byte, plain bool, name string) bool {
	if plain && string(raw) == name {
		return true
	}
	if plain {
		return bytes.EqualFold(raw, []byte(name))
	}
	return bytes.EqualFold([]byte(unquote(raw, false)), []byte(name))
}

// kindOf names the JSON kind of a value from its first byte, for errors.
func kindOf(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// unquote returns the string a JSON string's raw contents (between the
// quotes, already validated by the scanner) stand for, as encoding/json
// decodes it: escapes interpreted, surrogate pairs combined, lone
// surrogates and invalid UTF-8 replaced by U+FFFD. plain means raw holds
// neither escapes nor non-ASCII bytes.
func unquote(raw []byte, plain bool) string {
	if plain {
		return string(raw)
	}
	out := make([]byte, 0, len(raw)+2*utf8.UTFMax)
	for r := 0; r < len(raw); {
		c := raw[r]
		switch {
		case c == '\\':
			r++
			switch e := raw[r]; e {
			case '"', '\\', '/', '\'':
				out = append(out, e)
				r++
			case 'b', 'f', 'n', 'r', 't':
				out = append(out, "\b\f\n\r\t"[strings.IndexByte("bfnrt", e)])
				r++
			case 'u':
				rr := getu4(raw[r-1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					rr1 := getu4(raw[r:])
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						out = utf8.AppendRune(out, dec)
						r += 6
						break
					}
					rr = unicode.ReplacementChar
				}
				out = utf8.AppendRune(out, rr)
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			r++
		default:
			rr, size := utf8.DecodeRune(raw[r:])
			if rr == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, raw[r:r+size]...)
			}
			r += size
		}
	}
	return string(out)
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// errSampleWithoutValue refuses a vector sample with neither a sample value
// (a missing or null second element of "value", or no "value") nor a
// histogram: client_golang would give it the value 0, which the adapter
// would serve as a real value.
var errSampleWithoutValue = errors.New(`a sample has no value (no "value" [timestamp, "value"] pair and no "histogram")`)
