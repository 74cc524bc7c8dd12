// Package limits bounds one metrics request (docs/config.md, "Limits of a
// request"): the size of its selectors, the values of one `in`, the size of
// the query rendered for it. The custom, external and resource metrics
// paths check them before anything is sent to Prometheus; a request over a
// limit is a 400 naming the limit.
package limits

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The limits of one request. Each is far above real use: an
// HPA's selector is a handful of labels, and a `*` request over 5,000 pods
// renders a query of a few hundred bytes (names above MaxNamesInQuery are
// not put into it). Above them a request is a 400 naming the limit, never
// a query of hundreds of kilobytes.
const (
	// MaxSelectorBytes bounds the text of a selector (the objects'
	// labelSelector and fieldSelector, the metricLabelSelector).
	MaxSelectorBytes = 16 << 10
	// MaxInValues bounds the values of one `in` or `notin` requirement.
	MaxInValues = 1000
	// MaxRenderedQueryBytes bounds the PromQL rendered for one request.
	MaxRenderedQueryBytes = 64 << 10
)

// CheckSelector returns a 400 naming the limit when sel (the request's
// label selector called name) is over MaxSelectorBytes or has a
// requirement with more than MaxInValues values. The size is that of the
// selector's text (its canonical form: the request's text without its
// spaces), so a selector under the limit as sent is under it here.
func CheckSelector(name string, sel labels.Selector) error {
	if sel == nil || sel.Empty() {
		return nil
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if vs := r.ValuesUnsorted(); len(vs) > MaxInValues {
			return badRequest("%s: requirement on %q has %d values, more than the limit of %d", name, r.Key(), len(vs), MaxInValues)
		}
	}
	if n := len(sel.String()); n > MaxSelectorBytes {
		return badRequest("%s is %s, longer than the limit of %d bytes", name, byteSize(n), MaxSelectorBytes)
	}
	return nil
}

// CheckMetricSelector is CheckSelector for a custom metric's
// metricLabelSelector, which is also echoed in the answer as a
// metav1.LabelSelector: a requirement that has no such form (`!=`, `==`)
// is a 400 before anything is rendered or sent to Prometheus.
func CheckMetricSelector(name string, sel labels.Selector) error {
	if err := CheckSelector(name, sel); err != nil {
		return err
	}
	if sel == nil {
		return nil
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.NotEquals:
			return badRequest("%s: %q: the operator != is not supported in a metric label selector (use %s notin (...))", name, r.String(), r.Key())
		case selection.DoubleEquals:
			return badRequest("%s: %q: the operator == is not supported in a metric label selector (use %s=...)", name, r.String(), r.Key())
		}
	}
	return nil
}

// CheckNamespace returns a 400 when ns, a request's namespace, is not a
// namespace name (a DNS-1123 label), before any query is rendered with
// it; "" (no namespace) is valid. The name is not repeated past 63 bytes.
func CheckNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		shown := ns
		if len(shown) > validation.DNS1123LabelMaxLength {
			shown = shown[:validation.DNS1123LabelMaxLength] + "..."
		}
		return badRequest("namespace %q (%s): not a namespace name: %s", shown, byteSize(len(ns)), msgs[0])
	}
	return nil
}

// CheckFieldSelector returns a 400 naming the limit when sel (the
// request's field selector called name) is over MaxSelectorBytes.
func CheckFieldSelector(name string, sel fields.Selector) error {
	if sel == nil || sel.Empty() {
		return nil
	}
	n := 0
	for _, r := range sel.Requirements() {
		n += len(r.Field) + len(r.Operator) + len(r.Value) + 1
		if n > MaxSelectorBytes {
			return badRequest("%s is longer than the limit of %d bytes", name, MaxSelectorBytes)
		}
	}
	return nil
}

// CheckQuerySize returns a 400 naming the limit when a rendered query is
// over MaxRenderedQueryBytes; the query itself is not repeated.
func CheckQuerySize(what string, expr string) error {
	if len(expr) > MaxRenderedQueryBytes {
		return badRequest("%s: the query rendered for this request is %s, more than the limit of %d bytes (narrow the metric label selector)",
			what, byteSize(len(expr)), MaxRenderedQueryBytes)
	}
	return nil
}

func byteSize(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// badRequest is a 400 with a message.
func badRequest(format string, args ...any) *apierrors.StatusError {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}
