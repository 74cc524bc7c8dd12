package server

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/reload"
	"github.com/promscaler/promscaler/pkg/rules"
)

// watchBackends sets s.backendsWatcher, the watcher of the
// --backends-config file (c.BackendsFile), when set and reloads are on: a
// changed file rebuilds the named backends (promclient.Backends.Reload,
// unchanged ones keep their clients and guards); a file that does not
// load keeps the backends in service and is reported as a rules file is
// (log, Event, promscaler_config_file_rejected{file}).
func (c *Config) watchBackends(s *Server, m *metrics.Metrics) error {
	if c.BackendsFile == "" || c.ConfigReloadInterval <= 0 || len(c.Backends) == 0 {
		return nil
	}
	paths, err := config.ListFiles([]string{c.BackendsFile})
	if err != nil || len(paths) != 1 {
		return fmt.Errorf("--backends-config %s: %v (want one file)", c.BackendsFile, err)
	}
	data, err := config.ReadFile(paths[0])
	if err != nil {
		return fmt.Errorf("--backends-config: %w", err)
	}
	var report func(string, error)
	if s.events != nil {
		report = s.events.configRejected
	}
	base := c.Backends[0]
	w, err := reload.New(reload.Config{
		Sources:  []string{c.BackendsFile},
		Interval: c.ConfigReloadInterval,
		Metrics:  m,
		Report:   report,
		Apply: func(_ context.Context, files []rules.File, _ string) error {
			if len(files) == 0 {
				return errors.New("the backends file is gone: the backends in service are kept")
			}
			named, err := promclient.ParseBackends(files[0].Data, files[0].Path, base)
			if err != nil {
				return err
			}
			added, changed, removed, err := s.backends.Reload(named)
			if err != nil {
				return err
			}
			klog.InfoS("Backends reloaded", "file", files[0].Path, "added", added, "changed", changed, "removed", removed)
			return nil
		},
	})
	if err != nil {
		return err
	}
	w.Prime([]rules.File{{Path: paths[0], Data: data}})
	s.backendsWatcher = w
	return nil
}
