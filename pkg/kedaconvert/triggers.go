package kedaconvert

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/promscaler/promscaler/pkg/config"
)

// triggers converts each trigger into a metric of the HPA.
func (c *converter) triggers() []autoscalingv2.MetricSpec {
	var metrics []autoscalingv2.MetricSpec
	for i, t := range c.so.Spec.Triggers {
		path := fmt.Sprintf("spec.triggers[%d]", i)
		var m *autoscalingv2.MetricSpec
		switch t.Type {
		case "prometheus":
			m = c.prometheus(path, i, t)
		case "cpu", "memory":
			m = c.resource(path, t)
		default:
			c.note(path+".type", "not converted: %q triggers have no promscaler equivalent (only prometheus, cpu and memory)", t.Type)
		}
		if m != nil {
			metrics = append(metrics, *m)
		}
	}
	return metrics
}

// prometheusKeys are the metadata keys of KEDA's prometheus scaler that
// the adapter's backends carry, adapter-wide, and what to set there.
var prometheusKeys = map[string]string{
	"namespace":       "the tenant header: set headers: {X-Scope-OrgID: ...} on the backend (--backends-config)",
	"customHeaders":   "set headers on the backend (--backends-config)",
	"authModes":       "set authorization, basic_auth or tls_config on the backend (--backends-config) or the --prometheus-* flags",
	"unsafeSsl":       "set tls_config.insecure_skip_verify on the backend (--backends-config)",
	"timeout":         "set timeout on the backend (--backends-config) or --prometheus-timeout",
	"queryParameters": "no equivalent: the adapter sends only the query, time and timeout",
	"metricName":      "deprecated in KEDA; the served metric is named after the ScaledObject and trigger",
}

// prometheus converts a prometheus trigger: an externalQueries entry and
// an External metric on it.
func (c *converter) prometheus(path string, i int, t Trigger) *autoscalingv2.MetricSpec {
	md := t.Metadata
	query := strings.TrimSpace(md["query"])
	if query == "" {
		c.note(path+".metadata.query", "required: trigger not converted")
		return nil
	}
	if err := config.CheckPromQL(query); err != nil {
		c.note(path+".metadata.query", "not converted: Prometheus would reject it: %v", err)
		return nil
	}
	if strings.Contains(query, "<<") || strings.Contains(query, ">>") {
		c.note(path+".metadata.query", "not converted: << and >> are the adapter's template delimiters")
		return nil
	}
	target, ok := c.target3(path, t.MetricType, md["threshold"], path+".metadata.threshold")
	if !ok {
		return nil
	}
	suffix := t.Name
	if suffix == "" {
		suffix = fmt.Sprintf("s%d-prometheus", i)
	}
	pt := promTrigger{name: t.Name, metric: c.metricName(suffix), query: query, ignoreNull: true}
	if v, ok := md["ignoreNullValues"]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			c.note(path+".metadata.ignoreNullValues", "not a boolean: taken as true (KEDA's default)")
		}
		pt.ignoreNull = err != nil || b
	}
	if v, ok := md["activationThreshold"]; ok {
		pt.activation = strings.TrimSpace(v)
	}
	pt.backend = c.backend(path, md["serverAddress"])
	q := config.ExternalQuery{Name: pt.metric, Query: query, Backend: pt.backend}
	if pt.ignoreNull {
		q.DefaultValue = ptr.To("0")
	}
	c.queries = append(c.queries, q)
	pt.spec = autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: pt.metric}, Target: target,
	}}
	c.external = append(c.external, pt)
	c.triggerFields(path, t)
	return &pt.spec
}

// triggerFields notes the trigger's fields that are not converted.
func (c *converter) triggerFields(path string, t Trigger) {
	for _, k := range sortedKeys(t.Metadata) {
		switch k {
		case "serverAddress", "query", "threshold", "activationThreshold", "ignoreNullValues":
		default:
			why, known := prometheusKeys[k]
			if !known {
				why = "unknown to KEDA's prometheus scaler"
			}
			c.note(path+".metadata."+k, "not converted: %s", why)
		}
	}
	if t.AuthenticationRef != nil {
		c.note(path+".authenticationRef", "not converted: TriggerAuthentication %s: credentials are the backend's (--backends-config or the --prometheus-* flags)", t.AuthenticationRef.Name)
	}
	if t.UseCachedMetrics {
		c.note(path+".useCachedMetrics", "not converted: set --prometheus-cache-ttl on the adapter (all queries)")
	}
}

// backend is the adapter backend for a serverAddress.
func (c *converter) backend(path, addr string) string {
	addr = strings.TrimSpace(addr)
	if name, ok := c.opts.Backends[addr]; ok {
		return name
	}
	if addr == "" {
		c.note(path+".metadata.serverAddress", "required by KEDA; the query goes to the adapter's default backend")
		return ""
	}
	if c.addresses[addr] {
		return ""
	}
	c.addresses[addr] = true
	c.note(path+".metadata.serverAddress", "%s: the query goes to the adapter's default backend (--prometheus-url); map it to a backend with --backend %s=NAME", addr, addr)
	return ""
}

// target3 is the HPA target for a KEDA threshold and metricType.
func (c *converter) target3(path, metricType, threshold, thresholdPath string) (autoscalingv2.MetricTarget, bool) {
	mt := autoscalingv2.MetricTargetType(metricType)
	if mt == "" {
		mt = defaultMetricType
	}
	q, err := quantity(threshold)
	switch {
	case mt != autoscalingv2.AverageValueMetricType && mt != autoscalingv2.ValueMetricType:
		c.note(path+".metricType", "not converted: %q: an external metric's target is AverageValue or Value", metricType)
		return autoscalingv2.MetricTarget{}, false
	case err != nil:
		c.note(thresholdPath, "not converted: %v", err)
		return autoscalingv2.MetricTarget{}, false
	case q.Sign() <= 0:
		c.note(thresholdPath, "not converted: must be above 0 (an HPA target)")
		return autoscalingv2.MetricTarget{}, false
	}
	if mt == autoscalingv2.ValueMetricType {
		return autoscalingv2.MetricTarget{Type: mt, Value: q}, true
	}
	return autoscalingv2.MetricTarget{Type: mt, AverageValue: q}, true
}

// resource converts a cpu or memory trigger into a Resource (or, with
// containerName, ContainerResource) metric.
func (c *converter) resource(path string, t Trigger) *autoscalingv2.MetricSpec {
	name := corev1.ResourceName(t.Type)
	v, ok := t.Metadata["value"]
	if !ok {
		c.note(path+".metadata.value", "required: trigger not converted")
		return nil
	}
	mt := autoscalingv2.MetricTargetType(t.MetricType)
	if mt == "" {
		// Older KEDA put it in metadata.type; Utilization when neither.
		mt = autoscalingv2.MetricTargetType(t.Metadata["type"])
	}
	if mt == "" {
		mt = autoscalingv2.UtilizationMetricType
	}
	var target autoscalingv2.MetricTarget
	switch mt {
	case autoscalingv2.UtilizationMetricType:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n <= 0 {
			c.note(path+".metadata.value", "not converted: a Utilization target is a whole percentage above 0")
			return nil
		}
		target = autoscalingv2.MetricTarget{Type: mt, AverageUtilization: ptr.To(int32(n))}
	case autoscalingv2.AverageValueMetricType:
		q, err := quantityOf(v)
		if err != nil {
			c.note(path+".metadata.value", "not converted: %v", err)
			return nil
		}
		target = autoscalingv2.MetricTarget{Type: mt, AverageValue: q}
	default:
		c.note(path+".metricType", "not converted: %q: a cpu or memory trigger needs Utilization or AverageValue", t.MetricType)
		return nil
	}
	for _, k := range sortedKeys(t.Metadata) {
		if k != "value" && k != "containerName" && k != "type" {
			c.note(path+".metadata."+k, "not converted: unknown to KEDA's %s scaler", t.Type)
		}
	}
	if cn := t.Metadata["containerName"]; cn != "" {
		return &autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType,
			ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: name, Container: cn, Target: target}}
	}
	return &autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: name, Target: target}}
}

// quantityOf parses a Kubernetes quantity ("512Mi", "250m").
func quantityOf(s string) (*resource.Quantity, error) {
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("not a quantity: %q", s)
	}
	if q.Sign() <= 0 {
		return nil, fmt.Errorf("must be above 0: %q", s)
	}
	return &q, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
