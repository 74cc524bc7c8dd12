package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// recordingProvider records what customMetricsREST asks and answers with
// list (or one item of it by name), or err.
type recordingProvider struct {
	calls []string
	list  *custom_metrics.MetricValueList
	err   error
}

func (p *recordingProvider) GetMetricByName(_ context.Context, name types.NamespacedName, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	p.calls = append(p.calls, "name "+name.String()+" "+info.String()+" metric{"+metricSelector.String()+"}")
	if p.err != nil {
		return nil, p.err
	}
	return &p.list.Items[0], nil
}

func (p *recordingProvider) GetMetricBySelector(_ context.Context, namespace string, selector labels.Selector, info cmprovider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	p.calls = append(p.calls, "selector "+namespace+" {"+selector.String()+"} "+info.String()+" metric{"+metricSelector.String()+"}")
	return p.list, p.err
}

func (p *recordingProvider) ListAllMetrics() []cmprovider.CustomMetricInfo { return nil }

func TestCustomMetricsRESTList(t *testing.T) {
	two := &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{
		{DescribedObject: custom_metrics.ObjectReference{Name: "a"}},
		{DescribedObject: custom_metrics.ObjectReference{Name: "b"}},
	}}
	failure := errors.New("prometheus down")
	byName := func(n string) fields.Selector { return fields.OneTermEqualSelector("metadata.name", n) }
	tests := []struct {
		name      string
		namespace string
		info      *request.RequestInfo
		options   *metainternalversion.ListOptions
		metricSel string
		list      *custom_metrics.MetricValueList
		err       error
		wantCalls []string
		wantItems []string
		wantErr   func(error) bool
		wantMsg   string
	}{{
		name: "all pods matching a selector", namespace: "shop",
		info:      &request.RequestInfo{Resource: "pods", Subresource: "rps"},
		options:   &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"app": "cart"})},
		metricSel: "verb=GET",
		list:      two,
		wantCalls: []string{"selector shop {app=cart} pods/rps(namespaced) metric{verb=GET}"},
		wantItems: []string{"a", "b"},
	}, {
		name:      "cluster-scoped, no selectors",
		info:      &request.RequestInfo{Resource: "nodes", Subresource: "load"},
		list:      two,
		wantCalls: []string{"selector  {} nodes/load metric{}"},
		wantItems: []string{"a", "b"},
	}, {
		name: "one object by name, resource with a group", namespace: "default",
		info:      &request.RequestInfo{Resource: "deployments.apps", Subresource: "rps"},
		options:   &metainternalversion.ListOptions{FieldSelector: byName("web")},
		list:      two,
		wantCalls: []string{"name default/web deployments.apps/rps(namespaced) metric{}"},
		wantItems: []string{"a"},
	}, {
		name: "no list from the provider is an empty list", namespace: "shop",
		info:      &request.RequestInfo{Resource: "pods", Subresource: "rps"},
		wantCalls: []string{"selector shop {} pods/rps(namespaced) metric{}"},
		wantItems: []string{},
	}, {
		name: "provider error passes through", namespace: "shop",
		info:      &request.RequestInfo{Resource: "pods", Subresource: "rps"},
		options:   &metainternalversion.ListOptions{FieldSelector: byName("web")},
		err:       failure,
		wantCalls: []string{"name shop/web pods/rps(namespaced) metric{}"},
		wantErr:   func(err error) bool { return errors.Is(err, failure) },
	}, {
		name: "invalid metricLabelSelector is the client's error", namespace: "shop",
		info:      &request.RequestInfo{Resource: "pods", Subresource: "rps"},
		metricSel: "a===b",
		wantErr:   apierrors.IsBadRequest,
		wantMsg:   `invalid metricLabelSelector "a===b"`,
	}, {
		name:    "no request info",
		wantErr: func(err error) bool { return err != nil },
		wantMsg: "unable to get resource and metric name",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &recordingProvider{list: tt.list, err: tt.err}
			r := newCustomMetricsREST(p)
			ctx := request.WithNamespace(context.Background(), tt.namespace)
			if tt.info != nil {
				ctx = request.WithRequestInfo(ctx, tt.info)
			}
			obj, err := r.List(ctx, tt.options, &custom_metrics.MetricListOptions{MetricLabelSelector: tt.metricSel})
			if diff := cmp.Diff(tt.wantCalls, p.calls); diff != "" {
				t.Errorf("provider calls (-want +got):\n%s", diff)
			}
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("List error = %v, want one containing %q of the expected kind", err, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			got := []string{}
			for _, it := range obj.(*custom_metrics.MetricValueList).Items {
				got = append(got, it.DescribedObject.Name)
			}
			if diff := cmp.Diff(tt.wantItems, got); diff != "" {
				t.Errorf("items (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCustomMetricsRESTRejectsOtherOptions(t *testing.T) {
	r := newCustomMetricsREST(&recordingProvider{})
	ctx := request.WithRequestInfo(context.Background(), &request.RequestInfo{Resource: "pods", Subresource: "rps"})
	var notOptions runtime.Object = &custom_metrics.MetricValueList{}
	if _, err := r.List(ctx, nil, notOptions); err == nil {
		t.Fatal("List with a MetricValueList as options: no error")
	}
	// The library's storage methods are kept.
	if got, want := r.NewList(), (&custom_metrics.MetricValueList{}); !cmp.Equal(got, want) {
		t.Errorf("NewList = %#v", got)
	}
}
