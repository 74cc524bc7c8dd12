package resourcemetrics

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/metrics/pkg/apis/metrics"

	"github.com/promscaler/promscaler/pkg/apistatus"
	"github.com/promscaler/promscaler/pkg/limits"
	"github.com/promscaler/promscaler/pkg/objectcache"
)

// PodMetricsGetter returns the metrics of pods; pods without complete
// metrics are left out of the result.
type PodMetricsGetter interface {
	GetPodMetrics(ctx context.Context, pods []*metav1.PartialObjectMetadata) ([]metrics.PodMetrics, error)
}

// NodeMetricsGetter returns the metrics of nodes; nodes without complete
// metrics are left out of the result.
type NodeMetricsGetter interface {
	GetNodeMetrics(ctx context.Context, nodes []*metav1.PartialObjectMetadata) ([]metrics.NodeMetrics, error)
}

// The group-resources served, as they appear in API errors.
var (
	podMetricsResource  = metrics.Resource("podmetrics")
	nodeMetricsResource = metrics.Resource("nodemetrics")
)

// kindInfo implements the methods of rest.Storage, rest.KindProvider,
// rest.Scoper, rest.SingularNameProvider and rest.Lister's NewList, which
// say what a storage serves.
type kindInfo struct {
	kind            string
	namespaced      bool
	newObj, newList func() runtime.Object
}

// New implements rest.Storage.
func (k kindInfo) New() runtime.Object { return k.newObj() }

// Destroy implements rest.Storage.
func (kindInfo) Destroy() {}

// Kind implements rest.KindProvider.
func (k kindInfo) Kind() string { return k.kind }

// NamespaceScoped implements rest.Scoper.
func (k kindInfo) NamespaceScoped() bool { return k.namespaced }

// GetSingularName implements rest.SingularNameProvider.
func (kindInfo) GetSingularName() string { return "" }

// NewList implements rest.Lister.
func (k kindInfo) NewList() runtime.Object { return k.newList() }

var podKind = kindInfo{
	kind: "PodMetrics", namespaced: true,
	newObj:  func() runtime.Object { return &metrics.PodMetrics{} },
	newList: func() runtime.Object { return &metrics.PodMetricsList{} },
}

var nodeKind = kindInfo{
	kind:    "NodeMetrics",
	newObj:  func() runtime.Object { return &metrics.NodeMetrics{} },
	newList: func() runtime.Object { return &metrics.NodeMetricsList{} },
}

// podStorage is the REST storage of podmetrics.
type podStorage struct {
	kindInfo
	getter PodMetricsGetter
	pods   PodLister
}

// nodeStorage is the REST storage of nodemetrics.
type nodeStorage struct {
	kindInfo
	getter NodeMetricsGetter
	nodes  NodeLister
}

var (
	_ rest.Storage              = (*podStorage)(nil)
	_ rest.KindProvider         = (*podStorage)(nil)
	_ rest.Scoper               = (*podStorage)(nil)
	_ rest.Getter               = (*podStorage)(nil)
	_ rest.Lister               = (*podStorage)(nil)
	_ rest.TableConvertor       = (*podStorage)(nil)
	_ rest.SingularNameProvider = (*podStorage)(nil)
	_ rest.Getter               = (*nodeStorage)(nil)
	_ rest.Lister               = (*nodeStorage)(nil)
	_ rest.TableConvertor       = (*nodeStorage)(nil)
)

// List implements rest.Lister: the Running pods of the request namespace
// (all namespaces when none) matching the label and field selectors.
func (s *podStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	if err := checkLimits(opts); err != nil {
		return nil, err
	}
	ns := genericapirequest.NamespaceValue(ctx)
	pods, err := s.pods.ListPods(ctx, ns, labelSelector(opts))
	if err != nil {
		return nil, apiError(ctx, "listing pods", err)
	}
	if fs := fieldSelector(opts); fs != nil {
		pods = filterFields(pods, fs, true)
	}
	items, err := s.getter.GetPodMetrics(ctx, pods)
	if err != nil {
		return nil, apiError(ctx, "reading pod metrics", err)
	}
	return &metrics.PodMetricsList{Items: items}, nil
}

// Get implements rest.Getter.
func (s *podStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	pod, err := s.pods.GetPod(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(podMetricsResource, name)
	}
	if err != nil {
		return nil, apiError(ctx, fmt.Sprintf("getting pod %s/%s", ns, name), err)
	}
	items, err := s.getter.GetPodMetrics(ctx, []*metav1.PartialObjectMetadata{pod})
	if err != nil {
		return nil, apiError(ctx, fmt.Sprintf("reading metrics of pod %s/%s", ns, name), err)
	}
	if len(items) == 0 {
		return nil, apierrors.NewNotFound(podMetricsResource, name)
	}
	return &items[0], nil
}

// ConvertToTable implements rest.TableConvertor.
func (s *podStorage) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	switch t := obj.(type) {
	case *metrics.PodMetrics:
		return table(t.ResourceVersion, "", []metrics.PodMetrics{*t}, podRow), nil
	case *metrics.PodMetricsList:
		return table(t.ResourceVersion, t.Continue, t.Items, podRow), nil
	}
	return nil, fmt.Errorf("cannot convert a %T to a table of pod metrics", obj)
}

// List implements rest.Lister: the nodes matching the label and field
// selectors.
func (s *nodeStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	if err := checkLimits(opts); err != nil {
		return nil, err
	}
	nodes, err := s.nodes.ListNodes(ctx, labelSelector(opts))
	if err != nil {
		return nil, apiError(ctx, "listing nodes", err)
	}
	if fs := fieldSelector(opts); fs != nil {
		nodes = filterFields(nodes, fs, false)
	}
	items, err := s.getter.GetNodeMetrics(ctx, nodes)
	if err != nil {
		return nil, apiError(ctx, "reading node metrics", err)
	}
	return &metrics.NodeMetricsList{Items: items}, nil
}

// Get implements rest.Getter.
func (s *nodeStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	node, err := s.nodes.GetNode(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(nodeMetricsResource, name)
	}
	if err != nil {
		return nil, apiError(ctx, fmt.Sprintf("getting node %s", name), err)
	}
	items, err := s.getter.GetNodeMetrics(ctx, []*metav1.PartialObjectMetadata{node})
	if err != nil {
		return nil, apiError(ctx, fmt.Sprintf("reading metrics of node %s", name), err)
	}
	if len(items) == 0 {
		return nil, apierrors.NewNotFound(nodeMetricsResource, name)
	}
	return &items[0], nil
}

// ConvertToTable implements rest.TableConvertor.
func (s *nodeStorage) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	switch t := obj.(type) {
	case *metrics.NodeMetrics:
		return table(t.ResourceVersion, "", []metrics.NodeMetrics{*t}, nodeRow), nil
	case *metrics.NodeMetricsList:
		return table(t.ResourceVersion, t.Continue, t.Items, nodeRow), nil
	}
	return nil, fmt.Errorf("cannot convert a %T to a table of node metrics", obj)
}

// checkLimits answers 400 naming the limit when a list's selectors are over
// the request limits of every metrics API (pkg/limits).
func checkLimits(opts *metainternalversion.ListOptions) error {
	if err := limits.CheckSelector("labelSelector", labelSelector(opts)); err != nil {
		return err
	}
	return limits.CheckFieldSelector("fieldSelector", fieldSelector(opts))
}

func labelSelector(opts *metainternalversion.ListOptions) labels.Selector {
	if opts == nil || opts.LabelSelector == nil {
		return labels.Everything()
	}
	return opts.LabelSelector
}

func fieldSelector(opts *metainternalversion.ListOptions) fields.Selector {
	if opts == nil || opts.FieldSelector == nil || opts.FieldSelector.Empty() {
		return nil
	}
	return opts.FieldSelector
}

// filterFields keeps the objects matching a field selector over the fields
// the API defines for these kinds: metadata.name and, for namespaced kinds,
// metadata.namespace. (The API server rejects any other field before the
// request gets here.)
func filterFields(objs []*metav1.PartialObjectMetadata, sel fields.Selector, namespaced bool) []*metav1.PartialObjectMetadata {
	out := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	set := make(fields.Set, 2)
	for _, o := range objs {
		clear(set)
		if !sel.Matches(generic.AddObjectMetaFieldsSet(set, &o.ObjectMeta, namespaced)) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// apiError turns a failure into the API error the client sees (see
// apistatus.FromError): 503 when Prometheus or the caches could not
// answer, 500 when Prometheus rejected a configured query, a quiet status
// when the client went away. what names the request; err goes to the log.
func apiError(ctx context.Context, what string, err error) error {
	var qe *QueryError
	if errors.As(err, &qe) {
		what += " (" + qe.Path + ")"
	}
	switch {
	case errors.Is(err, ErrNotConfigured):
		return apierrors.NewServiceUnavailable("metrics.k8s.io is not configured: " + err.Error())
	case errors.Is(err, objectcache.ErrNotRunning), errors.Is(err, objectcache.ErrNotSynced):
		return apistatus.Unavailable(ctx, what, err)
	}
	return apistatus.FromError(ctx, what, err)
}
