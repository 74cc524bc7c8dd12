package provider

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
			err = checkSelector("metricLabelSelector", sel)
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("checkSelector: %v", err)
				}
				return
			}
			var se *apierrors.StatusError
			if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusBadRequest || !strings.Contains(se.ErrStatus.Message, tc.wantMsg) {
				t.Fatalf("checkSelector = %v, want a 400 containing %q", err, tc.wantMsg)
			}
		})
	}
}

func TestCheckQuerySize(t *testing.T) {
	if err := checkQuerySize("metric m", strings.Repeat("x", MaxRenderedQueryBytes)); err != nil {
		t.Errorf("a query of exactly the limit: %v", err)
	}
	err := checkQuerySize("metric m", `sum(secret_series{a="`+strings.Repeat("x", MaxRenderedQueryBytes)+`"})`)
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusBadRequest {
		t.Fatalf("checkQuerySize over the limit = %v, want a 400", err)
	}
	if msg := se.ErrStatus.Message; !strings.Contains(msg, "more than the limit of 65536 bytes") || strings.Contains(msg, "secret_series") {
		t.Errorf("message %q: want the limit named and the query left out", msg)
	}
}
