package app

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/pkg/schedule"
	"github.com/promscaler/promscaler/pkg/server"
)

// addScheduleFlags registers --schedules-config.
func (o *ServerOptions) addScheduleFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SchedulesFile, "schedules-config", o.SchedulesFile,
		"File of named schedules (time windows with a replica floor, docs/autoscaler.md#schedules), each served as an external metric of its name whose value is the floor now. Read at start.")
}

// validateSchedules reports a --schedules-config that cannot be read or
// parsed, each problem with its line.
func (o *ServerOptions) validateSchedules() []error {
	if o.SchedulesFile == "" {
		return nil
	}
	if _, err := loadSchedules(o.SchedulesFile); err != nil {
		return []error{fmt.Errorf("--schedules-config: %w", err)}
	}
	return nil
}

func loadSchedules(path string) (*schedule.Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return schedule.Parse(path, data)
}

// scheduleProviders is the providers factory serving the schedules in
// front of the default providers' external metrics; nil (the default
// providers) without --schedules-config.
func (o *ServerOptions) scheduleProviders() (server.ProvidersFactory, error) {
	if o.SchedulesFile == "" {
		return nil, nil
	}
	set, err := loadSchedules(o.SchedulesFile)
	if err != nil {
		return nil, fmt.Errorf("--schedules-config: %w", err)
	}
	klog.InfoS("Serving schedules as external metrics", "file", o.SchedulesFile, "schedules", set.Names())
	return func(c *server.Config, deps server.ProviderDeps) (*server.Providers, error) {
		p, err := server.DefaultProviders(c, deps)
		if err != nil {
			return nil, err
		}
		p.External = &schedule.External{Next: p.External, Set: set, Clock: clock.RealClock{}}
		p.Ours = oursAlso(p.Ours, func(metric string) bool { return set.Get(metric) != nil })
		return p, nil
	}, nil
}
