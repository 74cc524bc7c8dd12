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

func TestCheckSelector(t *testing.T) {
	values := func(n, size int) string {
		vs := make([]string, n)
		for i := range vs {
			s := fmt.Sprintf("v%d", i)
			vs[i] = s + strings.Repeat("x", size-len(s))
		}
		return strings.Join(vs, ",")
	}
	for _, tc := range []struct {
		name, sel, wantMsg string // wantMsg "": accepted
	}{
		{"empty", "", ""},
		{"an HPA's selector", "app=web,tier in (front,back),!canary", ""},
		{"1,000 values", "pod in (" + values(1000, 8) + ")", ""},
		{"1,001 values", "pod in (" + values(1001, 6) + ")", `metricLabelSelector: requirement on "pod" has 1001 values, more than the limit of 1000`},
		{"10,000 values (the probe's)", "pod notin (" + values(10000, 6) + ")", "more than the limit of 1000"},
		{"1,000 values of 63 bytes", "pod in (" + values(1000, 63) + ")", "metricLabelSelector is longer than the limit of 16384 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := labels.Parse(tc.sel)
			if err != nil {
				t.Fatalf("labels.Parse: %v", err)
			}
			err = CheckSelector("metricLabelSelector", sel)
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("CheckSelector: %v", err)
				}
				return
			}
			var se *apierrors.StatusError
			if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusBadRequest || !strings.Contains(se.ErrStatus.Message, tc.wantMsg) {
				t.Fatalf("CheckSelector = %v, want a 400 containing %q", err, tc.wantMsg)
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

func TestCheckFieldSelector(t *testing.T) {
	for _, tc := range []struct {
		name, sel, wantMsg string // wantMsg "": accepted
	}{
		{"empty", "", ""},
		{"one pod", "metadata.name=web-1", ""},
		{"16 KiB", "metadata.name=" + strings.Repeat("x", MaxSelectorBytes-len("metadata.name=")-1), ""},
		{"over 16 KiB", "metadata.name!=a," + "metadata.name=" + strings.Repeat("x", MaxSelectorBytes), "fieldSelector is longer than the limit of 16384 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := fields.ParseSelector(tc.sel)
			if err != nil {
				t.Fatalf("fields.ParseSelector: %v", err)
			}
			err = CheckFieldSelector("fieldSelector", sel)
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("CheckFieldSelector: %v", err)
				}
				return
			}
			var se *apierrors.StatusError
			if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusBadRequest || !strings.Contains(se.ErrStatus.Message, tc.wantMsg) {
				t.Fatalf("CheckFieldSelector = %v, want a 400 containing %q", err, tc.wantMsg)
			}
		})
	}
}
