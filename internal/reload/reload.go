// Package reload watches the adapter's configuration file and hands each new
// version to a callback. It polls the file's content (a hash of it), which
// follows a Kubernetes ConfigMap's atomic "..data" symlink swap as well as
// in-place edits, and needs no inotify. A new version is applied once two
// consecutive polls read the same content, so a file caught half-written by
// a non-atomic edit is never applied. A version the callback rejects is
// logged and counted once; the previously applied configuration stays in
// service until a valid version appears.
package reload

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/internal/metrics"
)

// DefaultInterval is the polling interval when Config.Interval is zero.
const DefaultInterval = 10 * time.Second

// ApplyFunc validates and installs a new version of the configuration file.
// It returns an error, and changes nothing, when data is not a valid
// configuration.
type ApplyFunc func(ctx context.Context, data []byte) error

// Config configures a Watcher.
type Config struct {
	// Path is the configuration file (possibly a symlink into a ConfigMap
	// volume's "..data" directory).
	Path string
	// Interval between two reads of the file. Zero means DefaultInterval.
	Interval time.Duration
	// Apply receives each new version of the file.
	Apply ApplyFunc
	// Metrics receives the reload counters. Required.
	Metrics *metrics.Metrics
	// Clock drives the polling. Nil means the real clock.
	Clock clock.WithTicker
}

// Watcher polls a configuration file and applies new versions.
type Watcher struct {
	path     string
	interval time.Duration
	apply    ApplyFunc
	metrics  *metrics.Metrics
	clock    clock.WithTicker

	mu       sync.Mutex
	applied  [sha256.Size]byte // content currently in service
	primed   bool
	rejected [sha256.Size]byte // last content the callback refused
	pending  [sha256.Size]byte // new content seen once, applied if seen again
	hasPend  bool
	readErr  string // last read error reported, to report it once
}

// New returns a Watcher for cfg. Call Prime with the content loaded at
// startup, then Run.
func New(cfg Config) (*Watcher, error) {
	if cfg.Path == "" {
		return nil, errors.New("config reload: no file path")
	}
	if cfg.Apply == nil {
		return nil, errors.New("config reload: no apply function")
	}
	if cfg.Metrics == nil {
		return nil, errors.New("config reload: no metrics")
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("config reload: negative interval %v", cfg.Interval)
	}
	w := &Watcher{path: cfg.Path, interval: cfg.Interval, apply: cfg.Apply, metrics: cfg.Metrics, clock: cfg.Clock}
	if w.interval == 0 {
		w.interval = DefaultInterval
	}
	if w.clock == nil {
		w.clock = clock.RealClock{}
	}
	return w, nil
}

// Prime records data as the version already in service (loaded at startup),
// so that the first poll does not apply it a second time.
func (w *Watcher) Prime(data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applied, w.primed = sha256.Sum256(data), true
	w.metrics.ConfigLastReloadSuccess.Set(float64(w.clock.Now().Unix()))
	w.metrics.ConfigLastReloadSuccessful.Set(1)
}

// Run polls the file every interval until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	klog.InfoS("Watching the configuration file for changes", "path", w.path, "interval", w.interval)
	t := w.clock.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			_, _ = w.Check(ctx)
		}
	}
}

// Check reads the file once. When its content differs from the version in
// service and from the last rejected one, and the previous Check read the
// same content (it is not being written), it applies it. It reports whether
// a new version was applied, and the error (read or apply) if one occurred.
// Errors are logged and counted here; callers need not log them again.
func (w *Watcher) Check(ctx context.Context) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()

	data, err := os.ReadFile(w.path)
	if err != nil {
		err = fmt.Errorf("reading configuration file %s: %w", w.path, err)
		if err.Error() != w.readErr {
			// Reported once per distinct problem, not on every poll.
			w.readErr = err.Error()
			w.fail(err)
		}
		return false, err
	}
	w.readErr = ""

	sum := sha256.Sum256(data)
	switch {
	case w.primed && sum == w.applied:
		// Unchanged, or reverted to the version in service after a
		// rejected edit: the serving configuration is current again.
		w.rejected, w.hasPend = [sha256.Size]byte{}, false
		w.metrics.ConfigLastReloadSuccessful.Set(1)
		return false, nil
	case sum == w.rejected:
		return false, nil
	case !w.hasPend || sum != w.pending:
		// First sight of this content: wait one poll for it to settle.
		w.pending, w.hasPend = sum, true
		return false, nil
	}
	w.hasPend = false

	if err := w.apply(ctx, data); err != nil {
		w.rejected = sum
		err = fmt.Errorf("new configuration in %s rejected, the previous one stays in service: %w", w.path, err)
		w.fail(err)
		return false, err
	}
	w.applied, w.primed, w.rejected = sum, true, [sha256.Size]byte{}
	w.metrics.ConfigReloads.WithLabelValues(metrics.OutcomeSuccess).Inc()
	w.metrics.ConfigLastReloadSuccessful.Set(1)
	w.metrics.ConfigLastReloadSuccess.Set(float64(w.clock.Now().Unix()))
	klog.InfoS("Configuration reloaded", "path", w.path, "sha256", fmt.Sprintf("%x", sum[:8]))
	return true, nil
}

func (w *Watcher) fail(err error) {
	w.metrics.ConfigReloads.WithLabelValues(metrics.OutcomeFailure).Inc()
	w.metrics.ConfigLastReloadSuccessful.Set(0)
	klog.ErrorS(err, "Configuration reload failed", "path", w.path)
}
