package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

// Mode is what the controller does with the HPAs it owns.
type Mode string

const (
	// ModeCoexist runs beside kube-controller-manager's HPA controller: it
	// only acts on HPAs carrying the promscaler.io annotations of
	// pkg/scaletozero (scale to zero and back, fallback replicas), writing
	// their target's /scale at those moments and their status annotation;
	// kube-controller-manager does the rest. The default.
	ModeCoexist Mode = "coexist"
	// ModeFull is the whole HPA controller, for clusters without
	// kube-controller-manager's.
	ModeFull Mode = "full"
)

// Event reasons of the coexistence mode (besides the scaletozero actions).
const (
	reasonInvalidAnnotation = "InvalidAnnotation"
	reasonUnknownAnnotation = "UnknownAnnotation"
)

// reconcileCoexist is one period of an HPA in ModeCoexist. HPAs without
// the annotations are neither read nor written.
func (c *Controller) reconcileCoexist(ctx context.Context, e *hpaEntry, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if !scaletozero.Annotated(hpa.Annotations) {
		e.zero = scaletozero.State{}
		return c.retireStatus(ctx, e, hpa)
	}
	logger := klog.FromContext(ctx).WithValues("hpa", klog.KObj(hpa))
	prev := previousStatus(hpa)
	warnings := scaletozero.Messages(scaletozero.Unknown(hpa.Annotations))
	if !slices.Equal(warnings, prev.Warnings) && len(warnings) > 0 {
		c.tel.CoexistActions.WithLabelValues(reasonUnknownAnnotation).Inc()
		c.record(hpa, []autoscaler.Event{{Type: v1.EventTypeWarning, Reason: reasonUnknownAnnotation, Message: strings.Join(warnings, "; ")}})
	}
	spec, problems := scaletozero.Parse(hpa)
	if len(problems) > 0 {
		st := prev
		st.Warnings, st.Pause = warnings, ""
		st.State, st.Valid = scaletozero.StateInvalid, scaletozero.ValidCondition(problems)
		if st.Valid != prev.Valid {
			c.tel.CoexistActions.WithLabelValues(reasonInvalidAnnotation).Inc()
			c.record(hpa, []autoscaler.Event{{Type: v1.EventTypeWarning, Reason: reasonInvalidAnnotation, Message: st.Valid.Message}})
		}
		logger.V(4).Info("Invalid promscaler annotations", "problems", st.Valid.Message)
		return c.writeStatusAnnotation(ctx, e, hpa, prev, st)
	}

	sc, gr, _, err := c.getScale(ctx, hpa)
	if err != nil {
		return err // kube-controller-manager reports FailedGetScale too
	}
	in := scaletozero.Input{
		Now:         c.clock.Now(),
		Replicas:    sc.Spec.Replicas,
		MinReplicas: 1,
		MaxReplicas: hpa.Spec.MaxReplicas,
	}
	if hpa.Spec.MinReplicas != nil {
		in.MinReplicas = *hpa.Spec.MinReplicas
	}
	c.readCoexistMetrics(ctx, hpa, sc, &spec, &in)
	d := scaletozero.Decide(spec, e.zero, in)

	st := scaletozero.Status{State: scaletozero.ReportedState(d.State.Phase), Valid: scaletozero.ValidCondition(nil),
		LastAction: prev.LastAction, LastActionTime: prev.LastActionTime, Reason: prev.Reason,
		Pause: spec.Pause.String(), Warnings: warnings}
	if d.Scale != nil {
		if err := c.setScale(ctx, hpa.Namespace, gr, sc, *d.Scale); err != nil {
			// The state is kept as it was: the next period decides again
			// from what /scale then says.
			c.tel.ScaleOperations.WithLabelValues(direction(sc.Spec.Replicas, *d.Scale), ResultError).Inc()
			return fmt.Errorf("%s of %s/%s to %d replicas: %w", d.Action, hpa.Namespace, hpa.Name, *d.Scale, err)
		}
		c.tel.ScaleOperations.WithLabelValues(direction(sc.Spec.Replicas, *d.Scale), ResultSuccess).Inc()
		logger.Info("Rescaled beside kube-controller-manager", "action", d.Action, "from", sc.Spec.Replicas, "to", *d.Scale, "reason", d.Reason)
	}
	e.zero = d.State
	if d.Action != scaletozero.ActionNone {
		c.tel.CoexistActions.WithLabelValues(string(d.Action)).Inc()
		typ := v1.EventTypeNormal
		if d.Action == scaletozero.ActionFallback {
			typ = v1.EventTypeWarning
		}
		c.record(hpa, []autoscaler.Event{{Type: typ, Reason: string(d.Action), Message: d.Reason}})
		st.LastAction, st.LastActionTime, st.Reason = d.Action, in.Now.UTC().Format(time.RFC3339), d.Reason
	}
	logger.V(4).Info("Coexistence decision", "replicas", in.Replicas, "phase", d.State.Phase, "failures", d.State.Failures, "reason", d.Reason)
	return c.writeStatusAnnotation(ctx, e, hpa, prev, st)
}

// retireStatus ends the status annotation of an HPA that carried
// promscaler.io annotations and no longer does: its state becomes Off (a
// lifted pause is reported as PauseEnded). An HPA without the status
// annotation is not written.
func (c *Controller) retireStatus(ctx context.Context, e *hpaEntry, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if _, ok := hpa.Annotations[scaletozero.AnnotationStatus]; !ok {
		return nil
	}
	prev := previousStatus(hpa)
	if prev.State == scaletozero.StateOff {
		return nil
	}
	st := scaletozero.Status{State: scaletozero.StateOff, Valid: scaletozero.ValidCondition(nil),
		LastAction: prev.LastAction, LastActionTime: prev.LastActionTime, Reason: prev.Reason}
	if prev.State == string(scaletozero.PhasePaused) {
		reason := "the pause annotations are gone: kube-controller-manager scales the HPA again"
		c.tel.CoexistActions.WithLabelValues(string(scaletozero.ActionUnpause)).Inc()
		c.record(hpa, []autoscaler.Event{{Type: v1.EventTypeNormal, Reason: string(scaletozero.ActionUnpause), Message: reason}})
		st.LastAction, st.LastActionTime, st.Reason = scaletozero.ActionUnpause, c.clock.Now().UTC().Format(time.RFC3339), reason
	}
	return c.writeStatusAnnotation(ctx, e, hpa, prev, st)
}

// readCoexistMetrics fills the activation value and whether every metric
// read failed. The HPA's own metrics are read only with a fallback (to
// tell an outage); at zero replicas its Pods, Resource and
// ContainerResource metrics cannot exist and are not read.
func (c *Controller) readCoexistMetrics(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, sc *autoscalingv1.Scale, spec *scaletozero.Spec, in *scaletozero.Input) {
	selector := labels.Nothing()
	if sc.Status.Selector != "" {
		if s, err := labels.Parse(sc.Status.Selector); err == nil {
			selector = s
		}
	}
	f := fetcher{r: c.metrics, ctx: ctx, namespace: hpa.Namespace, selector: selector}
	scaletozero.ReadMetrics(hpa, *spec, sc.Status.Selector != "", in, func(_ int, m *autoscalingv2.MetricSpec) autoscaler.MetricValues {
		return f.fetch(m)
	})
}

func direction(from, to int32) string {
	if to < from {
		return "down"
	}
	return "up"
}

// setScale writes replicas to the target's /scale once, with the
// resourceVersion it was read at: if kube-controller-manager (or anyone)
// changed it since, the write fails with a conflict and the next period
// decides again. Unlike updateScale it never retries on a re-read value.
func (c *Controller) setScale(ctx context.Context, namespace string, gr schema.GroupResource, sc *autoscalingv1.Scale, replicas int32) error {
	wctx, cancel, err := c.writeContext(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	up := sc.DeepCopy()
	up.Spec.Replicas = replicas
	_, err = c.cfg.Scales.Scales(namespace).Update(wctx, gr, up, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("the target changed since it was read, deciding again next period: %w", err)
	}
	return err
}

// previousStatus is the status annotation the HPA carries (zero if none or
// unreadable).
func previousStatus(hpa *autoscalingv2.HorizontalPodAutoscaler) scaletozero.Status {
	var st scaletozero.Status
	if v, ok := hpa.Annotations[scaletozero.AnnotationStatus]; ok {
		_ = json.Unmarshal([]byte(v), &st) // a mangled annotation is rewritten
	}
	return st
}

// writeStatusAnnotation patches the status annotation when it changed.
func (c *Controller) writeStatusAnnotation(ctx context.Context, e *hpaEntry, hpa *autoscalingv2.HorizontalPodAutoscaler, prev, st scaletozero.Status) error {
	updated, err := c.patchAnnotation(ctx, hpa, scaletozero.AnnotationStatus, "the status annotation", st, c.tel.StatusUpdates)
	if updated != nil {
		c.wrote(e, updated)
		klog.FromContext(ctx).V(2).Info("Updated the status annotation", "hpa", klog.KObj(hpa), "state", st.State, "previous", prev.State)
	}
	return err
}
