package server

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapi "k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	cminstaller "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver/installer"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
	cmstorage "sigs.k8s.io/custom-metrics-apiserver/pkg/registry/custom_metrics"
	emstorage "sigs.k8s.io/custom-metrics-apiserver/pkg/registry/external_metrics"
)

// installMetricsAPIs installs custom.metrics.k8s.io (v1beta2 and v1beta1)
// and external.metrics.k8s.io (v1beta1) on s, as the library's
// InstallCustomMetricsAPI and InstallExternalMetricsAPI do (same handlers,
// REST storage, discovery and OpenAPI routes), except that the groups'
// serializer is wrapped by wrap: apiencode.NewNegotiatedSerializer writes
// the metric lists as JSON directly instead of through reflection, every
// other answer and media type being the library's. A nil wrap keeps the
// library's. This is the one seam of the list encoder.
func installMetricsAPIs(s *genericapiserver.GenericAPIServer, wrap func(runtime.NegotiatedSerializer) runtime.NegotiatedSerializer, custom cmprovider.CustomMetricsProvider, external cmprovider.ExternalMetricsProvider) error {
	if wrap == nil {
		wrap = func(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer { return ns }
	}
	info := metricsGroupInfo(custom_metrics.GroupName, runtime.NewParameterCodec(cmapiserver.Scheme), wrap)
	if err := installMetricsGroup(s, &info, info.PrioritizedVersions, cminstaller.MetricsAPIGroupVersion{
		DynamicStorage: cmstorage.NewREST(custom),
		ResourceLister: cmprovider.NewCustomMetricResourceLister(custom),
		Handlers:       &cminstaller.CMHandlers{},
	}); err != nil {
		return fmt.Errorf("installing custom.metrics.k8s.io: %w", err)
	}
	// As the library does: external.metrics.k8s.io in its preferred version only.
	info = metricsGroupInfo(external_metrics.GroupName, metav1.ParameterCodec, wrap)
	if err := installMetricsGroup(s, &info, info.PrioritizedVersions[:1], cminstaller.MetricsAPIGroupVersion{
		DynamicStorage: emstorage.NewREST(external),
		ResourceLister: cmprovider.NewExternalMetricResourceLister(external),
		Handlers:       &cminstaller.EMHandlers{},
	}); err != nil {
		return fmt.Errorf("installing external.metrics.k8s.io: %w", err)
	}
	return nil
}

// metricsGroupInfo is the library's API group info for group, with its
// serializer wrapped.
func metricsGroupInfo(group string, parameterCodec runtime.ParameterCodec, wrap func(runtime.NegotiatedSerializer) runtime.NegotiatedSerializer) genericapiserver.APIGroupInfo {
	info := genericapiserver.NewDefaultAPIGroupInfo(group, cmapiserver.Scheme, parameterCodec, cmapiserver.Codecs)
	info.NegotiatedSerializer = wrap(info.NegotiatedSerializer)
	return info
}

// installMetricsGroup installs api (its storage, lister and handlers) in
// versions (the preferred first) of a metrics group, and the group's
// discovery, which lists the preferred version only, as the library does.
func installMetricsGroup(s *genericapiserver.GenericAPIServer, info *genericapiserver.APIGroupInfo, versions []schema.GroupVersion, api cminstaller.MetricsAPIGroupVersion) error {
	container := s.Handler.GoRestfulContainer
	for _, gv := range versions {
		v := api
		v.APIGroupVersion = metricsAPIGroupVersion(info, gv)
		if err := v.InstallREST(container); err != nil {
			return err
		}
	}
	group := metricsAPIGroup(versions[0])
	s.DiscoveryGroupManager.AddGroup(group)
	container.Add(discovery.NewAPIGroupHandler(s.Serializer, group).WebService())
	return nil
}

func metricsAPIGroupVersion(info *genericapiserver.APIGroupInfo, gv schema.GroupVersion) *genericapi.APIGroupVersion {
	return &genericapi.APIGroupVersion{
		Root:             genericapiserver.APIGroupPrefix,
		GroupVersion:     gv,
		MetaGroupVersion: info.MetaGroupVersion,

		ParameterCodec:  info.ParameterCodec,
		Serializer:      info.NegotiatedSerializer,
		Creater:         info.Scheme,
		Convertor:       info.Scheme,
		UnsafeConvertor: runtime.UnsafeObjectConvertor(info.Scheme),
		Typer:           info.Scheme,
		Namer:           runtime.Namer(meta.NewAccessor()),
	}
}

func metricsAPIGroup(preferred schema.GroupVersion) metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: preferred.String(), Version: preferred.Version}
	return metav1.APIGroup{Name: preferred.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}
