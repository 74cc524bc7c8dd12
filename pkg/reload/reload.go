// Package reload watches the adapter's configuration sources (files and
// directories of files, as given to --config) and hands each new set of
// files to a callback. It polls the files' content (a hash of each), which
// follows a Kubernetes ConfigMap's atomic "..data" symlink swap as well as
// in-place edits, and needs no inotify. A change (a file edited, added to or
// removed from a directory) is applied once two consecutive polls see the
// same content, so a file caught half-written by a non-atomic edit is never
// applied.
//
// Each file is applied on its own: the callback receives every file in
// service with only that file changed. When it refuses the change, the
// file's previous version (its last good rules) stays in service, the
// failure is logged and counted once, and the other files are unaffected.
package reload

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/rules"
)

// DefaultInterval is the polling interval when Config.Interval is zero.
const DefaultInterval = 10 * time.Second

// ApplyFunc validates and installs a new set of configuration files (every
// file in service, in source order), in which only the file named changed
// differs from the set in service (it may be absent: removed). It returns
// an error, and changes nothing, when they are not a valid configuration.
type ApplyFunc func(ctx context.Context, files []rules.File, changed string) error

// Config configures a Watcher.
type Config struct {
	// Sources are the configuration files and directories (see
	// config.ListFiles), possibly symlinks into a ConfigMap volume.
	Sources []string
	// Interval between two reads of the files. Zero means DefaultInterval.
	Interval time.Duration
	// Apply receives each new set of files.
	Apply ApplyFunc
	// Metrics receives the reload counters. Required.
	Metrics *metrics.Metrics
	// Clock drives the polling. Nil means the real clock.
	Clock clock.WithTicker
	// Report, when set, is told of each failure as it is logged (a file
	// rejected or unreadable, a source that cannot be listed) and of a
	// reload that empties the rules (an error wrapping ErrRulesEmptied,
	// refused or allowed): the operator-visible report (an Event on the
	// adapter's Pod). file is "" for a source listing error.
	Report func(file string, err error)
	// AllowEmptyRules lets a reload take the configuration from some rules
	// to none (--allow-empty-rules-reload); without it such a reload is
	// refused. Either way it is logged, reported and counted. An empty
	// configuration at startup is always valid.
	AllowEmptyRules bool
}

// Rejection is a configuration file whose newest content is not in
// service: refused (its previous version serves) or unreadable.
type Rejection struct {
	// File is the file's path, "" for a source that cannot be listed.
	File string
	// Err says why; Since is when it was first reported.
	Err   string
	Since time.Time
}

// fileState is what the watcher knows of one file.
type fileState struct {
	data      []byte // content in service; nil when not in service
	inUse     bool
	pending   [sha256.Size]byte // content seen once, applied if seen again
	hasPend   bool
	rejected  [sha256.Size]byte // last content the callback refused
	hasRej    bool
	readErr   string // last read error reported, to report it once
	readSince time.Time
	rejErr    string // why the last rejected content was refused
	rejSince  time.Time
}

// Watcher polls configuration sources and applies new versions of their
// files.
type Watcher struct {
	sources  []string
	interval time.Duration
	apply    ApplyFunc
	metrics  *metrics.Metrics
	rejected *prometheus.GaugeVec
	emptied  *prometheus.CounterVec
	clock    clock.WithTicker

	allowEmpty bool
	// rulesInService counts the rules of the files in service; -1 when a
	// file in service does not parse (unknown).
	rulesInService int

	report    func(file string, err error)
	listSince time.Time

	mu      sync.Mutex
	order   []string // files in service, in source order
	files   map[string]*fileState
	listErr string
}

// rejectedGauge is promscaler_config_file_rejected{file}: 1 while the
// file's newest content is refused and its previous version serves.
func rejectedGauge(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "promscaler",
		Name:      "config_file_rejected",
		Help:      "1 while the newest content of a configuration file is refused (its previous version stays in service), else 0. Labels: file.",
	}, []string{"file"})
	if err := reg.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.GaugeVec); ok {
				return existing, nil
			}
		}
		return nil, fmt.Errorf("config reload: registering its metric: %w", err)
	}
	return g, nil
}

// New returns a Watcher for cfg. Call Prime with the files loaded at
// startup, then Run.
func New(cfg Config) (*Watcher, error) {
	if len(cfg.Sources) == 0 {
		return nil, errors.New("config reload: no configuration source")
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
	g, err := rejectedGauge(cfg.Metrics.Registry)
	if err != nil {
		return nil, err
	}
	e, err := emptiedCounter(cfg.Metrics.Registry)
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		sources: slices.Clone(cfg.Sources), interval: cfg.Interval, apply: cfg.Apply,
		metrics: cfg.Metrics, rejected: g, emptied: e, clock: cfg.Clock, files: map[string]*fileState{}, report: cfg.Report,
		allowEmpty: cfg.AllowEmptyRules,
	}
	if w.interval == 0 {
		w.interval = DefaultInterval
	}
	if w.clock == nil {
		w.clock = clock.RealClock{}
	}
	return w, nil
}

// Prime records files as the versions already in service (loaded at
// startup), so that the first poll does not apply them a second time.
func (w *Watcher) Prime(files []rules.File) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.order = w.order[:0]
	for _, f := range files {
		w.order = append(w.order, f.Path)
		w.files[f.Path] = &fileState{data: f.Data, inUse: true}
		w.rejected.WithLabelValues(f.Path).Set(0)
	}
	w.rulesInService = rulesOrUnknown(files)
	w.metrics.ConfigLastReloadSuccess.Set(float64(w.clock.Now().Unix()))
	w.metrics.ConfigLastReloadSuccessful.Set(1)
}

// Run polls the files every interval until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	klog.InfoS("Watching the configuration for changes", "sources", w.sources, "interval", w.interval)
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

// change is one settled change of one file: new content, or removal
// (data nil).
type change struct {
	path string
	data []byte
	sum  [sha256.Size]byte
}

// Check reads the sources once and applies, one file at a time, every
// change that the previous Check saw too (it is not being written). It
// reports whether something was applied, and the errors (listing, reading,
// applying) that occurred, joined. Errors are logged and counted here;
// callers need not log them again.
func (w *Watcher) Check(ctx context.Context) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()

	paths, err := config.ListFiles(w.sources)
	if err != nil {
		// A source is missing: keep everything in service.
		if err.Error() != w.listErr {
			w.listErr, w.listSince = err.Error(), w.clock.Now()
			w.fail("", err)
		}
		return false, err
	}
	w.listErr = ""

	var changes []change
	var errs []error
	listed := map[string]bool{}
	for _, p := range paths {
		listed[p] = true
		st := w.state(p)
		data, err := config.ReadFile(p)
		if err != nil {
			err = fmt.Errorf("reading configuration file %s: %w", p, err)
			if err.Error() != st.readErr {
				// Reported once per distinct problem, not on every poll.
				st.readErr, st.readSince = err.Error(), w.clock.Now()
				w.fail(p, err)
			}
			errs = append(errs, err)
			continue
		}
		st.readErr = ""
		if c, ok := w.settled(p, st, data); ok {
			changes = append(changes, c)
		}
	}
	// Files no longer listed (removed from a directory) leave service
	// once two polls agree.
	for _, p := range slices.Clone(w.order) {
		if !listed[p] {
			if c, ok := w.settled(p, w.files[p], nil); ok {
				changes = append(changes, c)
			}
		}
	}

	for p, st := range w.files {
		if !listed[p] && !st.inUse {
			// Gone before it was ever in service.
			delete(w.files, p)
			w.rejected.DeleteLabelValues(p)
		}
	}

	applied := false
	for _, c := range changes {
		if err := w.applyChange(ctx, c, paths); err != nil {
			errs = append(errs, err)
			continue
		}
		applied = true
	}
	if !w.anyRejected() {
		w.metrics.ConfigLastReloadSuccessful.Set(1)
	}
	return applied, errors.Join(errs...)
}

func (w *Watcher) state(p string) *fileState {
	st, ok := w.files[p]
	if !ok {
		st = &fileState{}
		w.files[p] = st
	}
	return st
}

// settled reports whether data (nil: the file is gone) is a change of the
// file that the previous poll saw too.
func (w *Watcher) settled(p string, st *fileState, data []byte) (change, bool) {
	var sum [sha256.Size]byte
	if data != nil {
		sum = sha256.Sum256(data)
	}
	inService := st.inUse && data != nil && sum == sha256.Sum256(st.data)
	switch {
	case inService || (!st.inUse && data == nil):
		// Unchanged, or reverted to the version in service after a
		// rejected edit: that file is current again.
		st.hasRej, st.hasPend = false, false
		w.rejected.WithLabelValues(p).Set(0)
		return change{}, false
	case st.hasRej && sum == st.rejected:
		return change{}, false
	case !st.hasPend || sum != st.pending:
		// First sight of this content: wait one poll for it to settle.
		st.pending, st.hasPend = sum, true
		return change{}, false
	}
	st.hasPend = false
	return change{path: p, data: data, sum: sum}, true
}

// applyChange offers the files in service with c applied; on success it
// is in service, else c's file keeps its previous version.
func (w *Watcher) applyChange(ctx context.Context, c change, listed []string) error {
	st := w.files[c.path]
	var next []rules.File
	var order []string
	// Files in service that are no longer listed stay until their own
	// removal is applied.
	candidates := slices.Clone(listed)
	for _, p := range w.order {
		if !slices.Contains(listed, p) {
			candidates = append(candidates, p)
		}
	}
	for _, p := range candidates {
		data := w.files[p].data
		inUse := w.files[p].inUse
		if p == c.path {
			data, inUse = c.data, c.data != nil
		}
		if inUse {
			next = append(next, rules.File{Path: p, Data: data})
			order = append(order, p)
		}
	}
	refuse, emptied := w.checkEmptied(next, c.path)
	var err error
	if refuse {
		err = emptied
	} else {
		err = w.apply(ctx, next, c.path)
	}
	if err != nil {
		st.rejected, st.hasRej = c.sum, true
		what := "new version of"
		if c.data == nil {
			what = "removal of"
		}
		err = fmt.Errorf("%s configuration file %s rejected, its previous version stays in service: %w", what, c.path, err)
		st.rejErr, st.rejSince = err.Error(), w.clock.Now()
		w.rejected.WithLabelValues(c.path).Set(1)
		w.fail(c.path, err)
		return err
	}
	st.data, st.inUse, st.hasRej, st.rejErr = c.data, c.data != nil, false, ""
	if c.data == nil {
		delete(w.files, c.path)
		w.rejected.DeleteLabelValues(c.path)
	} else {
		w.rejected.WithLabelValues(c.path).Set(0)
	}
	w.order = order
	w.rulesInService = rulesOrUnknown(next)
	if emptied != nil {
		klog.InfoS("WARNING: configuration reloaded without any rule", "file", c.path, "err", emptied)
		if w.report != nil {
			w.report(c.path, emptied)
		}
	}
	w.metrics.ConfigReloads.WithLabelValues(metrics.OutcomeSuccess).Inc()
	w.metrics.ConfigLastReloadSuccess.Set(float64(w.clock.Now().Unix()))
	klog.InfoS("Configuration reloaded", "file", c.path, "removed", c.data == nil, "sha256", fmt.Sprintf("%x", c.sum[:8]), "files", len(next))
	return nil
}

// rulesOrUnknown counts the rules of files, -1 when one does not parse.
func rulesOrUnknown(files []rules.File) int {
	n, ok := countRules(files)
	if !ok {
		return -1
	}
	return n
}

func (w *Watcher) anyRejected() bool {
	for _, st := range w.files {
		if st.hasRej || st.readErr != "" {
			return true
		}
	}
	return w.listErr != ""
}

func (w *Watcher) fail(file string, err error) {
	w.metrics.ConfigReloads.WithLabelValues(metrics.OutcomeFailure).Inc()
	w.metrics.ConfigLastReloadSuccessful.Set(0)
	klog.ErrorS(err, "Configuration reload failed", "file", file)
	if w.report != nil {
		w.report(file, err)
	}
}

// Rejected returns the files whose newest content is not in service
// (refused or unreadable) and a source listing error, in path order.
func (w *Watcher) Rejected() []Rejection {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Rejection
	if w.listErr != "" {
		out = append(out, Rejection{Err: w.listErr, Since: w.listSince})
	}
	for p, st := range w.files {
		switch {
		case st.readErr != "":
			out = append(out, Rejection{File: p, Err: st.readErr, Since: st.readSince})
		case st.hasRej:
			out = append(out, Rejection{File: p, Err: st.rejErr, Since: st.rejSince})
		}
	}
	slices.SortFunc(out, func(a, b Rejection) int { return strings.Compare(a.File, b.File) })
	return out
}
