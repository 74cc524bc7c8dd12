// Package kubefake holds the fakes of the Kubernetes APIs the HPA
// controller's unit tests read through, beyond client-go's clientset: a
// /scale client over a set of Deployment scales, a REST mapper knowing
// apps/v1 Deployments, and a metrics.k8s.io client answering PodMetrics
// lists by label selector.
package kubefake

import (
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
)

// Mapper maps apps/v1 Deployment, the tests' scale target, to its resource.
func Mapper() *meta.DefaultRESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{appsv1.SchemeGroupVersion})
	m.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)
	return m
}

// DeploymentScale is the /scale of Deployment namespace/name with replicas
// in spec and status.
func DeploymentScale(namespace, name string, replicas int32, selector string) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, ResourceVersion: "1"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
		Status:     autoscalingv1.ScaleStatus{Replicas: replicas, Selector: selector},
	}
}

// Scales is a /scale client of Deployments: Get answers the scale stored
// for namespace/name (not found when there is none), Update stores it.
// Reactors prepended to the embedded fake take precedence.
type Scales struct {
	*scalefake.FakeScaleClient
	mu     sync.Mutex
	scales map[string]*autoscalingv1.Scale
}

// NewScales returns a Scales holding scales.
func NewScales(scales ...*autoscalingv1.Scale) *Scales {
	s := &Scales{FakeScaleClient: &scalefake.FakeScaleClient{}, scales: map[string]*autoscalingv1.Scale{}}
	for _, sc := range scales {
		s.Set(sc)
	}
	s.AddReactor("get", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		name := a.(core.GetAction).GetName()
		if sc := s.Get(a.GetNamespace(), name); sc != nil {
			return true, sc, nil
		}
		return true, nil, fmt.Errorf("deployments.apps %q not found", name)
	})
	s.AddReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		sc := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale)
		s.Set(sc)
		return true, sc, nil
	})
	return s
}

// Set stores a copy of sc under its namespace and name.
func (s *Scales) Set(sc *autoscalingv1.Scale) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scales[sc.Namespace+"/"+sc.Name] = sc.DeepCopy()
}

// Get returns a copy of the scale stored for namespace/name, nil if none.
func (s *Scales) Get(namespace, name string) *autoscalingv1.Scale {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scales[namespace+"/"+name].DeepCopy()
}

// PodMetrics returns a metrics.k8s.io client whose PodMetrics lists answer
// the items of pms in the namespace the selector matches. (The fake's
// tracker files PodMetrics under "podmetricses" while the client lists
// "pods", so the list is answered here.)
func PodMetrics(pms []metricsapi.PodMetrics) *metricsfake.Clientset {
	c := metricsfake.NewSimpleClientset()
	c.PrependReactor("list", "pods", func(a core.Action) (bool, runtime.Object, error) {
		sel := a.(core.ListAction).GetListRestrictions().Labels
		list := &metricsapi.PodMetricsList{}
		for _, pm := range pms {
			if pm.Namespace == a.GetNamespace() && sel.Matches(labels.Set(pm.Labels)) {
				list.Items = append(list.Items, *pm.DeepCopy())
			}
		}
		return true, list, nil
	})
	return c
}
