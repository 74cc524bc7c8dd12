// Package hpaexplain explains, step by step, the decision the HPA
// controller would take now for a live HorizontalPodAutoscaler: it reads
// the HPA, its target's /scale, the target's pods and every metric through
// the API server exactly as the controller does (pkg/controller's GetScale
// and MetricsReader), runs the decision core (pkg/autoscaler) once, and
// reports each metric's pods, usage ratio, tolerance and proposal, then the
// normalization (stabilization, rate limits, min/max) and what the
// controller's in-memory history could still change.
package hpaexplain

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/scale"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/controller"
)

// errScaleRead is MetricsSkipped when the target's /scale could not be read.
const errScaleRead = "the target's /scale could not be read"

// HPAGetter reads one HPA.
type HPAGetter interface {
	Get(ctx context.Context, namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, error)
}

// PodLister lists the pods a selector matches in a namespace.
type PodLister interface {
	List(ctx context.Context, namespace string, selector labels.Selector) ([]*v1.Pod, error)
}

// Config is everything an Explainer reads through.
type Config struct {
	// Autoscaler is the decision core, built with the settings of the
	// controller being explained (tolerance, stabilization, gates).
	Autoscaler *autoscaler.Autoscaler
	// HPAs reads the HPA.
	HPAs HPAGetter
	// Pods lists the target's pods.
	Pods PodLister
	// Scales and Mapper read the target's /scale.
	Scales scale.ScalesGetter
	Mapper controller.RESTMapper
	// Metrics reads the metrics APIs.
	Metrics *controller.MetricsReader
	// Clock stamps the explanation; nil means the real clock. It should be
	// the clock the Autoscaler reads.
	Clock clock.PassiveClock
	// Timeout bounds each API request; zero means
	// controller.DefaultRequestTimeout.
	Timeout time.Duration
}

// Explainer explains HPA decisions.
type Explainer struct {
	cfg Config
}

// New returns an Explainer, or an error naming every missing dependency.
func New(cfg Config) (*Explainer, error) {
	var errs []error
	for _, dep := range []struct {
		name string
		nil  bool
	}{
		{"Autoscaler", cfg.Autoscaler == nil},
		{"HPAs", cfg.HPAs == nil},
		{"Pods", cfg.Pods == nil},
		{"Scales", cfg.Scales == nil},
		{"Mapper", cfg.Mapper == nil},
		{"Metrics", cfg.Metrics == nil},
	} {
		if dep.nil {
			errs = append(errs, fmt.Errorf("explain config: %s is required", dep.name))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = controller.DefaultRequestTimeout
	}
	return &Explainer{cfg: cfg}, nil
}

// Explain reads namespace/name and everything its reconcile reads, and
// explains the decision. An error means the HPA itself could not be read;
// failures the controller would report (the target's /scale, the metrics)
// are part of the explanation.
func (e *Explainer) Explain(ctx context.Context, namespace, name string) (*Explanation, error) {
	rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	hpa, err := e.cfg.HPAs.Get(rctx, namespace, name)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("reading HPA %s/%s: %w", namespace, name, err)
	}
	a := e.cfg.Autoscaler
	x := newExplanation(hpa, a, e.cfg.Clock.Now())

	sc, _, scaleErr, err := controller.GetScale(ctx, e.cfg.Scales, e.cfg.Mapper, e.cfg.Timeout, hpa)
	if err != nil {
		d := a.FailedGetScale(hpa, scaleErr)
		x.Error = err.Error()
		x.MetricsSkipped = errScaleRead
		x.fill(hpa, a, &d, nil)
		return x, nil
	}
	in := autoscaler.Input{
		HPA:            hpa,
		SpecReplicas:   sc.Spec.Replicas,
		StatusReplicas: sc.Status.Replicas,
		Selector:       sc.Status.Selector,
	}
	x.Target.SpecReplicas, x.Target.StatusReplicas, x.Target.Selector = in.SpecReplicas, in.StatusReplicas, in.Selector
	if a.NeedsMetrics(hpa, in.SpecReplicas) {
		if err := e.gather(ctx, hpa, &in); err != nil {
			return nil, err
		}
	}
	// No history: the controller's recommendations and scale events live
	// in its memory. An empty (not nil) history keeps Decide from
	// recording the current count as a first recommendation, which is
	// what the controller does only for an HPA it has never seen.
	state := &autoscaler.State{Recommendations: []autoscaler.Recommendation{}}
	d := a.Decide(state, in)
	if d.Rescale {
		// The status and events the controller writes once /scale is
		// updated, assuming the update succeeds.
		a.FinishRescale(state, &d, nil)
	}
	x.fill(hpa, a, &d, in.Pods)
	return x, nil
}

// gather lists the target's pods and reads the metrics, as the
// controller's reconcile does (the pods from the API instead of an
// informer cache).
func (e *Explainer) gather(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, in *autoscaler.Input) error {
	if in.Selector == "" {
		return nil // the core reports the missing selector
	}
	selector, err := labels.Parse(in.Selector)
	if err != nil {
		return nil // the core reports the invalid selector
	}
	rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	pods, err := e.cfg.Pods.List(rctx, hpa.Namespace, selector)
	cancel()
	if err != nil {
		return fmt.Errorf("listing pods of HPA %s/%s: %w", hpa.Namespace, hpa.Name, err)
	}
	in.Pods = pods
	in.Metrics = e.cfg.Metrics.Read(ctx, hpa.Namespace, selector, autoscaler.MetricSpecs(hpa))
	return nil
}

// HPAsFrom returns an HPAGetter reading through a clientset.
func HPAsFrom(cs kubernetes.Interface) HPAGetter { return clientHPAs{cs} }

// PodsFrom returns a PodLister listing through a clientset.
func PodsFrom(cs kubernetes.Interface) PodLister { return clientPods{cs} }

type clientHPAs struct{ cs kubernetes.Interface }

var _ HPAGetter = clientHPAs{}

func (c clientHPAs) Get(ctx context.Context, namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	return c.cs.AutoscalingV2().HorizontalPodAutoscalers(namespace).Get(ctx, name, metav1.GetOptions{})
}

type clientPods struct{ cs kubernetes.Interface }

var _ PodLister = clientPods{}

func (c clientPods) List(ctx context.Context, namespace string, selector labels.Selector) ([]*v1.Pod, error) {
	list, err := c.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}
