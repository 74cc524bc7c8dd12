// Package simulate replays an autoscaling scenario through the HPA decision
// core (pkg/autoscaler) and reports every step's decision. A scenario (see
// docs/simulate.md) holds a real autoscaling/v2 HorizontalPodAutoscaler,
// the target's replicas, its pods or a generator of identical pods, metric
// values over time, the controller flags and the time steps.
package simulate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/promscaler/promscaler/pkg/schedule"
)

// Scenario is a parsed scenario file. Every time in it is an offset from
// Start (a Go duration such as "90s", "-10m"); Start defaults to
// 2026-01-01T00:00:00Z.
type Scenario struct {
	// Start is the wall-clock time of offset 0.
	Start *time.Time `json:"start,omitempty"`
	// HPA is the HorizontalPodAutoscaler (apiVersion autoscaling/v2),
	// status included (for example an initial ScaledToZero condition).
	HPA autoscalingv2.HorizontalPodAutoscaler `json:"hpa"`
	// Controller holds the kube-controller-manager flags and feature gates.
	Controller Controller `json:"controller,omitempty"`
	// Target is the scale target at offset 0.
	Target Target `json:"target"`
	// Pods lists the target's pods; exclusive with PodTemplate.
	Pods []Pod `json:"pods,omitempty"`
	// PodTemplate generates identical pods; exclusive with Pods.
	PodTemplate *PodTemplate `json:"podTemplate,omitempty"`
	// History preloads what the controllers keep in memory, as if they had
	// run before offset 0.
	History *History `json:"history,omitempty"`
	// Steps are the reconciles to run, in time order.
	Steps []Step `json:"steps"`
	// Schedules are schedules as the adapter's --schedules-config holds
	// them; an External metric named after one reads its floor at each
	// step unless the step gives a value (schedules.go).
	Schedules json.RawMessage `json:"schedules,omitempty"`
	schedules *schedule.Set
}

// History is the controllers' memory at offset 0. With a history, the
// first step is not the HPA's first reconcile: no recommendation equal to
// the current replicas is recorded for it.
type History struct {
	// Recommendations are kube-controller-manager's past unstabilized
	// recommendations (the stabilization windows read them).
	Recommendations []PastRecommendation `json:"recommendations,omitempty"`
	// ScaleUpEvents and ScaleDownEvents are its past rescales (the
	// behavior policies count them over their periods).
	ScaleUpEvents   []PastScaleEvent `json:"scaleUpEvents,omitempty"`
	ScaleDownEvents []PastScaleEvent `json:"scaleDownEvents,omitempty"`
	// Scaler is promscaler's coexistence state for an annotated HPA.
	Scaler *PastScaler `json:"scaler,omitempty"`
}

// PastRecommendation is one recommendation and when it was made.
type PastRecommendation struct {
	// At is an offset, normally negative (before the first step).
	At Duration `json:"at"`
	// Replicas is the recommended count.
	Replicas int32 `json:"replicas"`
}

// PastScaleEvent is one rescale: the change in replicas and when.
type PastScaleEvent struct {
	// At is an offset, normally negative.
	At Duration `json:"at"`
	// Change is the absolute number of replicas added or removed.
	Change int32 `json:"change"`
}

// PastScaler is promscaler's state for an annotated HPA.
type PastScaler struct {
	// Phase is Active, Idle, ScaledToZero or Fallback (default Active).
	Phase string `json:"phase,omitempty"`
	// IdleSince is when the target was first seen idle (offset; Idle only).
	IdleSince *Duration `json:"idleSince,omitempty"`
	// Failures counts the consecutive periods whose metric reads all failed.
	Failures int32 `json:"failures,omitempty"`
}

// Controller holds the controller flags; unset fields take
// kube-controller-manager's defaults.
type Controller struct {
	// Tolerance is --horizontal-pod-autoscaler-tolerance (default 0.1).
	Tolerance *float64 `json:"tolerance,omitempty"`
	// DownscaleStabilization is
	// --horizontal-pod-autoscaler-downscale-stabilization (default 5m).
	DownscaleStabilization *Duration `json:"downscaleStabilization,omitempty"`
	// CPUInitializationPeriod is
	// --horizontal-pod-autoscaler-cpu-initialization-period (default 5m).
	CPUInitializationPeriod *Duration `json:"cpuInitializationPeriod,omitempty"`
	// InitialReadinessDelay is
	// --horizontal-pod-autoscaler-initial-readiness-delay (default 30s).
	InitialReadinessDelay *Duration `json:"initialReadinessDelay,omitempty"`
	// Features toggles the feature gates that change the algorithm.
	Features *Features `json:"features,omitempty"`
}

// Features are the feature gates; unset ones take the Kubernetes 1.37 default (on).
type Features struct {
	// ScaleToZero is HPAScaleToZero (minReplicas 0, ScaledToZero).
	ScaleToZero *bool `json:"scaleToZero,omitempty"`
	// PodLevelResources is PodLevelResources (pod-level requests).
	PodLevelResources *bool `json:"podLevelResources,omitempty"`
	// ObservedGeneration is HPAGeneration (status.observedGeneration).
	ObservedGeneration *bool `json:"observedGeneration,omitempty"`
}

// Target is the scale target's /scale subresource.
type Target struct {
	// Replicas is spec.replicas at offset 0.
	Replicas *int32 `json:"replicas"`
	// Selector is status.selector (default "app=<scaleTargetRef.name>").
	Selector *string `json:"selector,omitempty"`
}

// PodSpecFields are the pod properties the algorithm reads.
type PodSpecFields struct {
	// Phase is the pod phase (default Running).
	Phase v1.PodPhase `json:"phase,omitempty"`
	// Ready is the Ready condition's status (default true).
	Ready *bool `json:"ready,omitempty"`
	// ReadySince is the Ready condition's lastTransitionTime (offset).
	ReadySince *Duration `json:"readySince,omitempty"`
	// StartTime is status.startTime (offset); NoStartTime leaves it unset.
	StartTime   *Duration `json:"startTime,omitempty"`
	NoStartTime bool      `json:"noStartTime,omitempty"`
	// DeletedAt sets metadata.deletionTimestamp (offset).
	DeletedAt *Duration `json:"deletedAt,omitempty"`
	// Containers and InitContainers with their requests.
	Containers     []Container `json:"containers,omitempty"`
	InitContainers []Container `json:"initContainers,omitempty"`
	// Requests are pod-level requests (spec.resources.requests).
	Requests v1.ResourceList `json:"requests,omitempty"`
	// Overhead is spec.overhead.
	Overhead v1.ResourceList `json:"overhead,omitempty"`
}

// Pod is one named pod.
type Pod struct {
	// Name is the pod's name, unique in the scenario.
	Name string `json:"name"`
	PodSpecFields
}

// Container is a container and its requests.
type Container struct {
	// Name is the container's name.
	Name string `json:"name"`
	// RestartPolicy "Always" makes an init container a sidecar.
	RestartPolicy *v1.ContainerRestartPolicy `json:"restartPolicy,omitempty"`
	// Requests are the container's resource requests.
	Requests v1.ResourceList `json:"requests,omitempty"`
}

// PodTemplate generates pods named <namePrefix>-0, -1, ...: Count of them,
// or, when Count is unset, as many as the target's replicas, following
// every rescale (pods added at the step time, highest indexes removed).
type PodTemplate struct {
	// NamePrefix names the pods (default: scaleTargetRef.name).
	NamePrefix string `json:"namePrefix,omitempty"`
	// Count fixes the number of pods; unset, they follow the replicas.
	Count *int32 `json:"count,omitempty"`
	PodSpecFields
	// NewPods describes pods created by a scale-up.
	NewPods NewPods `json:"newPods,omitempty"`
}

// NewPods is how a pod created during the scenario comes up: Pending for
// PendingFor, then Running and not ready until ReadyAfter (both measured
// from creation), then ready.
type NewPods struct {
	// PendingFor is how long a new pod stays Pending (no start time, no samples).
	PendingFor Duration `json:"pendingFor,omitempty"`
	// ReadyAfter is when, after creation, a new pod turns Ready.
	ReadyAfter Duration `json:"readyAfter,omitempty"`
}

// Step is one reconcile.
type Step struct {
	// At is the step's offset from Start; steps are in time order, and two
	// steps may share a time (two reconciles in the same instant).
	At Duration `json:"at"`
	// Replicas changes the target's spec.replicas before the reconcile (as
	// a user or another controller would).
	Replicas *int32 `json:"replicas,omitempty"`
	// StatusReplicas sets the target's status.replicas (default: the pods
	// that are neither deleting nor terminated).
	StatusReplicas *int32 `json:"statusReplicas,omitempty"`
	// Pods replaces the explicit pod list from this step on.
	Pods []Pod `json:"pods,omitempty"`
	// Metrics sets metric values from this step on (values carry over).
	// Keys name a metric spec: the resource name (cpu, memory) for Resource
	// and ContainerResource metrics, metric.name for the others, or "#i"
	// for spec.metrics[i].
	Metrics map[string]MetricValue `json:"metrics,omitempty"`
	// ScaleError makes the /scale update of this step fail with this text.
	ScaleError string `json:"scaleError,omitempty"`
}

// MetricValue is what the metrics API returns for one metric at a step.
type MetricValue struct {
	// PerPod gives each pod's value (Resource, ContainerResource, Pods);
	// names of pods that do not exist make extraneous samples.
	PerPod map[string]resource.Quantity `json:"perPod,omitempty"`
	// AllPods is the value of every listed pod not in PerPod or Missing.
	AllPods *resource.Quantity `json:"allPods,omitempty"`
	// Missing pods have no sample.
	Missing []string `json:"missing,omitempty"`
	// Value is an Object metric's value, or a single External series.
	Value *resource.Quantity `json:"value,omitempty"`
	// Series are an External metric's series values (summed).
	Series []resource.Quantity `json:"series,omitempty"`
	// Age is how old the samples are at the step (default 0); Timestamp
	// instead gives their time as an offset from the start. Window is the
	// window they cover (default 1m).
	Age       *Duration `json:"age,omitempty"`
	Timestamp *Duration `json:"timestamp,omitempty"`
	Window    *Duration `json:"window,omitempty"`
	// Error makes the metrics API call fail with this text.
	Error string `json:"error,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("90s",
// "-5m") or a number of seconds.
type Duration struct{ time.Duration }

// UnmarshalJSON accepts "1m30s" or 90.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q: want a Go duration such as \"90s\" or \"-5m\"", s)
		}
		d.Duration = v
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("invalid duration %s: want a Go duration such as \"90s\" or a number of seconds", b)
	}
	if f > 1e9 || f < -1e9 {
		return fmt.Errorf("invalid duration %s: out of range", b)
	}
	d.Duration = time.Duration(f * float64(time.Second))
	return nil
}

// MarshalJSON writes the Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// DefaultStart is offset 0 when a scenario sets no start.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Load reads and parses a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fileErrors(path, err)
	}
	return s, nil
}

// Parse decodes a scenario strictly (unknown fields, duplicate keys and
// wrong types are errors naming the field and line) and validates it.
func Parse(data []byte) (*Scenario, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, errors.New("empty scenario")
	}
	if err := checkKeys(&doc, reflect.TypeFor[Scenario](), nil); err != nil {
		return nil, err
	}
	var generic any
	if err := doc.Decode(&generic); err != nil {
		return nil, yamlError(err)
	}
	generic, err := jsonCompatible(generic, "")
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(generic)
	if err != nil {
		return nil, fmt.Errorf("invalid scenario: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, describeDecodeError(err, doc.Content[0])
	}
	if errs := s.validate(); len(errs) > 0 {
		for i, err := range errs {
			errs[i] = atLine(&doc, err)
		}
		return nil, errors.Join(errs...)
	}
	return &s, nil
}

// jsonCompatible turns what yaml.v3 decoded into values encoding/json can
// marshal: maps with non-string keys are rejected, times become RFC 3339.
func jsonCompatible(v any, path string) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			c, err := jsonCompatible(e, joinPath(path, k))
			if err != nil {
				return nil, err
			}
			t[k] = c
		}
		return t, nil
	case map[any]any:
		return nil, fmt.Errorf("%s: mapping keys must be strings", orRoot(path))
	case []any:
		for i, e := range t {
			c, err := jsonCompatible(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
		return t, nil
	case time.Time:
		return t.Format(time.RFC3339Nano), nil
	case float64:
		if t != t || t > 1e300 || t < -1e300 {
			return nil, fmt.Errorf("%s: number out of range", orRoot(path))
		}
	}
	return v, nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "scenario"
	}
	return path
}

// describeDecodeError rewrites encoding/json errors with the YAML field
// path and line.
func describeDecodeError(err error, root *yaml.Node) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if n := findPath(root, field); n != nil {
			return &LineError{Line: n.Line, Err: fmt.Errorf("%s: cannot use %s as %s", field, typeErr.Value, typeErr.Type)}
		}
		return fmt.Errorf("%s: cannot use %s as %s", orRoot(field), typeErr.Value, typeErr.Type)
	}
	// Unknown fields never get here: checkKeys has named them.
	return fmt.Errorf("invalid scenario: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// findPath follows a dotted path of mapping keys from root.
func findPath(root *yaml.Node, path string) *yaml.Node {
	n := root
	for _, key := range strings.Split(path, ".") {
		if n.Kind != yaml.MappingNode {
			return n
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return n
		}
		n = next
	}
	return n
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

// yamlError places a YAML error at the line it names, if any.
func yamlError(err error) error {
	e := fmt.Errorf("invalid YAML: %w", err)
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		if n, cerr := strconv.Atoi(m[1]); cerr == nil {
			return &LineError{Line: n, Err: e}
		}
	}
	return e
}
