package autoscaler

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// The From* helpers turn what the metrics APIs returned (or the error the
// client got) into MetricValues, as upstream's REST metrics client does:
// the same milli-unit conversion, per-pod container sums, default window
// and error texts. They are pure; the caller does the fetching.

// defaultCustomMetricWindow is the window of a custom metric sample without
// windowSeconds.
const defaultCustomMetricWindow = time.Minute

// FromPodMetrics converts a metrics.k8s.io PodMetrics list for a Resource
// (container "") or ContainerResource metric. err is the List call's error.
// A pod missing the resource in any container (or, for a container metric,
// missing the container or the resource) gets no sample.
func FromPodMetrics(items []metricsapi.PodMetrics, err error, res v1.ResourceName, container string) MetricValues {
	if err != nil {
		return MetricValues{Err: fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)}
	}
	if len(items) == 0 {
		return MetricValues{Err: errors.New("no metrics returned from resource metrics API")}
	}
	out := make(map[string]PodMetric, len(items))
	for i := range items {
		m := &items[i]
		if container != "" {
			for _, c := range m.Containers {
				if c.Name != container {
					continue
				}
				if q, ok := c.Usage[res]; ok {
					out[m.Name] = PodMetric{Timestamp: m.Timestamp.Time, Window: m.Window.Duration, Value: q.MilliValue()}
				}
				break
			}
			continue
		}
		var sum int64
		missing := len(m.Containers) == 0
		for _, c := range m.Containers {
			q, ok := c.Usage[res]
			if !ok {
				missing = true
				break
			}
			sum += q.MilliValue()
		}
		if !missing {
			out[m.Name] = PodMetric{Timestamp: m.Timestamp.Time, Window: m.Window.Duration, Value: sum}
		}
	}
	return MetricValues{PerPod: out, Timestamp: items[0].Timestamp.Time}
}

// FromPodsCustomMetrics converts a custom.metrics.k8s.io list for pods (a
// Pods metric). err is the GetForObjects call's error.
func FromPodsCustomMetrics(items []customapi.MetricValue, err error) MetricValues {
	if err != nil {
		return MetricValues{Err: fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)}
	}
	if len(items) == 0 {
		return MetricValues{Err: errors.New("no metrics returned from custom metrics API")}
	}
	out := make(map[string]PodMetric, len(items))
	for i := range items {
		m := &items[i]
		window := defaultCustomMetricWindow
		if m.WindowSeconds != nil {
			window = time.Duration(*m.WindowSeconds) * time.Second
		}
		out[m.DescribedObject.Name] = PodMetric{Timestamp: m.Timestamp.Time, Window: window, Value: m.Value.MilliValue()}
	}
	return MetricValues{PerPod: out, Timestamp: items[0].Timestamp.Time}
}

// FromObjectCustomMetric converts the custom.metrics.k8s.io value of one
// object (an Object metric). err is the GetForObject call's error.
func FromObjectCustomMetric(value *customapi.MetricValue, err error) MetricValues {
	if err != nil {
		return MetricValues{Err: fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)}
	}
	if value == nil {
		return MetricValues{Err: errors.New("unable to fetch metrics from custom metrics API: no value returned")}
	}
	return MetricValues{Value: value.Value.MilliValue(), Timestamp: value.Timestamp.Time}
}

// FromExternalMetrics converts an external.metrics.k8s.io list (an
// External metric). err is the List call's error.
func FromExternalMetrics(items []externalapi.ExternalMetricValue, err error) MetricValues {
	if err != nil {
		return MetricValues{Err: fmt.Errorf("unable to fetch metrics from external metrics API: %w", err)}
	}
	if len(items) == 0 {
		return MetricValues{Err: errors.New("no metrics returned from external metrics API")}
	}
	series := make([]int64, 0, len(items))
	for i := range items {
		series = append(series, items[i].Value.MilliValue())
	}
	return MetricValues{Series: series, Timestamp: items[0].Timestamp.Time}
}
