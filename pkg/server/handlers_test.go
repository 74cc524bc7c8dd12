package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBadMetricLabelSelector: an unparsable metricLabelSelector is a 400
// naming it (custom-metrics-apiserver's storage alone answers a 500), a
// valid one is served as before.
func TestBadMetricLabelSelector(t *testing.T) {
	ts := startReadyServer(t, fixedProvider{}, fixedProvider{}, nil)
	for _, tc := range []struct {
		name, path string
		wantCode   int
		wantMsg    string
	}{
		{"unparsable", cmV1beta2 + "/namespaces/default/pods/*/m?metricLabelSelector=" + url.QueryEscape("a in ("), http.StatusBadRequest, `invalid metricLabelSelector "a in ("`},
		{"unparsable v1beta1 one object", cmV1beta1 + "/namespaces/default/pods/pod-a/m?metricLabelSelector=" + url.QueryEscape("=b"), http.StatusBadRequest, `invalid metricLabelSelector "=b"`},
		{"valid", cmV1beta2 + "/namespaces/default/pods/*/m?metricLabelSelector=" + url.QueryEscape("a in (b,c)"), http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ts.do(encodingRequest{path: tc.path})
			if got.Code != tc.wantCode {
				t.Fatalf("GET %s: %d %s, want %d", tc.path, got.Code, got.Body, tc.wantCode)
			}
			if tc.wantMsg == "" {
				return
			}
			var st metav1.Status
			if err := json.Unmarshal([]byte(got.Body), &st); err != nil {
				t.Fatalf("body %q is not a Status: %v", got.Body, err)
			}
			if st.Reason != metav1.StatusReasonBadRequest || !strings.Contains(st.Message, tc.wantMsg) {
				t.Errorf("Status %+v, want reason BadRequest and a message with %q", st, tc.wantMsg)
			}
		})
	}
}
