package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

type fakeAuthorizer struct {
	decision authorizer.Decision
	err      error
}

func (f fakeAuthorizer) authorizer() authorizer.Authorizer {
	return authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return f.decision, "because", f.err
	})
}

// TestAuthorizationUnavailable runs the library's authorization filter
// between authorizationUnavailable and a handler: an authorizer that cannot
// reach the API server makes a 503 without the API server's address; every
// other answer passes unchanged.
func TestAuthorizationUnavailable(t *testing.T) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme).WithoutConversion()
	sarErr := errors.New(`Post "https://10.96.0.1:443/apis/authorization.k8s.io/v1/subjectaccessreviews?timeout=10s": dial tcp 10.96.0.1:443: connect: connection refused`)
	for _, tc := range []struct {
		name     string
		authz    fakeAuthorizer
		handler  int
		wantCode int
		wantBody string
	}{
		{"API server down", fakeAuthorizer{authorizer.DecisionNoOpinion, sarErr}, http.StatusOK, http.StatusServiceUnavailable,
			"authorizing the request with the Kubernetes API server: not available (request id "},
		{"allowed", fakeAuthorizer{authorizer.DecisionAllow, nil}, http.StatusOK, http.StatusOK, "served"},
		{"allowed despite an error", fakeAuthorizer{authorizer.DecisionAllow, sarErr}, http.StatusOK, http.StatusOK, "served"},
		{"denied", fakeAuthorizer{authorizer.DecisionDeny, nil}, http.StatusOK, http.StatusForbidden, "forbidden"},
		{"the handler's own 500", fakeAuthorizer{authorizer.DecisionAllow, nil}, http.StatusInternalServerError, http.StatusInternalServerError, "served"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.handler)
				_, _ = w.Write([]byte("served"))
			})
			chain := genericapifilters.WithAuthorization(api, recordingAuthorizer{tc.authz.authorizer()}, codecs)
			// What the library's outer filters put in the context.
			withInfo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx := request.WithUser(r.Context(), &user.DefaultInfo{Name: "bob"})
				ctx = request.WithRequestInfo(ctx, &request.RequestInfo{IsResourceRequest: true, Verb: "list", APIGroup: "metrics.k8s.io", APIVersion: "v1beta1", Resource: "pods", Namespace: "shop"})
				chain.ServeHTTP(w, r.WithContext(ctx))
			})
			rec := httptest.NewRecorder()
			authorizationUnavailable(withInfo).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods", nil))
			if rec.Code != tc.wantCode {
				t.Fatalf("code %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			body := rec.Body.String()
			if !strings.Contains(body, tc.wantBody) {
				t.Errorf("body %q lacks %q", body, tc.wantBody)
			}
			if strings.Contains(body, "10.96.0.1") {
				t.Errorf("body %q shows the API server's address", body)
			}
			if tc.wantCode != http.StatusServiceUnavailable {
				return
			}
			var s metav1.Status
			if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
				t.Fatalf("body is not a Status: %v", err)
			}
			if s.Kind != "Status" || s.Code != http.StatusServiceUnavailable || s.Reason != metav1.StatusReasonServiceUnavailable {
				t.Errorf("Status %+v, want kind Status, code 503, reason ServiceUnavailable", s)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
		})
	}
}
