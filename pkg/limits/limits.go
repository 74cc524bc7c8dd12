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
// requirement with more than MaxInValues values.
func CheckSelector(name string, sel labels.Selector) error {
	if sel == nil || sel.Empty() {
		return nil
	}
	reqs, _ := sel.Requirements()
	n := 0
	for _, r := range reqs {
		n += len(r.Key()) + 4
		vs := r.ValuesUnsorted()
		if len(vs) > MaxInValues {
			return badRequest("%s: requirement on %q has %d values, more than the limit of %d", name, r.Key(), len(vs), MaxInValues)
		}
		for _, v := range vs {
			n += len(v) + 1
		}
		if n > MaxSelectorBytes {
			return badRequest("%s is longer than the limit of %d bytes", name, MaxSelectorBytes)
		}
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
