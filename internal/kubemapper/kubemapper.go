// Package kubemapper provides a built-in meta.RESTMapper of the standard
// Kubernetes resources, for the offline tools (check-config, explain) that
// run without a cluster.
package kubemapper

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is one resource known to the built-in mapper.
type Resource struct {
	// GroupVersion is the preferred version, e.g. "apps/v1" or "v1".
	GroupVersion schema.GroupVersion
	// Kind is the object kind, e.g. "Deployment".
	Kind string
	// Plural is the resource name, e.g. "deployments".
	Plural string
	// Singular is the singular resource name, e.g. "deployment".
	Singular string
	// Namespaced is true for namespace-scoped resources.
	Namespaced bool
}

// Resources lists the resources of the built-in mapper: the standard
// workload, networking, autoscaling, policy and storage resources, with one
// preferred version per group so that a group-resource resolves
// unambiguously. events.k8s.io is left out so that "events" means the core
// resource.
func Resources() []Resource {
	core := schema.GroupVersion{Version: "v1"}
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	batch := schema.GroupVersion{Group: "batch", Version: "v1"}
	networking := schema.GroupVersion{Group: "networking.k8s.io", Version: "v1"}
	autoscaling := schema.GroupVersion{Group: "autoscaling", Version: "v2"}
	policy := schema.GroupVersion{Group: "policy", Version: "v1"}
	discovery := schema.GroupVersion{Group: "discovery.k8s.io", Version: "v1"}
	storage := schema.GroupVersion{Group: "storage.k8s.io", Version: "v1"}
	coordination := schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}
	return []Resource{
		{core, "Pod", "pods", "pod", true},
		{core, "Service", "services", "service", true},
		{core, "Namespace", "namespaces", "namespace", false},
		{core, "Node", "nodes", "node", false},
		{core, "PersistentVolume", "persistentvolumes", "persistentvolume", false},
		{core, "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim", true},
		{core, "ConfigMap", "configmaps", "configmap", true},
		{core, "Secret", "secrets", "secret", true},
		{core, "Endpoints", "endpoints", "endpoints", true},
		{core, "ServiceAccount", "serviceaccounts", "serviceaccount", true},
		{core, "ReplicationController", "replicationcontrollers", "replicationcontroller", true},
		{core, "Event", "events", "event", true},
		{core, "ResourceQuota", "resourcequotas", "resourcequota", true},
		{core, "LimitRange", "limitranges", "limitrange", true},
		{apps, "Deployment", "deployments", "deployment", true},
		{apps, "StatefulSet", "statefulsets", "statefulset", true},
		{apps, "ReplicaSet", "replicasets", "replicaset", true},
		{apps, "DaemonSet", "daemonsets", "daemonset", true},
		{batch, "Job", "jobs", "job", true},
		{batch, "CronJob", "cronjobs", "cronjob", true},
		{networking, "Ingress", "ingresses", "ingress", true},
		{networking, "IngressClass", "ingressclasses", "ingressclass", false},
		{networking, "NetworkPolicy", "networkpolicies", "networkpolicy", true},
		{autoscaling, "HorizontalPodAutoscaler", "horizontalpodautoscalers", "horizontalpodautoscaler", true},
		{policy, "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget", true},
		{discovery, "EndpointSlice", "endpointslices", "endpointslice", true},
		{storage, "StorageClass", "storageclasses", "storageclass", false},
		{coordination, "Lease", "leases", "lease", true},
	}
}

// New returns a RESTMapper of Resources. Each call returns a new mapper;
// it is safe for concurrent reads.
func New() meta.RESTMapper {
	rs := Resources()
	seen := map[schema.GroupVersion]bool{}
	var gvs []schema.GroupVersion
	for _, r := range rs {
		if !seen[r.GroupVersion] {
			seen[r.GroupVersion] = true
			gvs = append(gvs, r.GroupVersion)
		}
	}
	m := meta.NewDefaultRESTMapper(gvs)
	for _, r := range rs {
		scope := meta.RESTScopeRoot
		if r.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		m.AddSpecific(r.GroupVersion.WithKind(r.Kind), r.GroupVersion.WithResource(r.Plural), r.GroupVersion.WithResource(r.Singular), scope)
	}
	return dedupMapper{m}
}

// dedupMapper removes the duplicates meta.DefaultRESTMapper reports for a
// resource whose singular equals its plural ("endpoints" matches both), which
// it would otherwise call ambiguous.
type dedupMapper struct {
	meta.RESTMapper
}

var _ meta.RESTMapper = dedupMapper{}

func (d dedupMapper) ResourcesFor(in schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	rs, err := d.RESTMapper.ResourcesFor(in)
	return dedup(rs), err
}

func (d dedupMapper) ResourceFor(in schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	rs, err := d.ResourcesFor(in)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	if len(rs) != 1 {
		return schema.GroupVersionResource{}, &meta.AmbiguousResourceError{PartialResource: in, MatchingResources: rs}
	}
	return rs[0], nil
}

func (d dedupMapper) KindsFor(in schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	ks, err := d.RESTMapper.KindsFor(in)
	return dedup(ks), err
}

func (d dedupMapper) KindFor(in schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	ks, err := d.KindsFor(in)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	if len(ks) != 1 {
		return schema.GroupVersionKind{}, &meta.AmbiguousResourceError{PartialResource: in, MatchingKinds: ks}
	}
	return ks[0], nil
}

func dedup[T comparable](in []T) []T {
	out := in[:0:0]
	for _, v := range in {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
