package resourcemetrics

import (
	"errors"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/metrics/pkg/apis/metrics"
	"k8s.io/metrics/pkg/apis/metrics/install"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"
	generatedcore "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/core"
	generatedcustommetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/custommetrics"
	generatedexternalmetrics "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/externalmetrics"

	"github.com/promscaler/promscaler/pkg/resourcemetrics/openapi"
)

// Scheme holds the metrics.k8s.io types (internal and versioned) and the
// meta types the API needs. It is built once and must not be modified.
var Scheme = newScheme()

// Codecs serves the metrics.k8s.io API group.
var Codecs = serializer.NewCodecFactory(Scheme)

// GroupVersion is the group/version served.
var GroupVersion = v1beta1.SchemeGroupVersion

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	install.Install(s)
	utilruntime.Must(s.SetVersionPriority(v1beta1.SchemeGroupVersion))
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

// Config is what New needs; every field is required.
type Config struct {
	// Pods and Nodes say which pods and nodes exist (NewAdapter passes
	// the object cache's).
	Pods  PodLister
	Nodes NodeLister
	// PodMetrics and NodeMetrics fetch usage; pass a *Source.
	PodMetrics  PodMetricsGetter
	NodeMetrics NodeMetricsGetter
}

// API is the metrics.k8s.io v1beta1 API: the REST storage of podmetrics
// (resource "pods") and nodemetrics (resource "nodes").
type API struct {
	pods  *podStorage
	nodes *nodeStorage
}

// New returns the API.
func New(cfg Config) (*API, error) {
	var errs []error
	if cfg.Pods == nil {
		errs = append(errs, errors.New("resource metrics API: Pods is required"))
	}
	if cfg.Nodes == nil {
		errs = append(errs, errors.New("resource metrics API: Nodes is required"))
	}
	if cfg.PodMetrics == nil {
		errs = append(errs, errors.New("resource metrics API: PodMetrics is required"))
	}
	if cfg.NodeMetrics == nil {
		errs = append(errs, errors.New("resource metrics API: NodeMetrics is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &API{
		pods:  &podStorage{kindInfo: podKind, getter: cfg.PodMetrics, pods: cfg.Pods},
		nodes: &nodeStorage{kindInfo: nodeKind, getter: cfg.NodeMetrics, nodes: cfg.Nodes},
	}, nil
}

// APIGroupInfo returns the group's description for
// GenericAPIServer.InstallAPIGroup.
func (a *API) APIGroupInfo() *genericapiserver.APIGroupInfo {
	info := genericapiserver.NewDefaultAPIGroupInfo(metrics.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	info.PrioritizedVersions = []schema.GroupVersion{GroupVersion}
	info.VersionedResourcesStorageMap[GroupVersion.Version] = map[string]rest.Storage{
		"pods":  a.pods,
		"nodes": a.nodes,
	}
	return &info
}

// Install installs metrics.k8s.io on server. The server's OpenAPI
// configuration must know the group's types (see SetOpenAPIConfig), or
// installing fails.
func (a *API) Install(server *genericapiserver.GenericAPIServer) error {
	if err := server.InstallAPIGroup(a.APIGroupInfo()); err != nil {
		return fmt.Errorf("installing %s: %w", GroupVersion, err)
	}
	return nil
}

// OpenAPIDefinitions returns the OpenAPI models of the metrics.k8s.io
// v1beta1 types and of the meta types they use.
func OpenAPIDefinitions(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
	return openapi.GetOpenAPIDefinitions(ref)
}

// SetOpenAPIConfig sets base's OpenAPI (v2 and v3) configurations to what
// custom-metrics-apiserver would use by default (core, custom and external
// metrics models, title base.Name) plus the metrics.k8s.io models, so that
// API.Install can install the group on the server base builds. Call it
// before base.Config().
func SetOpenAPIConfig(base *basecmd.AdapterBase) {
	defs := mergeDefinitions(generatedcore.GetOpenAPIDefinitions, generatedcustommetrics.GetOpenAPIDefinitions,
		generatedexternalmetrics.GetOpenAPIDefinitions, OpenAPIDefinitions)
	namer := openapinamer.NewDefinitionNamer(cmapiserver.Scheme, Scheme)
	name := base.Name
	if name == "" {
		name = "custom-metrics-adapter"
	}
	v2 := genericapiserver.DefaultOpenAPIConfig(defs, namer)
	v2.Info.Title, v2.Info.Version = name, "1.0.0"
	v3 := genericapiserver.DefaultOpenAPIV3Config(defs, namer)
	v3.Info.Title, v3.Info.Version = name, "1.0.0"
	base.OpenAPIConfig, base.OpenAPIV3Config = v2, v3
}

func mergeDefinitions(getters ...openapicommon.GetOpenAPIDefinitions) openapicommon.GetOpenAPIDefinitions {
	return func(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
		out := make(map[string]openapicommon.OpenAPIDefinition)
		for _, g := range getters {
			maps.Copy(out, g(ref))
		}
		return out
	}
}
