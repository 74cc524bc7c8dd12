package kedaconvert

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

// Options tune a conversion.
type Options struct {
	// Backends maps a prometheus trigger's serverAddress to the name of an
	// adapter backend (--backends-config); an address not listed is left
	// to the default backend (--prometheus-url), with a Note.
	Backends map[string]string
}

// Result is what a conversion produces.
type Result struct {
	// Queries are the adapter's externalQueries entries.
	Queries []config.ExternalQuery
	// HPAs are the HorizontalPodAutoscalers, one per ScaledObject.
	HPAs []*autoscalingv2.HorizontalPodAutoscaler
	// Notes list, field by field, what was not converted and why.
	Notes []Note
}

// Note is one field not converted (or converted with a caveat).
type Note struct {
	// Place is FILE:LINE of the field.
	Place string
	// Field is the field's path in the ScaledObject.
	Field string
	// Reason says why, and what to do instead.
	Reason string
	line   int
}

func (n Note) String() string { return n.Place + ": " + n.Field + ": " + n.Reason }

// Convert converts each ScaledObject of docs.
func Convert(docs []Document, opts Options) Result {
	var r Result
	seen := map[string]bool{}
	for _, d := range docs {
		c := converter{doc: d, opts: opts, so: &d.Object, addresses: seen}
		if hpa := c.convert(); hpa != nil {
			r.HPAs = append(r.HPAs, hpa)
		}
		r.Queries = append(r.Queries, c.queries...)
		slices.SortStableFunc(c.notes, func(a, b Note) int { return a.line - b.line })
		r.Notes = append(r.Notes, c.notes...)
	}
	return r
}

// converter converts one ScaledObject.
type converter struct {
	doc     Document
	opts    Options
	so      *ScaledObject
	queries []config.ExternalQuery
	notes   []Note
	// external are the converted prometheus triggers, in order.
	external []promTrigger
	// addresses are the serverAddresses already noted, for the run.
	addresses map[string]bool
}

// promTrigger is one converted prometheus trigger.
type promTrigger struct {
	name       string // the trigger's name (for scalingModifiers)
	metric     string // the external metric served
	query      string
	ignoreNull bool
	activation string // activationThreshold, "" for none
	backend    string
	spec       autoscalingv2.MetricSpec
}

func (c *converter) note(field, format string, args ...any) {
	line := c.doc.line(field)
	c.notes = append(c.notes, Note{Place: fmt.Sprintf("%s:%d", c.doc.File, line), Field: field, Reason: fmt.Sprintf(format, args...), line: line})
}

// convert builds the HPA, or returns nil when the ScaledObject cannot be.
func (c *converter) convert() *autoscalingv2.HorizontalPodAutoscaler {
	s := &c.so.Spec
	if s.ScaleTargetRef == nil || s.ScaleTargetRef.Name == "" {
		c.note("spec.scaleTargetRef.name", "required: ScaledObject %s not converted", c.so.Name)
		return nil
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: c.so.Name, Namespace: c.so.Namespace, Labels: c.so.Labels},
	}
	hpa.Spec.ScaleTargetRef = c.target()
	minR, maxR, toZero := c.replicas()
	hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas = &minR, maxR
	ann := c.annotations()
	metrics := c.triggers()
	if m := s.Advanced.modifiers(); m != nil {
		metrics = c.composite(m, metrics)
	}
	if len(metrics) == 0 {
		c.note("spec.triggers", "no trigger could be converted: ScaledObject %s not converted", c.so.Name)
		return nil
	}
	hpa.Spec.Metrics = metrics
	if toZero {
		c.activation(ann)
	} else {
		c.noActivation()
	}
	c.fallback(ann, minR, maxR)
	c.advanced(hpa)
	c.ignored()
	if len(ann) > 0 {
		hpa.Annotations = ann
	}
	c.check(hpa)
	return hpa
}

func (c *converter) target() autoscalingv2.CrossVersionObjectReference {
	t := c.so.Spec.ScaleTargetRef
	ref := autoscalingv2.CrossVersionObjectReference{APIVersion: t.APIVersion, Kind: t.Kind, Name: t.Name}
	if ref.APIVersion == "" {
		ref.APIVersion = "apps/v1"
	}
	if ref.Kind == "" {
		ref.Kind = "Deployment"
	}
	if t.EnvSourceContainerName != "" {
		c.note("spec.scaleTargetRef.envSourceContainerName", "not converted: credentials are the adapter's (backends), not read from the workload's environment")
	}
	return ref
}

// replicas are the HPA's minReplicas and maxReplicas, and whether the
// ScaledObject scales to zero (promscaler's activation annotations).
func (c *converter) replicas() (minR, maxR int32, toZero bool) {
	s := &c.so.Spec
	minR, maxR = 0, defaultMaxReplicas
	if s.MinReplicaCount != nil {
		minR = *s.MinReplicaCount
	}
	if s.MaxReplicaCount != nil {
		maxR = *s.MaxReplicaCount
	}
	switch {
	case s.IdleReplicaCount != nil && *s.IdleReplicaCount != 0:
		c.note("spec.idleReplicaCount", "not converted: only 0 works in KEDA too; the HPA idles at minReplicas %d", max(minR, 1))
	case s.IdleReplicaCount != nil:
		toZero = true
	case minR == 0:
		toZero = true
	}
	return max(minR, 1), maxR, toZero
}

// kedaAnnotations maps KEDA's pause annotations to promscaler's.
var kedaAnnotations = map[string]string{
	kedaPaused:         scaletozero.AnnotationPaused,
	kedaPausedReplicas: scaletozero.AnnotationPausedReplicas,
	kedaPausedScaleIn:  scaletozero.AnnotationPausedScaleIn,
	kedaPausedScaleOut: scaletozero.AnnotationPausedScaleOut,
}

// annotations carries the pause annotations over; others of KEDA's are
// noted, the rest copied.
func (c *converter) annotations() map[string]string {
	ann := map[string]string{}
	keys := make([]string, 0, len(c.so.Annotations))
	for k := range c.so.Annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := c.so.Annotations[k]
		switch {
		case kedaAnnotations[k] != "":
			ann[kedaAnnotations[k]] = v
		case k == kedaTransferOwnership || k == kedaValidatesOwnership:
			c.note("metadata.annotations."+k, "not converted: promscaler creates no HPA, you own the one written here")
		case k == "kubectl.kubernetes.io/last-applied-configuration":
		case strings.Contains(k, "keda.sh/"):
			c.note("metadata.annotations."+k, "not converted: no promscaler equivalent")
		default:
			ann[k] = v
		}
	}
	return ann
}

// metricName is the external metric served for a trigger: namespace,
// ScaledObject and trigger, in the characters external metric names allow.
func (c *converter) metricName(suffix string) string {
	ns := c.so.Namespace
	if ns == "" {
		ns = "default"
	}
	n := invalidName.ReplaceAllString(strings.ToLower(ns+"-"+c.so.Name+"-"+suffix), "-")
	if n[0] < 'a' || n[0] > 'z' {
		n = "m-" + n
	}
	return n
}

var invalidName = regexp.MustCompile(`[^a-z0-9_.:-]`)

// oneBackend is the backend all converted prometheus triggers use; ok is
// false when they use several (one query cannot combine them).
func (c *converter) oneBackend() (backend string, ok bool) {
	for i, t := range c.external {
		if i > 0 && t.backend != backend {
			return "", false
		}
		backend = t.backend
	}
	return backend, true
}

// seconds renders a KEDA period in seconds as a Go duration.
func seconds(s int32) string {
	return (time.Duration(s) * time.Second).String()
}

// quantity parses a KEDA number (threshold, target) as a quantity.
func quantity(s string) (*resource.Quantity, error) {
	if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
		return nil, fmt.Errorf("not a number: %q", s)
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return nil, err
	}
	return &q, nil
}
