package server

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"
)

// TestFrontProxyCALoaded drives the library's own ConfigMap CA controller
// as the generic server starts it (RunOnce before the informer runs, then
// Run): the check must fail while the CA is not loaded (the window in
// which the aggregator's requests were answered 401/403 and the
// APIServices were marked unavailable) and pass once it is.
func TestFrontProxyCALoaded(t *testing.T) {
	if err := frontProxyCALoaded(nil).Check(nil); err != nil {
		t.Errorf("no requestheader configuration: %v, want ready", err)
	}
	caPEM, _, err := certutil.GenerateSelfSignedCertKey("front-proxy-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "extension-apiserver-authentication"},
		Data:       map[string]string{"requestheader-client-ca-file": string(caPEM)},
	})
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("client-ca", "kube-system", "extension-apiserver-authentication", "requestheader-client-ca-file", kube)
	if err != nil {
		t.Fatal(err)
	}
	check := frontProxyCALoaded(&authenticatorfactory.RequestHeaderConfig{CAContentProvider: ca})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ca.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	err = check.Check(nil)
	if err == nil || !strings.Contains(err.Error(), "not loaded yet") {
		t.Fatalf("before the CA's informer synced: %v, want not ready", err)
	}
	if check.Name() != "front-proxy-ca" {
		t.Errorf("name %q, want front-proxy-ca", check.Name())
	}
	go ca.Run(ctx, 1)
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return check.Check(nil) == nil, nil
	}); err != nil {
		t.Fatalf("the CA's informer synced, the check still fails: %v", check.Check(nil))
	}
}
