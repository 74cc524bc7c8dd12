package autoscaler

import (
	"errors"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metricInput is what one metric spec is evaluated against.
type metricInput struct {
	hpa            *autoscalingv2.HorizontalPodAutoscaler
	env            *calcEnv
	specReplicas   int32
	statusReplicas int32
	values         MetricValues
}

// evaluateMetric is upstream's computeReplicasForMetric plus the
// computeStatusFor* function of the spec's source type: the proposal, the
// metric status, and on failure the error, the ScalingActive=False
// condition and the event.
func evaluateMetric(in *metricInput, spec autoscalingv2.MetricSpec) (MetricResult, *Event) {
	res := MetricResult{Spec: spec}
	var (
		reason   string
		inner    error // the error the condition and event carry
		outerErr error // the error the reconcile reports
	)
	switch spec.Type {
	case autoscalingv2.ObjectMetricSourceType:
		reason = "FailedGetObjectMetric"
		inner, outerErr = evalObject(in, spec, &res)
		if outerErr != nil {
			outerErr = fmt.Errorf("failed to get object metric value: %w", outerErr)
		}
	case autoscalingv2.PodsMetricSourceType:
		reason = "FailedGetPodsMetric"
		inner = evalPods(in, spec, &res)
		if inner != nil {
			outerErr = fmt.Errorf("failed to get pods metric value: %w", inner)
		}
	case autoscalingv2.ResourceMetricSourceType:
		reason = "FailedGetResourceMetric"
		if spec.Resource == nil {
			inner = errors.New("invalid resource metric source: resource is not set")
			outerErr = inner
			break
		}
		inner = evalResource(in, spec.Resource.Target, spec.Resource.Name, "", spec.Type, &res)
		if inner != nil {
			outerErr = fmt.Errorf("failed to get %s resource metric value: %w", spec.Resource.Name, inner)
		} else {
			res.Status.Type = autoscalingv2.ResourceMetricSourceType
			res.Status.Resource = &autoscalingv2.ResourceMetricStatus{Name: spec.Resource.Name, Current: res.Status.ContainerResource.Current}
			res.Status.ContainerResource = nil
		}
	case autoscalingv2.ContainerResourceMetricSourceType:
		reason = "FailedGetContainerResourceMetric"
		if spec.ContainerResource == nil {
			inner = errors.New("invalid container resource metric source: containerResource is not set")
			outerErr = inner
			break
		}
		cr := spec.ContainerResource
		inner = evalResource(in, cr.Target, cr.Name, cr.Container, spec.Type, &res)
		if inner != nil {
			outerErr = fmt.Errorf("failed to get %s container metric value: %w", cr.Container, inner)
		} else {
			res.Status.Type = autoscalingv2.ContainerResourceMetricSourceType
		}
	case autoscalingv2.ExternalMetricSourceType:
		reason = "FailedGetExternalMetric"
		var name string
		if spec.External != nil {
			name = spec.External.Metric.Name
		}
		inner, outerErr = evalExternal(in, spec, &res)
		if outerErr != nil {
			outerErr = fmt.Errorf("failed to get %s external metric value: %w", name, outerErr)
		}
	default:
		reason = "InvalidMetricSourceType"
		inner = fmt.Errorf("unknown metric source type %q", string(spec.Type))
		outerErr = inner
	}
	if inner == nil {
		return res, nil
	}
	res.Status = autoscalingv2.MetricStatus{}
	res.Name = ""
	res.Replicas = 0
	res.Err = outerErr
	res.Condition = &autoscalingv2.HorizontalPodAutoscalerCondition{
		Type:    autoscalingv2.ScalingActive,
		Status:  v1.ConditionFalse,
		Reason:  reason,
		Message: fmt.Sprintf("the HPA was unable to compute the replica count: %v", inner),
	}
	return res, &Event{Type: v1.EventTypeWarning, Reason: reason, Message: inner.Error()}
}

// evalResource is computeStatusForResourceMetricGeneric. On success it
// leaves the value status in res.Status.ContainerResource.Current (with the
// container set) for the caller to place.
func evalResource(in *metricInput, target autoscalingv2.MetricTarget, name v1.ResourceName, container string, source autoscalingv2.MetricSourceType, res *MetricResult) error {
	fetchErr := func() error {
		if in.values.Err != nil {
			return fmt.Errorf("unable to get metrics for resource %s: %w", name, in.values.Err)
		}
		return nil
	}
	if target.AverageValue != nil {
		if err := fetchErr(); err != nil {
			return fmt.Errorf("failed to get %s usage: %w", name, err)
		}
		if target.AverageValue.MilliValue() <= 0 {
			return fmt.Errorf("failed to get %s usage: invalid target: averageValue must be positive", name)
		}
		r, err := in.env.plainReplicas(in.specReplicas, target.AverageValue.MilliValue(), name, in.values.PerPod)
		res.Pods = r.groups
		if err != nil {
			return fmt.Errorf("failed to get %s usage: %w", name, err)
		}
		q := buildQuantity(name, r.usage)
		res.Replicas, res.UsageRatio, res.AdjustedUsageRatio = r.replicas, r.ratio, r.adjRatio
		res.Name = fmt.Sprintf("%s resource", name.String())
		res.Status.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{
			Name: name, Container: container, Current: autoscalingv2.MetricValueStatus{AverageValue: &q},
		}
		return nil
	}
	if target.AverageUtilization == nil {
		return errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	if err := fetchErr(); err != nil {
		return fmt.Errorf("failed to get %s utilization: %w", name, err)
	}
	if *target.AverageUtilization <= 0 {
		return fmt.Errorf("failed to get %s utilization: invalid target: averageUtilization must be positive", name)
	}
	r, err := in.env.resourceUtilizationReplicas(in.specReplicas, *target.AverageUtilization, name, container, in.values.PerPod)
	res.Pods = r.groups
	if err != nil {
		return fmt.Errorf("failed to get %s utilization: %w", name, err)
	}
	res.Replicas, res.UsageRatio, res.AdjustedUsageRatio = r.replicas, r.ratio, r.adjRatio
	res.Name = fmt.Sprintf("%s resource utilization (percentage of request)", name)
	if source == autoscalingv2.ContainerResourceMetricSourceType {
		res.Name = fmt.Sprintf("%s container resource utilization (percentage of request)", name)
	}
	q := buildQuantity(name, r.usage)
	util := r.utilization
	res.Status.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{
		Name: name, Container: container,
		Current: autoscalingv2.MetricValueStatus{AverageUtilization: &util, AverageValue: &q},
	}
	return nil
}

// buildQuantity formats a milli-value as upstream does: binary for memory.
func buildQuantity(name v1.ResourceName, milli int64) resource.Quantity {
	format := resource.DecimalSI
	if name == v1.ResourceMemory {
		format = resource.BinarySI
	}
	return *resource.NewMilliQuantity(milli, format)
}

// evalPods is computeStatusForPodsMetric.
func evalPods(in *metricInput, spec autoscalingv2.MetricSpec, res *MetricResult) error {
	p := spec.Pods
	if p == nil {
		return errors.New("invalid pods metric source: pods is not set")
	}
	if _, err := metav1.LabelSelectorAsSelector(p.Metric.Selector); err != nil {
		return err
	}
	if p.Target.AverageValue == nil {
		return errors.New("invalid pods metric source: the average value target was not set")
	}
	target := p.Target.AverageValue.MilliValue()
	if in.values.Err != nil {
		return fmt.Errorf("unable to get metric %s: %w", p.Metric.Name, in.values.Err)
	}
	if target <= 0 {
		return errors.New("invalid pods metric source: averageValue must be positive")
	}
	r, err := in.env.plainReplicas(in.specReplicas, target, "", in.values.PerPod)
	res.Pods = r.groups
	if err != nil {
		return err
	}
	res.Replicas, res.UsageRatio, res.AdjustedUsageRatio = r.replicas, r.ratio, r.adjRatio
	res.Name = fmt.Sprintf("pods metric %s", p.Metric.Name)
	res.Status = autoscalingv2.MetricStatus{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: p.Metric.Name, Selector: p.Metric.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(r.usage, resource.DecimalSI)},
		},
	}
	return nil
}

// evalObject is computeStatusForObjectMetric. It returns the error for the
// condition and event, and the one computeReplicasForMetric wraps.
func evalObject(in *metricInput, spec autoscalingv2.MetricSpec, res *MetricResult) (inner, outer error) {
	o := spec.Object
	if o == nil {
		err := errors.New("invalid object metric source: object is not set")
		return err, err
	}
	if _, err := metav1.LabelSelectorAsSelector(o.Metric.Selector); err != nil {
		return err, err
	}
	fetchErr := func() error {
		if in.values.Err != nil {
			return fmt.Errorf("unable to get metric %s on %s %s/%s: %w", o.Metric.Name, o.DescribedObject.Kind, in.hpa.Namespace, o.DescribedObject.Name, in.values.Err)
		}
		return nil
	}
	status := autoscalingv2.MetricStatus{
		Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricStatus{
			DescribedObject: o.DescribedObject,
			Metric:          autoscalingv2.MetricIdentifier{Name: o.Metric.Name, Selector: o.Metric.Selector},
		},
	}
	usage := in.values.Value
	switch {
	case o.Target.Type == autoscalingv2.ValueMetricType && o.Target.Value != nil:
		if err := fetchErr(); err != nil {
			return err, err
		}
		target := o.Target.Value.MilliValue()
		if target <= 0 {
			err := errors.New("invalid object metric source: value must be positive")
			return err, err
		}
		ratio := float64(usage) / float64(target)
		replicas, err := in.env.usageRatioReplicas(in.specReplicas, ratio)
		if err != nil {
			return err, err
		}
		res.Replicas, res.UsageRatio = replicas, ratio
		status.Object.Current.Value = resource.NewMilliQuantity(usage, resource.DecimalSI)
		res.Name = fmt.Sprintf("%s metric %s", o.DescribedObject.Kind, o.Metric.Name)
	case o.Target.Type == autoscalingv2.AverageValueMetricType && o.Target.AverageValue != nil:
		if err := fetchErr(); err != nil {
			return err, fmt.Errorf("failed to get %s object metric: %w", o.Metric.Name, err)
		}
		target := o.Target.AverageValue.MilliValue()
		if target <= 0 {
			err := errors.New("invalid object metric source: averageValue must be positive")
			return err, err
		}
		replicas, perPod, ratio := in.env.perPodReplicas(in.statusReplicas, target, usage)
		res.Replicas, res.UsageRatio = replicas, ratio
		status.Object.Current.AverageValue = resource.NewMilliQuantity(perPod, resource.DecimalSI)
		res.Name = fmt.Sprintf("external metric %s(%+v)", o.Metric.Name, o.Metric.Selector)
	default:
		err := errors.New("invalid object metric source: neither a value target nor an average value target was set")
		return err, err
	}
	res.Status = status
	return nil, nil
}

// evalExternal is computeStatusForExternalMetric.
func evalExternal(in *metricInput, spec autoscalingv2.MetricSpec, res *MetricResult) (inner, outer error) {
	e := spec.External
	if e == nil {
		err := errors.New("invalid external metric source: external is not set")
		return err, err
	}
	fetch := func() error {
		if _, err := metav1.LabelSelectorAsSelector(e.Metric.Selector); err != nil {
			return err
		}
		if in.values.Err != nil {
			return fmt.Errorf("unable to get external metric %s/%s/%+v: %s", in.hpa.Namespace, e.Metric.Name, e.Metric.Selector, in.values.Err)
		}
		return nil
	}
	status := autoscalingv2.MetricStatus{
		Type: autoscalingv2.ExternalMetricSourceType,
		External: &autoscalingv2.ExternalMetricStatus{
			Metric: autoscalingv2.MetricIdentifier{Name: e.Metric.Name, Selector: e.Metric.Selector},
		},
	}
	name := fmt.Sprintf("external metric %s(%+v)", e.Metric.Name, e.Metric.Selector)
	switch {
	case e.Target.AverageValue != nil:
		if err := fetch(); err != nil {
			return err, fmt.Errorf("failed to get %s external metric: %w", e.Metric.Name, err)
		}
		target := e.Target.AverageValue.MilliValue()
		if target <= 0 {
			err := errors.New("invalid external metric source: averageValue must be positive")
			return err, err
		}
		usage := sumSeriesPerPod(in.values.Series)
		replicas, perPod, ratio := in.env.perPodReplicas(in.statusReplicas, target, usage)
		res.Replicas, res.UsageRatio = replicas, ratio
		status.External.Current.AverageValue = resource.NewMilliQuantity(perPod, resource.DecimalSI)
	case e.Target.Value != nil:
		if err := fetch(); err != nil {
			return err, fmt.Errorf("failed to get external metric %s: %w", e.Metric.Name, err)
		}
		target := e.Target.Value.MilliValue()
		if target <= 0 {
			err := errors.New("invalid external metric source: value must be positive")
			return err, err
		}
		usage := sumSeries(in.values.Series)
		ratio := float64(usage) / float64(target)
		replicas, err := in.env.usageRatioReplicas(in.specReplicas, ratio)
		if err != nil {
			return err, fmt.Errorf("failed to get external metric %s: %w", e.Metric.Name, err)
		}
		res.Replicas, res.UsageRatio = replicas, ratio
		status.External.Current.Value = resource.NewMilliQuantity(usage, resource.DecimalSI)
	default:
		err := errors.New("invalid external metric source: neither a value target nor an average value target was set")
		return err, err
	}
	res.Name = name
	res.Status = status
	return nil, nil
}
