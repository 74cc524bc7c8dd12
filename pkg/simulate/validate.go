package simulate

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

// maxGeneratedPods bounds the pods a podTemplate may generate, so a
// scenario cannot make the simulator allocate without limit.
const maxGeneratedPods = 10000

// validate reports every problem, each a field error naming its field
// (Parse places it at its line). HPA checks follow the API server's
// validation of autoscaling/v2, so a scenario holds only HPAs a cluster
// would accept.
func (s *Scenario) validate() []error {
	errs := s.validateSchedules()
	var list field.ErrorList
	list = append(list, validateHPA(field.NewPath("hpa"), &s.HPA, s.scaleToZero())...)
	list = append(list, s.Controller.validate(field.NewPath("controller"))...)
	list = append(list, s.validateTarget()...)
	list = append(list, s.validatePodSources()...)
	list = append(list, s.validateHistory()...)
	list = append(list, s.validateAnnotations()...)
	list = append(list, s.validateSteps()...)
	for _, e := range list {
		errs = append(errs, e)
	}
	return errs
}

// scaleToZero tells whether the scenario's controller has the
// scaleToZero feature (on unless turned off).
func (s *Scenario) scaleToZero() bool {
	f := s.Controller.Features
	return f == nil || f.ScaleToZero == nil || *f.ScaleToZero
}

// validateHPA checks the HPA's type and spec.
func validateHPA(p *field.Path, h *autoscalingv2.HorizontalPodAutoscaler, scaleToZero bool) field.ErrorList {
	var errs field.ErrorList
	if h.APIVersion != "" && h.APIVersion != "autoscaling/v2" {
		errs = append(errs, field.NotSupported(p.Child("apiVersion"), h.APIVersion, []string{"autoscaling/v2"}))
	}
	if h.Kind != "" && h.Kind != "HorizontalPodAutoscaler" {
		errs = append(errs, field.NotSupported(p.Child("kind"), h.Kind, []string{"HorizontalPodAutoscaler"}))
	}
	spec, sp := &h.Spec, p.Child("spec")
	if spec.ScaleTargetRef.Kind == "" {
		errs = append(errs, field.Required(sp.Child("scaleTargetRef", "kind"), ""))
	}
	if spec.ScaleTargetRef.Name == "" {
		errs = append(errs, field.Required(sp.Child("scaleTargetRef", "name"), ""))
	}
	if spec.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(sp.Child("maxReplicas"), spec.MaxReplicas, "must be at least 1"))
	}
	if m := spec.MinReplicas; m != nil {
		mp := sp.Child("minReplicas")
		switch {
		case *m < 0:
			errs = append(errs, field.Invalid(mp, *m, "must not be negative"))
		case *m == 0 && !scaleToZero:
			errs = append(errs, field.Invalid(mp, *m, "needs the scaleToZero feature (controller.features.scaleToZero)"))
		case *m == 0 && !autoscaler.HasObjectOrExternal(spec.Metrics):
			errs = append(errs, field.Invalid(mp, *m, "needs at least one Object or External metric"))
		case *m > spec.MaxReplicas:
			errs = append(errs, field.Invalid(mp, *m, fmt.Sprintf("must not exceed maxReplicas (%d)", spec.MaxReplicas)))
		}
	}
	for i, m := range spec.Metrics {
		errs = append(errs, validateMetric(sp.Child("metrics").Index(i), m)...)
	}
	if b := spec.Behavior; b != nil {
		bp := sp.Child("behavior")
		errs = append(errs, validateRules(bp.Child("scaleUp"), b.ScaleUp)...)
		errs = append(errs, validateRules(bp.Child("scaleDown"), b.ScaleDown)...)
	}
	return errs
}

// validate checks the controller's settings.
func (c *Controller) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Tolerance != nil && (*c.Tolerance < 0 || *c.Tolerance != *c.Tolerance) {
		errs = append(errs, field.Invalid(p.Child("tolerance"), *c.Tolerance, "must be a non-negative number"))
	}
	for _, d := range []struct {
		name string
		v    *Duration
	}{{"downscaleStabilization", c.DownscaleStabilization}, {"cpuInitializationPeriod", c.CPUInitializationPeriod}, {"initialReadinessDelay", c.InitialReadinessDelay}} {
		if d.v != nil {
			errs = append(errs, notNegative(p.Child(d.name), d.v.Duration)...)
		}
	}
	return errs
}

// notNegative checks a duration.
func notNegative(p *field.Path, d time.Duration) field.ErrorList {
	if d < 0 {
		return field.ErrorList{field.Invalid(p, d.String(), "must not be negative")}
	}
	return nil
}

func (s *Scenario) validateTarget() field.ErrorList {
	p := field.NewPath("target", "replicas")
	switch r := s.Target.Replicas; {
	case r == nil:
		return field.ErrorList{field.Required(p, "")}
	case *r < 0:
		return field.ErrorList{field.Invalid(p, *r, "must not be negative")}
	}
	return nil
}

// validatePodSources checks pods and podTemplate, of which a scenario
// gives one.
func (s *Scenario) validatePodSources() field.ErrorList {
	var errs field.ErrorList
	if s.Pods != nil && s.PodTemplate != nil {
		errs = append(errs, field.Forbidden(field.NewPath("pods"), "give either pods or podTemplate, not both"))
	}
	errs = append(errs, validatePods(field.NewPath("pods"), s.Pods)...)
	t := s.PodTemplate
	if t == nil {
		return errs
	}
	p := field.NewPath("podTemplate")
	errs = append(errs, validatePodFields(p, &t.PodSpecFields)...)
	if t.Count != nil && *t.Count < 0 {
		errs = append(errs, field.Invalid(p.Child("count"), *t.Count, "must not be negative"))
	}
	errs = append(errs, notNegative(p.Child("newPods", "pendingFor"), t.NewPods.PendingFor.Duration)...)
	errs = append(errs, notNegative(p.Child("newPods", "readyAfter"), t.NewPods.ReadyAfter.Duration)...)
	if t.NamePrefix != "" && strings.ContainsAny(t.NamePrefix, " /") {
		errs = append(errs, field.Invalid(p.Child("namePrefix"), t.NamePrefix, "must not contain spaces or slashes"))
	}
	return append(errs, s.validateGenerated()...)
}

// validateGenerated bounds the pods a podTemplate generates: its count,
// or else every replica count the pods follow.
func (s *Scenario) validateGenerated() field.ErrorList {
	var errs field.ErrorList
	limit := func(p *field.Path, v int32) {
		if v > maxGeneratedPods {
			errs = append(errs, field.Invalid(p, v, fmt.Sprintf("podTemplate generates at most %d pods", maxGeneratedPods)))
		}
	}
	if c := s.PodTemplate.Count; c != nil {
		limit(field.NewPath("podTemplate", "count"), *c)
		return errs
	}
	limit(field.NewPath("hpa", "spec", "maxReplicas"), s.HPA.Spec.MaxReplicas)
	if s.Target.Replicas != nil {
		limit(field.NewPath("target", "replicas"), *s.Target.Replicas)
	}
	for i, st := range s.Steps {
		if st.Replicas != nil {
			limit(field.NewPath("steps").Index(i).Child("replicas"), *st.Replicas)
		}
	}
	return errs
}

// validateSteps checks the steps: at least one, in time order, and the
// metric values each gives.
func (s *Scenario) validateSteps() field.ErrorList {
	var errs field.ErrorList
	if len(s.Steps) == 0 {
		errs = append(errs, field.Required(field.NewPath("steps"), "at least one step is required"))
	}
	for i := range s.Steps {
		st, p := &s.Steps[i], field.NewPath("steps").Index(i)
		if i > 0 && st.At.Duration < s.Steps[i-1].At.Duration {
			errs = append(errs, field.Invalid(p.Child("at"), st.At.Duration.String(), fmt.Sprintf("must not be earlier than steps[%d].at (%v)", i-1, s.Steps[i-1].At.Duration)))
		}
		if st.Replicas != nil && *st.Replicas < 0 {
			errs = append(errs, field.Invalid(p.Child("replicas"), *st.Replicas, "must not be negative"))
		}
		if st.StatusReplicas != nil && *st.StatusReplicas < 0 {
			errs = append(errs, field.Invalid(p.Child("statusReplicas"), *st.StatusReplicas, "must not be negative"))
		}
		if st.Pods != nil && s.PodTemplate != nil {
			errs = append(errs, field.Forbidden(p.Child("pods"), "cannot replace pods generated by podTemplate"))
		}
		errs = append(errs, validatePods(p.Child("pods"), st.Pods)...)
		errs = append(errs, s.validateStepMetrics(p.Child("metrics"), st.Metrics)...)
	}
	return errs
}

// validateStepMetrics checks a step's metric values: each key names one
// metric of the HPA, no two the same, with the values its type takes.
func (s *Scenario) validateStepMetrics(p *field.Path, values map[string]MetricValue) field.ErrorList {
	var errs field.ErrorList
	keys := make([]string, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	byIndex := map[int]string{}
	for _, key := range keys {
		mp := p.Key(key)
		idx, err := s.resolveKey(key)
		if err != nil {
			errs = append(errs, field.Invalid(mp, key, err.Error()))
			continue
		}
		if other, dup := byIndex[idx]; dup {
			errs = append(errs, field.Invalid(mp, key, fmt.Sprintf("names the same metric as %q", other)))
			continue
		}
		byIndex[idx] = key
		errs = append(errs, validateMetricValue(mp, s.keySpecs()[idx].Type, values[key])...)
	}
	return errs
}

// metricSources are the metric source types of autoscaling/v2.
var metricSources = []autoscalingv2.MetricSourceType{
	autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType,
	autoscalingv2.PodsMetricSourceType, autoscalingv2.ObjectMetricSourceType, autoscalingv2.ExternalMetricSourceType,
}

// validateMetric checks one spec.metrics entry: one source, the one its
// type names, with a name and a target of a type the source allows.
func validateMetric(p *field.Path, m autoscalingv2.MetricSpec) field.ErrorList {
	var errs field.ErrorList
	set := 0
	for _, given := range []bool{m.Object != nil, m.Pods != nil, m.Resource != nil, m.ContainerResource != nil, m.External != nil} {
		if given {
			set++
		}
	}
	if set > 1 {
		errs = append(errs, field.Forbidden(p, "exactly one metric source must be set"))
	}
	required := func(p *field.Path, v string) {
		if v == "" {
			errs = append(errs, field.Required(p, ""))
		}
	}
	utilOrAverage := []autoscalingv2.MetricTargetType{autoscalingv2.UtilizationMetricType, autoscalingv2.AverageValueMetricType}
	valueOrAverage := []autoscalingv2.MetricTargetType{autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType}
	var (
		src     *field.Path // the source's field
		given   bool        // the source is set
		target  autoscalingv2.MetricTarget
		allowed []autoscalingv2.MetricTargetType
	)
	switch m.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if src, given = p.Child("resource"), m.Resource != nil; given {
			required(src.Child("name"), string(m.Resource.Name))
			target, allowed = m.Resource.Target, utilOrAverage
		}
	case autoscalingv2.ContainerResourceMetricSourceType:
		if src, given = p.Child("containerResource"), m.ContainerResource != nil; given {
			required(src.Child("name"), string(m.ContainerResource.Name))
			required(src.Child("container"), m.ContainerResource.Container)
			target, allowed = m.ContainerResource.Target, utilOrAverage
		}
	case autoscalingv2.PodsMetricSourceType:
		if src, given = p.Child("pods"), m.Pods != nil; given {
			required(src.Child("metric", "name"), m.Pods.Metric.Name)
			target, allowed = m.Pods.Target, []autoscalingv2.MetricTargetType{autoscalingv2.AverageValueMetricType}
		}
	case autoscalingv2.ObjectMetricSourceType:
		if src, given = p.Child("object"), m.Object != nil; given {
			required(src.Child("metric", "name"), m.Object.Metric.Name)
			required(src.Child("describedObject", "kind"), m.Object.DescribedObject.Kind)
			required(src.Child("describedObject", "name"), m.Object.DescribedObject.Name)
			target, allowed = m.Object.Target, valueOrAverage
		}
	case autoscalingv2.ExternalMetricSourceType:
		if src, given = p.Child("external"), m.External != nil; given {
			required(src.Child("metric", "name"), m.External.Metric.Name)
			target, allowed = m.External.Target, valueOrAverage
		}
	default:
		return append(errs, field.NotSupported(p.Child("type"), m.Type, metricSources))
	}
	if !given {
		return append(errs, field.Required(src, fmt.Sprintf("for type %s", m.Type)))
	}
	return append(errs, validateMetricTarget(src.Child("target"), target, allowed)...)
}

// validateMetricTarget checks a metric target: a type the source allows, and
// the positive value that type needs.
func validateMetricTarget(p *field.Path, t autoscalingv2.MetricTarget, allowed []autoscalingv2.MetricTargetType) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(allowed, t.Type) {
		return append(errs, field.NotSupported(p.Child("type"), t.Type, allowed))
	}
	switch t.Type {
	case autoscalingv2.UtilizationMetricType:
		vp := p.Child("averageUtilization")
		if t.AverageUtilization == nil {
			errs = append(errs, field.Required(vp, "for type Utilization"))
		} else if *t.AverageUtilization < 1 {
			errs = append(errs, field.Invalid(vp, *t.AverageUtilization, "must be positive"))
		}
	case autoscalingv2.AverageValueMetricType:
		vp := p.Child("averageValue")
		if t.AverageValue == nil {
			errs = append(errs, field.Required(vp, "for type AverageValue"))
		} else if t.AverageValue.Sign() <= 0 {
			errs = append(errs, field.Invalid(vp, t.AverageValue.String(), "must be positive"))
		}
	case autoscalingv2.ValueMetricType:
		vp := p.Child("value")
		if t.Value == nil {
			errs = append(errs, field.Required(vp, "for type Value"))
		} else if t.Value.Sign() <= 0 {
			errs = append(errs, field.Invalid(vp, t.Value.String(), "must be positive"))
		}
	}
	return errs
}

func validateRules(p *field.Path, r *autoscalingv2.HPAScalingRules) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil && (*w < 0 || *w > 3600) {
		errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w, "must be between 0 and 3600"))
	}
	selects := []autoscalingv2.ScalingPolicySelect{autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect, autoscalingv2.DisabledPolicySelect}
	if sp := r.SelectPolicy; sp != nil && !slices.Contains(selects, *sp) {
		errs = append(errs, field.NotSupported(p.Child("selectPolicy"), *sp, selects))
	}
	if r.Policies != nil && len(r.Policies) == 0 && (r.SelectPolicy == nil || *r.SelectPolicy != autoscalingv2.DisabledPolicySelect) {
		errs = append(errs, field.Required(p.Child("policies"), "must not be empty unless selectPolicy is Disabled"))
	}
	types := []autoscalingv2.HPAScalingPolicyType{autoscalingv2.PodsScalingPolicy, autoscalingv2.PercentScalingPolicy}
	for i, pol := range r.Policies {
		pp := p.Child("policies").Index(i)
		if !slices.Contains(types, pol.Type) {
			errs = append(errs, field.NotSupported(pp.Child("type"), pol.Type, types))
		}
		if pol.Value <= 0 {
			errs = append(errs, field.Invalid(pp.Child("value"), pol.Value, "must be positive"))
		}
		if pol.PeriodSeconds <= 0 || pol.PeriodSeconds > 1800 {
			errs = append(errs, field.Invalid(pp.Child("periodSeconds"), pol.PeriodSeconds, "must be between 1 and 1800"))
		}
	}
	if t := r.Tolerance; t != nil && t.Sign() < 0 {
		errs = append(errs, field.Invalid(p.Child("tolerance"), t.String(), "must not be negative"))
	}
	return errs
}

func validatePods(p *field.Path, pods []Pod) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i := range pods {
		pod, pp := &pods[i], p.Index(i)
		switch {
		case pod.Name == "":
			errs = append(errs, field.Required(pp.Child("name"), ""))
		case seen[pod.Name]:
			errs = append(errs, field.Duplicate(pp.Child("name"), pod.Name))
		}
		seen[pod.Name] = true
		errs = append(errs, validatePodFields(pp, &pod.PodSpecFields)...)
	}
	return errs
}

func validatePodFields(p *field.Path, f *PodSpecFields) field.ErrorList {
	var errs field.ErrorList
	switch f.Phase {
	case "", v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown:
	default:
		errs = append(errs, field.NotSupported(p.Child("phase"), f.Phase, []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown}))
	}
	if f.NoStartTime && f.StartTime != nil {
		errs = append(errs, field.Forbidden(p.Child("noStartTime"), "conflicts with startTime"))
	}
	names := map[string]bool{} // containers and init containers share names
	for _, cs := range []struct {
		p  *field.Path
		cs []Container
	}{{p.Child("containers"), f.Containers}, {p.Child("initContainers"), f.InitContainers}} {
		for i, c := range cs.cs {
			cp := cs.p.Index(i)
			if c.Name == "" {
				errs = append(errs, field.Required(cp.Child("name"), ""))
			} else if names[c.Name] {
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			}
			names[c.Name] = true
			if c.RestartPolicy != nil && *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
				errs = append(errs, field.NotSupported(cp.Child("restartPolicy"), *c.RestartPolicy, []v1.ContainerRestartPolicy{v1.ContainerRestartPolicyAlways}))
			}
		}
	}
	return errs
}

// metricKey is the name a scenario uses for a metric spec.
func metricKey(m autoscalingv2.MetricSpec) string {
	switch {
	case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
		return string(m.Resource.Name)
	case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		return string(m.ContainerResource.Name)
	case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
		return m.Pods.Metric.Name
	case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
		return m.Object.Metric.Name
	case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
		return m.External.Metric.Name
	}
	return ""
}

// resolveMetricKey finds the spec a step's metrics key names.
func resolveMetricKey(specs []autoscalingv2.MetricSpec, key string) (int, error) {
	if rest, ok := strings.CutPrefix(key, "#"); ok {
		var i int
		if _, err := fmt.Sscanf(rest, "%d", &i); err != nil || fmt.Sprint(i) != rest || i < 0 || i >= len(specs) {
			return 0, fmt.Errorf("no spec.metrics entry %s (the HPA has %d)", key, len(specs))
		}
		return i, nil
	}
	found := -1
	for i, m := range specs {
		if metricKey(m) == key {
			if found >= 0 {
				return 0, fmt.Errorf("%q names spec.metrics[%d] and [%d]; use \"#%d\" or \"#%d\"", key, found, i, found, i)
			}
			found = i
		}
	}
	if found < 0 {
		var keys []string
		for _, m := range specs {
			keys = append(keys, metricKey(m))
		}
		return 0, fmt.Errorf("no metric named %q in the HPA (known: %s)", key, strings.Join(keys, ", "))
	}
	return found, nil
}

func validateMetricValue(p *field.Path, t autoscalingv2.MetricSourceType, mv MetricValue) field.ErrorList {
	var errs field.ErrorList
	perPod := mv.PerPod != nil || mv.AllPods != nil || mv.Missing != nil
	switch t {
	case autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType, autoscalingv2.PodsMetricSourceType:
		if mv.Value != nil || mv.Series != nil {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("a %s metric takes perPod, allPods and missing, not value or series", t)))
		}
	case autoscalingv2.ObjectMetricSourceType:
		if perPod || mv.Series != nil {
			errs = append(errs, field.Forbidden(p, "an Object metric takes value, not perPod, allPods, missing or series"))
		}
		if mv.Value == nil && mv.Error == "" {
			errs = append(errs, field.Required(p.Child("value"), "for an Object metric (or give error)"))
		}
	case autoscalingv2.ExternalMetricSourceType:
		if perPod {
			errs = append(errs, field.Forbidden(p, "an External metric takes value or series, not perPod, allPods or missing"))
		}
		if mv.Value != nil && mv.Series != nil {
			errs = append(errs, field.Forbidden(p, "give value or series, not both"))
		}
	}
	if mv.Age != nil && mv.Timestamp != nil {
		errs = append(errs, field.Forbidden(p, "give age or timestamp, not both"))
	}
	if mv.Window != nil {
		errs = append(errs, notNegative(p.Child("window"), mv.Window.Duration)...)
	}
	return errs
}

// validateHistory checks the preloaded history: past times (not after the
// first step), positive counts, a known scaler phase.
func (s *Scenario) validateHistory() field.ErrorList {
	h := s.History
	if h == nil {
		return nil
	}
	var errs field.ErrorList
	first := time.Duration(0)
	if len(s.Steps) > 0 {
		first = s.Steps[0].At.Duration
	}
	notAfter := func(p *field.Path, d time.Duration) {
		if d > first {
			errs = append(errs, field.Invalid(p, d.String(), fmt.Sprintf("must not be after the first step (%v)", first)))
		}
	}
	hp := field.NewPath("history")
	for i, r := range h.Recommendations {
		p := hp.Child("recommendations").Index(i)
		notAfter(p.Child("at"), r.At.Duration)
		if r.Replicas < 0 {
			errs = append(errs, field.Invalid(p.Child("replicas"), r.Replicas, "must not be negative"))
		}
	}
	for _, ev := range []struct {
		name   string
		events []PastScaleEvent
	}{{"scaleUpEvents", h.ScaleUpEvents}, {"scaleDownEvents", h.ScaleDownEvents}} {
		for i, e := range ev.events {
			p := hp.Child(ev.name).Index(i)
			notAfter(p.Child("at"), e.At.Duration)
			if e.Change < 1 {
				errs = append(errs, field.Invalid(p.Child("change"), e.Change, "must be at least 1"))
			}
		}
	}
	if sc := h.Scaler; sc != nil {
		errs = append(errs, s.validateScalerHistory(hp.Child("scaler"), sc, first)...)
	}
	return errs
}

// validateScalerHistory checks the scaler's preloaded state.
func (s *Scenario) validateScalerHistory(p *field.Path, sc *PastScaler, first time.Duration) field.ErrorList {
	var errs field.ErrorList
	idle := p.Child("idleSince")
	switch scaletozero.Phase(sc.Phase) {
	case "", scaletozero.PhaseActive, scaletozero.PhaseScaledToZero, scaletozero.PhaseFallback:
		if sc.IdleSince != nil {
			errs = append(errs, field.Forbidden(idle, "only with phase Idle"))
		}
	case scaletozero.PhaseIdle:
		if sc.IdleSince == nil {
			errs = append(errs, field.Required(idle, "with phase Idle"))
		} else if sc.IdleSince.Duration > first {
			errs = append(errs, field.Invalid(idle, sc.IdleSince.Duration.String(), fmt.Sprintf("must not be after the first step (%v)", first)))
		}
	default:
		phases := []scaletozero.Phase{scaletozero.PhaseActive, scaletozero.PhaseIdle, scaletozero.PhaseScaledToZero, scaletozero.PhaseFallback}
		errs = append(errs, field.NotSupported(p.Child("phase"), sc.Phase, phases))
	}
	if sc.Failures < 0 {
		errs = append(errs, field.Invalid(p.Child("failures"), sc.Failures, "must not be negative"))
	}
	if !scaletozero.Annotated(s.HPA.Annotations) {
		errs = append(errs, field.Forbidden(p, "the HPA carries no promscaler.io annotations"))
	}
	return errs
}

// validateAnnotations reports the promscaler.io annotations the
// autoscaler would reject, each naming its annotation.
func (s *Scenario) validateAnnotations() field.ErrorList {
	if !scaletozero.Annotated(s.HPA.Annotations) {
		return nil
	}
	h := s.HPA.DeepCopy()
	autoscaler.ApplyDefaults(h)
	_, problems := scaletozero.Parse(h)
	problems = append(problems, scaletozero.Unknown(h.Annotations)...)
	var errs field.ErrorList
	p := field.NewPath("hpa", "metadata", "annotations")
	for _, pr := range problems {
		errs = append(errs, field.Invalid(p.Key(pr.Annotation), pr.Value, pr.Message))
	}
	return errs
}

// activationKey names the activation metric in steps[i].metrics.
const activationKey = "activation"

// activation returns the activation metric of an HPA whose promscaler.io
// annotations parse, or nil.
func (s *Scenario) activation() *scaletozero.MetricRef {
	spec, ok := s.scalerSpec()
	if !ok || spec.Activation == nil {
		return nil
	}
	return &spec.Activation.Metric
}

// scalerSpec parses the HPA's promscaler.io annotations; ok is false when
// it has none or they are invalid.
func (s *Scenario) scalerSpec() (scaletozero.Spec, bool) {
	if !scaletozero.Annotated(s.HPA.Annotations) {
		return scaletozero.Spec{}, false
	}
	h := s.HPA.DeepCopy()
	autoscaler.ApplyDefaults(h)
	spec, problems := scaletozero.Parse(h)
	return spec, len(problems) == 0
}

// keySpecs are the metric specs steps[i].metrics keys name: the HPA's (or
// its default), then an activation metric that is not one of them.
func (s *Scenario) keySpecs() []autoscalingv2.MetricSpec {
	specs := autoscaler.MetricSpecs(&s.HPA)
	if a := s.activation(); a != nil && a.HPAIndex < 0 {
		specs = append(append([]autoscalingv2.MetricSpec(nil), specs...), a.Spec)
	}
	return specs
}

// resolveKey finds the spec a steps[i].metrics key names: "activation"
// for the activation metric, else as resolveMetricKey.
func (s *Scenario) resolveKey(key string) (int, error) {
	specs := s.keySpecs()
	if key == activationKey {
		a := s.activation()
		switch {
		case a == nil:
			return 0, fmt.Errorf("the HPA has no valid %s annotation", scaletozero.AnnotationActivationMetric)
		case a.HPAIndex >= 0:
			return a.HPAIndex, nil
		}
		return len(specs) - 1, nil
	}
	return resolveMetricKey(specs, key)
}
