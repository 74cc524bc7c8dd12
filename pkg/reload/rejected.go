package reload

import "github.com/prometheus/client_golang/prometheus"

// RejectedGauge returns promscaler_config_file_rejected{file}, registered on
// reg (or the one already there), for the other configuration sources (team
// rules ConfigMaps) to report on as the Watcher does for files.
func RejectedGauge(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	return rejectedGauge(reg)
}
