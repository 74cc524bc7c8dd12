// Package framework runs a real local control plane for end-to-end tests,
// `make up` and `make demo`: etcd, kube-apiserver (aggregation layer, RBAC),
// Prometheus, the promscaler adapter registered through real APIService
// objects, and optionally kube-controller-manager with the upstream HPA
// controller. Everything listens on 127.0.0.1 with free ports, lives in one
// working directory, and stops when the environment closes.
//
// Binaries come from $PROMSCALER_TOOLS_DIR (hack/tools.sh) and
// $PROMSCALER_BIN_DIR (make build). Typical test use:
//
//	env := framework.New(t, framework.Config{})
//	prom := env.MustStartPrometheus(t, framework.PrometheusConfig{Targets: ...})
//	adapter := env.MustStartAdapter(t, framework.AdapterConfig{ConfigFile: f, PrometheusURL: prom.URL})
package framework
