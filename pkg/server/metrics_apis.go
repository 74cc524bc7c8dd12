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
	if err := installCustomMetricsAPI(s, wrap, custom); err != nil {
		return fmt.Errorf("installing custom.metrics.k8s.io: %w", err)
	}
	if err := installExternalMetricsAPI(s, wrap, external); err != nil {
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

func installCustomMetricsAPI(s *genericapiserver.GenericAPIServer, wrap func(runtime.NegotiatedSerializer) runtime.NegotiatedSerializer, p cmprovider.CustomMetricsProvider) error {
	info := metricsGroupInfo(custom_metrics.GroupName, runtime.NewParameterCodec(cmapiserver.Scheme), wrap)
	container := s.Handler.GoRestfulContainer
	for i, gv := range info.PrioritizedVersions {
		api := &cminstaller.MetricsAPIGroupVersion{
			DynamicStorage:  cmstorage.NewREST(p),
			APIGroupVersion: metricsAPIGroupVersion(&info, gv),
			ResourceLister:  cmprovider.NewCustomMetricResourceLister(p),
			Handlers:        &cminstaller.CMHandlers{},
		}
		if err := api.InstallREST(container); err != nil {
			return err
		}
		// As the library does: the group's discovery lists the preferred
		// version only.
		if i == 0 {
			group := metricsAPIGroup(gv)
			s.DiscoveryGroupManager.AddGroup(group)
			container.Add(discovery.NewAPIGroupHandler(s.Serializer, group).WebService())
		}
	}
	return nil
}

func installExternalMetricsAPI(s *genericapiserver.GenericAPIServer, wrap func(runtime.NegotiatedSerializer) runtime.NegotiatedSerializer, p cmprovider.ExternalMetricsProvider) error {
	info := metricsGroupInfo(external_metrics.GroupName, metav1.ParameterCodec, wrap)
	gv := info.PrioritizedVersions[0]
	api := &cminstaller.MetricsAPIGroupVersion{
		DynamicStorage:  emstorage.NewREST(p),
		APIGroupVersion: metricsAPIGroupVersion(&info, gv),
		ResourceLister:  cmprovider.NewExternalMetricResourceLister(p),
		Handlers:        &cminstaller.EMHandlers{},
	}
	container := s.Handler.GoRestfulContainer
	if err := api.InstallREST(container); err != nil {
		return err
	}
	group := metricsAPIGroup(gv)
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
