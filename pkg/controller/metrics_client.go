package controller

import (
	"context"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"
)

// MetricsClient reads the three metrics APIs for one HPA's metric specs. It
// returns the API objects as they came (the decision core converts them);
// errors are the client's, unwrapped.
type MetricsClient interface {
	// PodResourceMetrics lists metrics.k8s.io PodMetrics of the pods the
	// selector matches in namespace (Resource and ContainerResource metrics).
	PodResourceMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]metricsapi.PodMetrics, error)
	// PodsCustomMetric lists custom.metrics.k8s.io values of metricName for
	// the pods the selector matches (Pods metrics).
	PodsCustomMetric(ctx context.Context, namespace, metricName string, selector, metricSelector labels.Selector) ([]customapi.MetricValue, error)
	// ObjectCustomMetric gets the custom.metrics.k8s.io value of metricName
	// for one object (Object metrics). A v1 Namespace reference reads the
	// HPA's own namespace, as upstream does.
	ObjectCustomMetric(ctx context.Context, namespace, metricName string, ref autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (*customapi.MetricValue, error)
	// ExternalMetric lists the external.metrics.k8s.io series of metricName
	// matching metricSelector in namespace (External metrics).
	ExternalMetric(ctx context.Context, namespace, metricName string, metricSelector labels.Selector) ([]externalapi.ExternalMetricValue, error)
}

// APIMetricsClient is the MetricsClient over the aggregated metrics APIs,
// reached through the API server with the k8s.io/metrics clients.
//
// The custom and external clients take no context: their per-request
// timeout is the rest.Config's Timeout they were built with.
type APIMetricsClient struct {
	// Resource reads metrics.k8s.io (PodMetrics).
	Resource resourceclient.PodMetricsesGetter
	// Custom reads custom.metrics.k8s.io at its preferred version
	// (v1beta2, else v1beta1).
	Custom customclient.CustomMetricsClient
	// External reads external.metrics.k8s.io.
	External externalclient.ExternalMetricsClient
}

var _ MetricsClient = (*APIMetricsClient)(nil)

// PodResourceMetrics implements MetricsClient.
func (c *APIMetricsClient) PodResourceMetrics(ctx context.Context, namespace string, selector labels.Selector) ([]metricsapi.PodMetrics, error) {
	list, err := c.Resource.PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	if list == nil {
		return nil, nil
	}
	return list.Items, nil
}

// PodsCustomMetric implements MetricsClient.
func (c *APIMetricsClient) PodsCustomMetric(ctx context.Context, namespace, metricName string, selector, metricSelector labels.Selector) ([]customapi.MetricValue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	list, err := c.Custom.NamespacedMetrics(namespace).GetForObjects(schema.GroupKind{Kind: "Pod"}, selector, metricName, metricSelector)
	if err != nil {
		return nil, err
	}
	if list == nil {
		return nil, nil
	}
	return list.Items, nil
}

// ObjectCustomMetric implements MetricsClient.
func (c *APIMetricsClient) ObjectCustomMetric(ctx context.Context, namespace, metricName string, ref autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (*customapi.MetricValue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	if gvk.Kind == "Namespace" && gvk.Group == "" {
		// A reference cannot leave the HPA's namespace: the namespace's
		// own metric is read whatever name the reference holds.
		return c.Custom.RootScopedMetrics().GetForObject(gvk.GroupKind(), namespace, metricName, metricSelector)
	}
	return c.Custom.NamespacedMetrics(namespace).GetForObject(gvk.GroupKind(), ref.Name, metricName, metricSelector)
}

// ExternalMetric implements MetricsClient.
func (c *APIMetricsClient) ExternalMetric(ctx context.Context, namespace, metricName string, metricSelector labels.Selector) ([]externalapi.ExternalMetricValue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	list, err := c.External.NamespacedMetrics(namespace).List(metricName, metricSelector)
	if err != nil {
		return nil, err
	}
	if list == nil {
		return nil, nil
	}
	return list.Items, nil
}
