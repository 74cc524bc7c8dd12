package provider_test

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/objectcache"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/provider"
)

// Example shows the wiring of the adapter server: the object cache runs
// for the life of the server, the provider reads the discovery loop's
// current index and rules, and serves both metrics APIs.
func Example() {
	var (
		ctx        context.Context       // the server's lifetime
		restConfig *rest.Config          // the adapter's client configuration
		mapper     meta.RESTMapper       // the server's (deferred discovery) RESTMapper
		disc       *discovery.Discoverer // the relist loop
		promClient *promclient.Client    // the coalescing Prometheus client
	)

	mdClient, err := metadata.NewForConfig(restConfig)
	if err != nil {
		klog.ErrorS(err, "Creating the metadata client")
		return
	}
	kubeClient, err := kubernetes.NewForConfig(restConfig) // pods are watched through it
	if err != nil {
		klog.ErrorS(err, "Creating the Kubernetes client")
		return
	}
	objects, err := objectcache.New(mdClient, kubeClient, objectcache.Options{})
	if err != nil {
		klog.ErrorS(err, "Creating the object cache")
		return
	}
	// Nearly every HPA asks for pods: list them before the first request.
	objects.Warm(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	go objects.Run(ctx)

	p, err := provider.New(provider.Config{
		Index:    provider.IndexSource(disc.Index),
		Rules:    disc.Rules,
		Backends: promclient.Single[promclient.SampleQuerier](promClient),
		Objects:  objects,
		Mapper:   mapper,
	})
	if err != nil {
		klog.ErrorS(err, "Creating the provider")
		return
	}
	// With custom-metrics-apiserver's AdapterBase:
	// adapter.WithCustomMetrics(p); adapter.WithExternalMetrics(p)
	_ = p
}
