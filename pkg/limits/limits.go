package provider

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
)

// Limits on one request, checked before anything is sent to Prometheus
// (docs/config.md, "Limits of a request"). Each is far above real use: an
// HPA's selector is a handful of labels, and a `*` request over 5,000 pods
// renders a query of a few hundred bytes (names above MaxNamesInQuery are
// not put into it). Above them a request is a 400 naming the limit, never
// a query of hundreds of kilobytes.
const (
	// MaxSelectorBytes bounds the text of a label selector (the objects'
	// labelSelector and the metricLabelSelector).
	MaxSelectorBytes = 16 << 10
	// MaxInValues bounds the values of one `in` or `notin` requirement.
	MaxInValues = 1000
	// MaxRenderedQueryBytes bounds the PromQL rendered for one request.
	MaxRenderedQueryBytes = 64 << 10
)

// checkSelector returns a 400 naming the limit when sel (the request's
// selector called name) is over MaxSelectorBytes or has a requirement with
// more than MaxInValues values.
func checkSelector(name string, sel labels.Selector) error {
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

// checkQuerySize returns a 400 naming the limit when a rendered query is
// over MaxRenderedQueryBytes; the query itself is not repeated.
func checkQuerySize(what string, expr string) error {
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
