package simulate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/scaletozero"
)

// maxGeneratedPods bounds the pods a podTemplate may generate, so a
// scenario cannot make the simulator allocate without limit.
const maxGeneratedPods = 10000

// validate reports every problem, each naming its field. HPA checks follow
// the API server's validation of autoscaling/v2, so a scenario holds only
// HPAs a cluster would accept.
func (s *Scenario) validate() []error {
	errs := s.validateSchedules()
	add := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	h := &s.HPA
	if h.APIVersion != "" && h.APIVersion != "autoscaling/v2" {
		add("hpa.apiVersion", "must be autoscaling/v2, got %q", h.APIVersion)
	}
	if h.Kind != "" && h.Kind != "HorizontalPodAutoscaler" {
		add("hpa.kind", "must be HorizontalPodAutoscaler, got %q", h.Kind)
	}
	spec := &h.Spec
	if spec.ScaleTargetRef.Kind == "" {
		add("hpa.spec.scaleTargetRef.kind", "required")
	}
	if spec.ScaleTargetRef.Name == "" {
		add("hpa.spec.scaleTargetRef.name", "required")
	}
	if spec.MaxReplicas < 1 {
		add("hpa.spec.maxReplicas", "must be at least 1, got %d", spec.MaxReplicas)
	}
	scaleToZero := s.Controller.Features == nil || s.Controller.Features.ScaleToZero == nil || *s.Controller.Features.ScaleToZero
	if m := spec.MinReplicas; m != nil {
		switch {
		case *m < 0:
			add("hpa.spec.minReplicas", "must not be negative, got %d", *m)
		case *m == 0 && !scaleToZero:
			add("hpa.spec.minReplicas", "0 needs the scaleToZero feature (controller.features.scaleToZero)")
		case *m == 0 && !autoscaler.HasObjectOrExternal(spec.Metrics):
			add("hpa.spec.minReplicas", "0 needs at least one Object or External metric")
		case *m > spec.MaxReplicas:
			add("hpa.spec.minReplicas", "must not exceed maxReplicas (%d), got %d", spec.MaxReplicas, *m)
		}
	}
	for i, m := range spec.Metrics {
		errs = append(errs, validateMetric(fmt.Sprintf("hpa.spec.metrics[%d]", i), m)...)
	}
	if b := spec.Behavior; b != nil {
		errs = append(errs, validateRules("hpa.spec.behavior.scaleUp", b.ScaleUp)...)
		errs = append(errs, validateRules("hpa.spec.behavior.scaleDown", b.ScaleDown)...)
	}

	c := &s.Controller
	if c.Tolerance != nil && (*c.Tolerance < 0 || *c.Tolerance != *c.Tolerance) {
		add("controller.tolerance", "must be a non-negative number, got %v", *c.Tolerance)
	}
	for _, d := range []struct {
		name string
		v    *Duration
	}{{"downscaleStabilization", c.DownscaleStabilization}, {"cpuInitializationPeriod", c.CPUInitializationPeriod}, {"initialReadinessDelay", c.InitialReadinessDelay}} {
		if d.v != nil && d.v.Duration < 0 {
			add("controller."+d.name, "must not be negative, got %v", d.v.Duration)
		}
	}

	if s.Target.Replicas == nil {
		add("target.replicas", "required")
	} else if *s.Target.Replicas < 0 {
		add("target.replicas", "must not be negative, got %d", *s.Target.Replicas)
	}
	if s.Pods != nil && s.PodTemplate != nil {
		add("pods", "give either pods or podTemplate, not both")
	}
	errs = append(errs, validatePods("pods", s.Pods)...)
	if t := s.PodTemplate; t != nil {
		errs = append(errs, validatePodFields("podTemplate", &t.PodSpecFields)...)
		if t.Count != nil && *t.Count < 0 {
			add("podTemplate.count", "must not be negative, got %d", *t.Count)
		}
		if t.NewPods.PendingFor.Duration < 0 || t.NewPods.ReadyAfter.Duration < 0 {
			add("podTemplate.newPods", "durations must not be negative")
		}
		limit := func(path string, v int32) {
			if v > maxGeneratedPods {
				add(path, "podTemplate generates at most %d pods, got %d", maxGeneratedPods, v)
			}
		}
		if t.Count != nil {
			limit("podTemplate.count", *t.Count)
		} else {
			limit("hpa.spec.maxReplicas", spec.MaxReplicas)
			if s.Target.Replicas != nil {
				limit("target.replicas", *s.Target.Replicas)
			}
			for i, st := range s.Steps {
				if st.Replicas != nil {
					limit(fmt.Sprintf("steps[%d].replicas", i), *st.Replicas)
				}
			}
		}
		if t.NamePrefix != "" && strings.ContainsAny(t.NamePrefix, " /") {
			add("podTemplate.namePrefix", "must not contain spaces or slashes")
		}
	}

	errs = append(errs, s.validateHistory()...)
	errs = append(errs, s.validateAnnotations()...)

	if len(s.Steps) == 0 {
		add("steps", "at least one step is required")
	}
	for i := range s.Steps {
		st := &s.Steps[i]
		path := fmt.Sprintf("steps[%d]", i)
		if i > 0 && st.At.Duration < s.Steps[i-1].At.Duration {
			add(path+".at", "must not be earlier than steps[%d].at (%v), got %v", i-1, s.Steps[i-1].At.Duration, st.At.Duration)
		}
		if st.Replicas != nil && *st.Replicas < 0 {
			add(path+".replicas", "must not be negative, got %d", *st.Replicas)
		}
		if st.StatusReplicas != nil && *st.StatusReplicas < 0 {
			add(path+".statusReplicas", "must not be negative, got %d", *st.StatusReplicas)
		}
		if st.Pods != nil && s.PodTemplate != nil {
			add(path+".pods", "cannot replace pods generated by podTemplate")
		}
		errs = append(errs, validatePods(path+".pods", st.Pods)...)
		keys := make([]string, 0, len(st.Metrics))
		for key := range st.Metrics {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		byIndex := map[int]string{}
		for _, key := range keys {
			mv := st.Metrics[key]
			mpath := fmt.Sprintf("%s.metrics[%q]", path, key)
			idx, err := s.resolveKey(key)
			if err != nil {
				add(mpath, "%v", err)
				continue
			}
			if other, dup := byIndex[idx]; dup {
				add(mpath, "names the same metric as %q", other)
				continue
			}
			byIndex[idx] = key
			errs = append(errs, validateMetricValue(mpath, s.keySpecs()[idx].Type, mv)...)
		}
	}
	return errs
}

func validateMetric(path string, m autoscalingv2.MetricSpec) []error {
	var errs []error
	add := func(p, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...)))
	}
	set := 0
	for _, p := range []bool{m.Object != nil, m.Pods != nil, m.Resource != nil, m.ContainerResource != nil, m.External != nil} {
		if p {
			set++
		}
	}
	if set > 1 {
		add(path, "exactly one metric source must be set")
	}
	target := func(p string, t autoscalingv2.MetricTarget, allowed ...autoscalingv2.MetricTargetType) {
		ok := false
		for _, a := range allowed {
			ok = ok || t.Type == a
		}
		if !ok {
			add(p+".type", "must be one of %v, got %q", allowed, t.Type)
			return
		}
		switch t.Type {
		case autoscalingv2.UtilizationMetricType:
			if t.AverageUtilization == nil || *t.AverageUtilization < 1 {
				add(p+".averageUtilization", "must be set and positive for type Utilization")
			}
		case autoscalingv2.AverageValueMetricType:
			if t.AverageValue == nil || t.AverageValue.Sign() <= 0 {
				add(p+".averageValue", "must be set and positive for type AverageValue")
			}
		case autoscalingv2.ValueMetricType:
			if t.Value == nil || t.Value.Sign() <= 0 {
				add(p+".value", "must be set and positive for type Value")
			}
		}
	}
	name := func(p, n string) {
		if n == "" {
			add(p, "required")
		}
	}
	switch m.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if m.Resource == nil {
			add(path+".resource", "required for type Resource")
			break
		}
		name(path+".resource.name", string(m.Resource.Name))
		target(path+".resource.target", m.Resource.Target, autoscalingv2.UtilizationMetricType, autoscalingv2.AverageValueMetricType)
	case autoscalingv2.ContainerResourceMetricSourceType:
		if m.ContainerResource == nil {
			add(path+".containerResource", "required for type ContainerResource")
			break
		}
		name(path+".containerResource.name", string(m.ContainerResource.Name))
		name(path+".containerResource.container", m.ContainerResource.Container)
		target(path+".containerResource.target", m.ContainerResource.Target, autoscalingv2.UtilizationMetricType, autoscalingv2.AverageValueMetricType)
	case autoscalingv2.PodsMetricSourceType:
		if m.Pods == nil {
			add(path+".pods", "required for type Pods")
			break
		}
		name(path+".pods.metric.name", m.Pods.Metric.Name)
		target(path+".pods.target", m.Pods.Target, autoscalingv2.AverageValueMetricType)
	case autoscalingv2.ObjectMetricSourceType:
		if m.Object == nil {
			add(path+".object", "required for type Object")
			break
		}
		name(path+".object.metric.name", m.Object.Metric.Name)
		name(path+".object.describedObject.kind", m.Object.DescribedObject.Kind)
		name(path+".object.describedObject.name", m.Object.DescribedObject.Name)
		target(path+".object.target", m.Object.Target, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType)
	case autoscalingv2.ExternalMetricSourceType:
		if m.External == nil {
			add(path+".external", "required for type External")
			break
		}
		name(path+".external.metric.name", m.External.Metric.Name)
		target(path+".external.target", m.External.Target, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType)
	default:
		add(path+".type", "must be Resource, ContainerResource, Pods, Object or External, got %q", m.Type)
	}
	return errs
}

func validateRules(path string, r *autoscalingv2.HPAScalingRules) []error {
	if r == nil {
		return nil
	}
	var errs []error
	add := func(p, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...)))
	}
	if w := r.StabilizationWindowSeconds; w != nil && (*w < 0 || *w > 3600) {
		add(path+".stabilizationWindowSeconds", "must be between 0 and 3600, got %d", *w)
	}
	if p := r.SelectPolicy; p != nil && *p != autoscalingv2.MaxChangePolicySelect && *p != autoscalingv2.MinChangePolicySelect && *p != autoscalingv2.DisabledPolicySelect {
		add(path+".selectPolicy", "must be Max, Min or Disabled, got %q", *p)
	}
	if r.Policies != nil && len(r.Policies) == 0 && (r.SelectPolicy == nil || *r.SelectPolicy != autoscalingv2.DisabledPolicySelect) {
		add(path+".policies", "must not be empty unless selectPolicy is Disabled")
	}
	for i, p := range r.Policies {
		pp := fmt.Sprintf("%s.policies[%d]", path, i)
		if p.Type != autoscalingv2.PodsScalingPolicy && p.Type != autoscalingv2.PercentScalingPolicy {
			add(pp+".type", "must be Pods or Percent, got %q", p.Type)
		}
		if p.Value <= 0 {
			add(pp+".value", "must be positive, got %d", p.Value)
		}
		if p.PeriodSeconds <= 0 || p.PeriodSeconds > 1800 {
			add(pp+".periodSeconds", "must be between 1 and 1800, got %d", p.PeriodSeconds)
		}
	}
	if t := r.Tolerance; t != nil && t.Sign() < 0 {
		add(path+".tolerance", "must not be negative, got %s", t.String())
	}
	return errs
}

func validatePods(path string, pods []Pod) []error {
	var errs []error
	seen := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		pp := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case p.Name == "":
			errs = append(errs, fmt.Errorf("%s.name: required", pp))
		case seen[p.Name]:
			errs = append(errs, fmt.Errorf("%s.name: duplicate pod name %q", pp, p.Name))
		}
		seen[p.Name] = true
		errs = append(errs, validatePodFields(pp, &p.PodSpecFields)...)
	}
	return errs
}

func validatePodFields(path string, p *PodSpecFields) []error {
	var errs []error
	switch p.Phase {
	case "", v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown:
	default:
		errs = append(errs, fmt.Errorf("%s.phase: must be Pending, Running, Succeeded, Failed or Unknown, got %q", path, p.Phase))
	}
	if p.NoStartTime && p.StartTime != nil {
		errs = append(errs, fmt.Errorf("%s.noStartTime: conflicts with startTime", path))
	}
	names := map[string]bool{}
	for i, c := range append(append([]Container{}, p.Containers...), p.InitContainers...) {
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("%s: container %d: name required", path, i))
		} else if names[c.Name] {
			errs = append(errs, fmt.Errorf("%s: duplicate container name %q", path, c.Name))
		}
		names[c.Name] = true
		if c.RestartPolicy != nil && *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			errs = append(errs, fmt.Errorf("%s: container %q: restartPolicy must be Always when set", path, c.Name))
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

func validateMetricValue(path string, t autoscalingv2.MetricSourceType, mv MetricValue) []error {
	var errs []error
	perPod := mv.PerPod != nil || mv.AllPods != nil || mv.Missing != nil
	switch t {
	case autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType, autoscalingv2.PodsMetricSourceType:
		if mv.Value != nil || mv.Series != nil {
			errs = append(errs, fmt.Errorf("%s: a %s metric takes perPod, allPods and missing, not value or series", path, t))
		}
	case autoscalingv2.ObjectMetricSourceType:
		if perPod || mv.Series != nil {
			errs = append(errs, fmt.Errorf("%s: an Object metric takes value, not perPod, allPods, missing or series", path))
		}
		if mv.Value == nil && mv.Error == "" {
			errs = append(errs, fmt.Errorf("%s.value: required for an Object metric (or give error)", path))
		}
	case autoscalingv2.ExternalMetricSourceType:
		if perPod {
			errs = append(errs, fmt.Errorf("%s: an External metric takes value or series, not perPod, allPods or missing", path))
		}
		if mv.Value != nil && mv.Series != nil {
			errs = append(errs, fmt.Errorf("%s: give value or series, not both", path))
		}
	}
	if mv.Age != nil && mv.Timestamp != nil {
		errs = append(errs, fmt.Errorf("%s: give age or timestamp, not both", path))
	}
	if mv.Window != nil && mv.Window.Duration < 0 {
		errs = append(errs, fmt.Errorf("%s.window: must not be negative", path))
	}
	return errs
}

// validateHistory checks the preloaded history: past times (not after the
// first step), positive counts, a known scaler phase.
func (s *Scenario) validateHistory() []error {
	h := s.History
	if h == nil {
		return nil
	}
	var errs []error
	first := time.Duration(0)
	if len(s.Steps) > 0 {
		first = s.Steps[0].At.Duration
	}
	for i, r := range h.Recommendations {
		p := fmt.Sprintf("history.recommendations[%d]", i)
		if r.At.Duration > first {
			errs = append(errs, fmt.Errorf("%s.at: must not be after the first step (%v), got %v", p, first, r.At.Duration))
		}
		if r.Replicas < 0 {
			errs = append(errs, fmt.Errorf("%s.replicas: must not be negative, got %d", p, r.Replicas))
		}
	}
	for _, ev := range []struct {
		name   string
		events []PastScaleEvent
	}{{"scaleUpEvents", h.ScaleUpEvents}, {"scaleDownEvents", h.ScaleDownEvents}} {
		for i, e := range ev.events {
			p := fmt.Sprintf("history.%s[%d]", ev.name, i)
			if e.At.Duration > first {
				errs = append(errs, fmt.Errorf("%s.at: must not be after the first step (%v), got %v", p, first, e.At.Duration))
			}
			if e.Change < 1 {
				errs = append(errs, fmt.Errorf("%s.change: must be at least 1, got %d", p, e.Change))
			}
		}
	}
	if sc := h.Scaler; sc != nil {
		switch scaletozero.Phase(sc.Phase) {
		case "", scaletozero.PhaseActive, scaletozero.PhaseScaledToZero, scaletozero.PhaseFallback:
			if sc.IdleSince != nil {
				errs = append(errs, fmt.Errorf("history.scaler.idleSince: only with phase Idle"))
			}
		case scaletozero.PhaseIdle:
			if sc.IdleSince == nil {
				errs = append(errs, fmt.Errorf("history.scaler.idleSince: required with phase Idle"))
			} else if sc.IdleSince.Duration > first {
				errs = append(errs, fmt.Errorf("history.scaler.idleSince: must not be after the first step (%v), got %v", first, sc.IdleSince.Duration))
			}
		default:
			errs = append(errs, fmt.Errorf("history.scaler.phase: must be Active, Idle, ScaledToZero or Fallback, got %q", sc.Phase))
		}
		if sc.Failures < 0 {
			errs = append(errs, fmt.Errorf("history.scaler.failures: must not be negative, got %d", sc.Failures))
		}
		if !scaletozero.Annotated(s.HPA.Annotations) {
			errs = append(errs, fmt.Errorf("history.scaler: the HPA carries no promscaler.io annotations"))
		}
	}
	return errs
}

// validateAnnotations reports the promscaler.io annotations the
// autoscaler would reject, each naming its annotation.
func (s *Scenario) validateAnnotations() []error {
	if !scaletozero.Annotated(s.HPA.Annotations) {
		return nil
	}
	h := s.HPA.DeepCopy()
	autoscaler.ApplyDefaults(h)
	_, problems := scaletozero.Parse(h)
	problems = append(problems, scaletozero.Unknown(h.Annotations)...)
	var errs []error
	for _, p := range problems {
		errs = append(errs, fmt.Errorf("hpa.metadata.annotations[%q]: %s", p.Annotation, p.Message))
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
			return 0, fmt.Errorf("%q: the HPA has no valid %s annotation", key, scaletozero.AnnotationActivationMetric)
		case a.HPAIndex >= 0:
			return a.HPAIndex, nil
		}
		return len(specs) - 1, nil
	}
	return resolveMetricKey(specs, key)
}
