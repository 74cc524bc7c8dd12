package limits

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// TestCheckSelectors checks the label selector (metricLabelSelector) and
// the field selector limits: accepted up to the limit, a 400 naming it
// above.
func TestCheckSelectors(t *testing.T) {
	values := func(n, size int) string {
		vs := make([]string, n)
		for i := range vs {
			s := fmt.Sprintf("v%d", i)
			vs[i] = s + strings.Repeat("x", size-len(s))
		}
		return strings.Join(vs, ",")
	}
	labelSelector := func(t *testing.T, s string) error {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatalf("labels.Parse: %v", err)
		}
		return CheckSelector("metricLabelSelector", sel)
	}
	metricSelector := func(t *testing.T, s string) error {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatalf("labels.Parse: %v", err)
		}
		return CheckMetricSelector("metricLabelSelector", sel)
	}
	fieldSelector := func(t *testing.T, s string) error {
		sel, err := fields.ParseSelector(s)
		if err != nil {
			t.Fatalf("fields.ParseSelector: %v", err)
		}
		return CheckFieldSelector("fieldSelector", sel)
	}
	for _, tc := range []struct {
		name, sel, wantMsg string // wantMsg "": accepted
		check              func(*testing.T, string) error
	}{
		{"empty", "", "", labelSelector},
		{"an HPA's selector", "app=web,tier in (front,back),!canary", "", labelSelector},
		{"1,000 values", "pod in (" + values(1000, 8) + ")", "", labelSelector},
		{"1,001 values", "pod in (" + values(1001, 6) + ")", `metricLabelSelector: requirement on "pod" has 1001 values, more than the limit of 1000`, labelSelector},
		{"10,000 values (the probe's)", "pod notin (" + values(10000, 6) + ")", "more than the limit of 1000", labelSelector},
		{"1,000 values of 63 bytes", "pod in (" + values(1000, 63) + ")", "longer than the limit of 16384 bytes", labelSelector},
		// Issue 32: the limit is on the text, not 25 % more.
		{"12 KiB of values", "pod in (" + values(190, 63) + ")", "", labelSelector},
		{"16 KiB of text", "pod in (" + values(255, 63) + ")", "", labelSelector},
		{"just over 16 KiB of text", "pod in (" + values(257, 63) + ")", "longer than the limit of 16384 bytes", labelSelector},
		{"!= in a metric selector", "app=web,tier!=front", `metricLabelSelector: "tier!=front": the operator != is not supported`, metricSelector},
		{"== in a metric selector", "tier==front", "the operator == is not supported", metricSelector},
		{"the supported operators in a metric selector", "app=web,tier in (a,b),env notin (x),canary,!legacy", "", metricSelector},
		{"empty field selector", "", "", fieldSelector},
		{"one pod", "metadata.name=web-1", "", fieldSelector},
		{"16 KiB", "metadata.name=" + strings.Repeat("x", MaxSelectorBytes-len("metadata.name=")-1), "", fieldSelector},
		{"over 16 KiB", "metadata.name!=a," + "metadata.name=" + strings.Repeat("x", MaxSelectorBytes), "fieldSelector is longer than the limit of 16384 bytes", fieldSelector},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(t, tc.sel)
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("check: %v", err)
				}
				return
			}
			var se *apierrors.StatusError
			if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusBadRequest || !strings.Contains(se.ErrStatus.Message, tc.wantMsg) {
				t.Fatalf("check = %v, want a 400 containing %q", err, tc.wantMsg)
			}
		})
	}
}

func TestCheckQuerySize(t *testing.T) {
	if err := CheckQuerySize("metric m", strings.Repeat("x", MaxRenderedQueryBytes)); err != nil {
		t.Errorf("a query of exactly the limit: %v", err)
	}
	err := CheckQuerySize("metric m", `sum(secret_series{a="`+strings.Repeat("x", MaxRenderedQueryBytes)+`"})`)
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusBadRequest {
		t.Fatalf("CheckQuerySize over the limit = %v, want a 400", err)
	}
	if msg := se.ErrStatus.Message; !strings.Contains(msg, "more than the limit of 65536 bytes") || strings.Contains(msg, "secret_series") {
		t.Errorf("message %q: want the limit named and the query left out", msg)
	}
}

func TestCheckNamespace(t *testing.T) {
	for _, tc := range []struct {
		ns      string
		wantMsg string // "": accepted
	}{
		{"", ""},
		{"team-a", ""},
		{strings.Repeat("a", 63), ""},
		{strings.Repeat("a", 64), "not a namespace name"},
		{strings.Repeat("n", 10<<10), `namespace "` + strings.Repeat("n", 63) + `..." (10.0 KiB): not a namespace name`},
		{"Team_A", "not a namespace name"},
		{`a"}) or vector(1`, "not a namespace name"},
	} {
		err := CheckNamespace(tc.ns)
		if tc.wantMsg == "" {
			if err != nil {
				t.Errorf("CheckNamespace(%.20q) = %v", tc.ns, err)
			}
			continue
		}
		var se *apierrors.StatusError
		if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusBadRequest || !strings.Contains(se.ErrStatus.Message, tc.wantMsg) || len(se.ErrStatus.Message) > 1000 {
			t.Errorf("CheckNamespace(%.20q) = %v, want a short 400 containing %q", tc.ns, err, tc.wantMsg)
		}
	}
}
