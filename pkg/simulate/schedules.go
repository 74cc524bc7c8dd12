package simulate

import (
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/promscaler/promscaler/pkg/schedule"
)

// validateSchedules parses the scenario's schedules (the format of the
// adapter's --schedules-config) into s.schedules.
func (s *Scenario) validateSchedules() []error {
	if len(s.Schedules) == 0 {
		return nil
	}
	set, errs := schedule.Decode(s.Schedules)
	s.schedules = set
	return errs
}

// scheduleValue is what the adapter would serve for an External metric
// named after one of the scenario's schedules at now: its floor. ok is
// false for other metrics.
func (w *world) scheduleValue(spec autoscalingv2.MetricSpec, now time.Time) (resource.Quantity, bool) {
	if spec.External == nil {
		return resource.Quantity{}, false
	}
	sc := w.s.schedules.Get(spec.External.Metric.Name)
	if sc == nil || !sc.Allows(w.hpa.Namespace) {
		return resource.Quantity{}, false
	}
	return *resource.NewQuantity(int64(sc.Value(now)), resource.DecimalSI), true
}
