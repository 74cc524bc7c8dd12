package downstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	emapi "k8s.io/metrics/pkg/apis/external_metrics/install"
	cmclient "k8s.io/metrics/pkg/client/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/promscaler/promscaler/pkg/promclient"
)

// Client asks one downstream metrics server, over client-go's REST
// machinery, for its discovery documents and its metrics, decoding answers
// with k8s.io/metrics' schemes into the internal types the
// custom-metrics-apiserver library serves (so any version the downstream
// speaks is served in any version the caller asks for). The versioned
// clients of k8s.io/metrics take no context, hence the REST client they are
// built on, with the same paths.
type Client struct {
	name    string
	rest    rest.Interface
	decoder runtime.Decoder // custom metrics (any version) -> internal
	extDec  runtime.Decoder // external metrics -> internal
}

// custom metrics in versions the downstream may serve, newest first.
var customVersions = []string{"v1beta2", "v1beta1"}

// NewClient returns the client of the downstream name at cfg (host, TLS,
// credentials and transport wrappers set by the caller).
func NewClient(name string, cfg *rest.Config) (*Client, error) {
	cp := rest.CopyConfig(cfg)
	cp.APIPath = "/apis"
	cp.GroupVersion = &schema.GroupVersion{}
	cp.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	// Requests are bounded by the guard and each call's timeout, not
	// client-side throttling: the HPA controller's rate is the caller's.
	cp.QPS, cp.Burst = -1, 0
	rc, err := rest.RESTClientFor(cp)
	if err != nil {
		return nil, fmt.Errorf("downstream %s: building its client: %w", name, err)
	}
	return newClient(name, rc), nil
}

func newClient(name string, rc rest.Interface) *Client {
	extScheme := runtime.NewScheme()
	emapi.Install(extScheme)
	return &Client{
		name:    name,
		rest:    rc,
		decoder: cmclient.NewMetricConverter().Codecs().UniversalDecoder(custom_metrics.SchemeGroupVersion),
		extDec:  serializer.NewCodecFactory(extScheme).UniversalDecoder(external_metrics.SchemeGroupVersion),
	}
}

// Discovered is what a downstream lists in its discovery documents.
type Discovered struct {
	// CustomVersion is the newest custom metrics version it serves ("" if
	// none); its custom metrics are asked in that version.
	CustomVersion string
	Custom        []cmprovider.CustomMetricInfo
	External      []cmprovider.ExternalMetricInfo
	// CatchAll are the APIs for which it lists the custom-metrics-apiserver
	// library's placeholder (custommetrics, externalmetrics: what a server
	// on the library's default provider lists, KEDA's and its sample
	// server among them) instead of its metrics: it is asked for any
	// metric of that API promscaler does not serve.
	CatchAll []API
}

// The library's placeholders (sigs.k8s.io/custom-metrics-apiserver
// pkg/provider/defaults), listed by servers that do not list their metrics.
const (
	placeholderCustom   = "/custommetrics"
	placeholderExternal = "externalmetrics"
)

// Discover fetches the discovery documents of the APIs asked for.
func (c *Client) Discover(ctx context.Context, apis []API) (*Discovered, error) {
	d := &Discovered{}
	for _, api := range apis {
		switch api {
		case Custom:
			for _, v := range customVersions {
				list, err := c.resources(ctx, Custom.Group(), v)
				if apierrors.IsNotFound(err) {
					continue
				}
				if err != nil {
					return nil, err
				}
				d.CustomVersion, d.Custom = v, customInfos(list)
				if listsPlaceholder(list, placeholderCustom) {
					d.CatchAll = append(d.CatchAll, Custom)
				}
				break
			}
		case External:
			list, err := c.resources(ctx, External.Group(), "v1beta1")
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			if list != nil {
				d.External = externalInfos(list)
				if listsPlaceholder(list, placeholderExternal) {
					d.CatchAll = append(d.CatchAll, External)
				}
			}
		}
	}
	return d, nil
}

// resources is one group version's discovery document.
func (c *Client) resources(ctx context.Context, group, version string) (*metav1.APIResourceList, error) {
	list := &metav1.APIResourceList{}
	err := c.rest.Get().AbsPath("/apis", group, version).Do(ctx).Into(list)
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("listing %s/%s", group, version), err)
	}
	return list, nil
}

// listsPlaceholder reports whether list holds the library's placeholder.
func listsPlaceholder(list *metav1.APIResourceList, name string) bool {
	for _, r := range list.APIResources {
		if r.Name == name {
			return true
		}
	}
	return false
}

// customInfos reads "resource/metric" names, as the library lists them.
func customInfos(list *metav1.APIResourceList) []cmprovider.CustomMetricInfo {
	out := make([]cmprovider.CustomMetricInfo, 0, len(list.APIResources))
	for _, r := range list.APIResources {
		res, metric, ok := strings.Cut(r.Name, "/")
		if !ok || metric == "" || res == "" {
			continue
		}
		out = append(out, cmprovider.CustomMetricInfo{GroupResource: schema.ParseGroupResource(res), Namespaced: r.Namespaced, Metric: metric})
	}
	return out
}

func externalInfos(list *metav1.APIResourceList) []cmprovider.ExternalMetricInfo {
	out := make([]cmprovider.ExternalMetricInfo, 0, len(list.APIResources))
	for _, r := range list.APIResources {
		if r.Name != "" && r.Name != placeholderExternal && !strings.Contains(r.Name, "/") {
			out = append(out, cmprovider.ExternalMetricInfo{Metric: r.Name})
		}
	}
	return out
}

// customPath is the path of a custom metric request under the group
// version: one object (name) or every object matching a selector ("*").
func customPath(version string, info cmprovider.CustomMetricInfo, namespace, name string) string {
	base := "/apis/" + Custom.Group() + "/" + version
	if info.GroupResource == (schema.GroupResource{Resource: "namespaces"}) && name != "*" {
		// A metric describing a namespace, on the library's special route.
		return path.Join(base, "namespaces", name, "metrics", info.Metric)
	}
	if namespace != "" {
		base = path.Join(base, "namespaces", namespace)
	}
	return path.Join(base, info.GroupResource.String(), name, info.Metric)
}

// GetCustom asks for a custom metric: of one object when name is set, else
// of the objects matching selector. version is the one Discover found.
func (c *Client) GetCustom(ctx context.Context, version, namespace, name string, info cmprovider.CustomMetricInfo, selector, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	if name == "" {
		name = "*"
	}
	req := c.rest.Get().AbsPath(customPath(version, info, namespace, name))
	if name == "*" && selector != nil && !selector.Empty() {
		req = req.Param("labelSelector", selector.String())
	}
	if metricSelector != nil && !metricSelector.Empty() {
		req = req.Param("metricLabelSelector", metricSelector.String())
	}
	raw, err := body(req.Do(ctx))
	if err != nil {
		return nil, c.wrap("metric "+info.Metric, err)
	}
	obj, err := runtime.Decode(c.decoder, raw)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("downstream %s: decoding its answer for metric %s: %w", c.name, info.Metric, err))
	}
	switch o := obj.(type) {
	case *custom_metrics.MetricValueList:
		return o, nil
	case *custom_metrics.MetricValue:
		return &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{*o}}, nil
	}
	return nil, apierrors.NewInternalError(fmt.Errorf("downstream %s: answered %T for metric %s", c.name, obj, info.Metric))
}

// GetExternal asks for an external metric in namespace.
func (c *Client) GetExternal(ctx context.Context, namespace, metric string, metricSelector labels.Selector) (*external_metrics.ExternalMetricValueList, error) {
	req := c.rest.Get().AbsPath("/apis", External.Group(), "v1beta1", "namespaces", namespace, metric)
	if metricSelector != nil && !metricSelector.Empty() {
		req = req.Param("labelSelector", metricSelector.String())
	}
	raw, err := body(req.Do(ctx))
	if err != nil {
		return nil, c.wrap("external metric "+metric, err)
	}
	obj, err := runtime.Decode(c.extDec, raw)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("downstream %s: decoding its answer for external metric %s: %w", c.name, metric, err))
	}
	list, ok := obj.(*external_metrics.ExternalMetricValueList)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("downstream %s: answered %T for external metric %s", c.name, obj, metric))
	}
	return list, nil
}

// body is a result's body, or its error with the server's Status decoded.
func body(res rest.Result) ([]byte, error) {
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

// wrap turns a failed request into the API error the caller sees: the
// downstream's own status unchanged when it answered with one; 503 naming
// the downstream when it was not asked (known down, busy), did not answer
// in time, or could not be reached.
func (c *Client) wrap(what string, err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 && !isTransport(err) {
		return err
	}
	reason := err.Error()
	switch {
	case errors.Is(err, promclient.ErrBackendDown):
		reason = "it is known down (recent requests timed out or could not connect); asking it again at the next probe"
	case errors.Is(err, promclient.ErrBackendBusy):
		reason = "its maximum of requests in flight is reached"
	case errors.Is(err, context.DeadlineExceeded):
		reason = "it did not answer within its timeout"
	default:
		var uerr *url.Error
		if errors.As(err, &uerr) {
			reason = uerr.Err.Error()
		}
	}
	se := apierrors.NewServiceUnavailable(fmt.Sprintf("downstream metrics server %q could not serve %s: %s", c.name, what, reason))
	se.ErrStatus.Code = http.StatusServiceUnavailable
	return se
}

// isTransport reports whether err is a client-side failure that client-go
// dressed as a status (its "an error on the server" for unreadable
// answers carries a code of 0 or 500 with a transport cause).
func isTransport(err error) bool {
	var uerr *url.Error
	return errors.As(err, &uerr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// objectName is a request's object, for messages.
func objectName(n types.NamespacedName) string {
	if n.Namespace == "" {
		return n.Name
	}
	return n.String()
}
