package reload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/rules"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// configMapDir lays out a directory the way the kubelet mounts a ConfigMap:
// <dir>/..<version>/config.yaml, <dir>/..data -> ..<version>,
// <dir>/config.yaml -> ..data/config.yaml. swap publishes a new version with
// the kubelet's atomic rename of a temporary symlink over ..data.
type configMapDir struct {
	t       *testing.T
	dir     string
	version int
	current string
}

func newConfigMapDir(t *testing.T, content string) *configMapDir {
	t.Helper()
	c := &configMapDir{t: t, dir: t.TempDir()}
	c.writeVersion(content)
	if err := os.Symlink(c.current, filepath.Join(c.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "config.yaml"), c.path()); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *configMapDir) path() string { return filepath.Join(c.dir, "config.yaml") }

func (c *configMapDir) writeVersion(content string) {
	c.version++
	c.current = "..2026_11_30_version_" + string(rune('a'+c.version))
	vdir := filepath.Join(c.dir, c.current)
	if err := os.Mkdir(vdir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vdir, "config.yaml"), []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

func (c *configMapDir) swap(content string) {
	old := c.current
	c.writeVersion(content)
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(c.current, tmp); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(c.dir, old)); err != nil {
		c.t.Fatal(err)
	}
}

// recorder is an ApplyFunc over one-file sets that accepts content not
// containing "invalid", recording the changed file's content.
type recorder struct {
	mu      sync.Mutex
	applied []string
	calls   int
}

func (r *recorder) apply(_ context.Context, files []rules.File, changed string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	for _, f := range files {
		if strings.Contains(string(f.Data), "invalid") {
			return errors.New("rules[0].seriesQuery: empty")
		}
	}
	for _, f := range files {
		if f.Path == changed {
			r.applied = append(r.applied, string(f.Data))
		}
	}
	return nil
}

func (r *recorder) snapshot() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.applied...), r.calls
}

func one(path, data string) []rules.File { return []rules.File{{Path: path, Data: []byte(data)}} }

func TestConfigMapSwap(t *testing.T) {
	cm := newConfigMapDir(t, "v1")
	m := metrics.New()
	rec := &recorder{}
	w, err := New(Config{Sources: []string{cm.path()}, Apply: rec.apply, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	w.Prime(one(cm.path(), "v1"))
	ctx := context.Background()

	type step struct {
		name        string
		do          func()
		wantApplied bool
		wantErr     bool
		wantSuccess float64 // last_reload_successful
	}
	steps := []step{
		{name: "unchanged", do: func() {}, wantSuccess: 1},
		{name: "valid swap", do: func() { cm.swap("v2") }, wantApplied: true, wantSuccess: 1},
		{name: "same again", do: func() {}, wantSuccess: 1},
		{name: "invalid swap is rejected", do: func() { cm.swap("invalid v3") }, wantErr: true, wantSuccess: 0},
		{name: "rejected content is not retried", do: func() {}, wantSuccess: 0},
		{name: "revert to the serving version", do: func() { cm.swap("v2") }, wantSuccess: 1},
		{name: "next valid version", do: func() { cm.swap("v4") }, wantApplied: true, wantSuccess: 1},
	}
	for _, s := range steps {
		s.do()
		// New content is applied on the second poll that sees it.
		if first, err := w.Check(ctx); first || err != nil {
			t.Errorf("%s: first Check = %v, %v; want nothing applied yet", s.name, first, err)
		}
		applied, err := w.Check(ctx)
		if applied != s.wantApplied || (err != nil) != s.wantErr {
			t.Errorf("%s: Check = %v, %v; want applied=%v err=%v", s.name, applied, err, s.wantApplied, s.wantErr)
		}
		if got := testutil.ToFloat64(m.ConfigLastReloadSuccessful); got != s.wantSuccess {
			t.Errorf("%s: last_reload_successful = %v, want %v", s.name, got, s.wantSuccess)
		}
	}
	applied, calls := rec.snapshot()
	if diff := cmp.Diff([]string{"v2", "v4"}, applied); diff != "" {
		t.Errorf("applied versions (-want +got):\n%s", diff)
	}
	if calls != 3 {
		t.Errorf("apply called %d times, want 3 (v2, invalid v3 once, v4)", calls)
	}
	if got := testutil.ToFloat64(m.ConfigReloads.WithLabelValues(metrics.OutcomeSuccess)); got != 2 {
		t.Errorf("successful reloads = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.ConfigReloads.WithLabelValues(metrics.OutcomeFailure)); got != 1 {
		t.Errorf("failed reloads = %v, want 1", got)
	}
}

func TestErrorMessageNamesFileAndCause(t *testing.T) {
	cm := newConfigMapDir(t, "v1")
	w, err := New(Config{Sources: []string{cm.path()}, Apply: (&recorder{}).apply, Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	w.Prime(one(cm.path(), "v1"))
	cm.swap("invalid")
	_, _ = w.Check(context.Background())
	_, err = w.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), cm.path()) || !strings.Contains(err.Error(), "rules[0].seriesQuery") ||
		!strings.Contains(err.Error(), "previous version stays in service") {
		t.Errorf("error %v does not name the file, the cause and the consequence", err)
	}
}

func TestMissingFileReportedOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	m := metrics.New()
	rec := &recorder{}
	w, err := New(Config{Sources: []string{path}, Apply: rec.apply, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	w.Prime(one(path, "v1"))
	for range 3 {
		if _, err := w.Check(context.Background()); err == nil {
			t.Fatal("want an error for a missing file")
		}
	}
	if got := testutil.ToFloat64(m.ConfigReloads.WithLabelValues(metrics.OutcomeFailure)); got != 1 {
		t.Errorf("failures = %v, want 1 for one persistent problem", got)
	}
	if err := os.WriteFile(path, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _ = w.Check(context.Background())
	if applied, err := w.Check(context.Background()); !applied || err != nil {
		t.Errorf("Check after the file came back = %v, %v", applied, err)
	}
}

func TestInPlaceEdit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	w, err := New(Config{Sources: []string{path}, Apply: rec.apply, Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	// Not primed: what is there is applied once it has been read twice.
	if applied, err := w.Check(context.Background()); applied || err != nil {
		t.Fatalf("first Check = %v, %v; want nothing applied yet", applied, err)
	}
	if applied, err := w.Check(context.Background()); !applied || err != nil {
		t.Fatalf("second Check = %v, %v", applied, err)
	}
	// Same size, same mtime granularity: only the content tells.
	if err := os.WriteFile(path, []byte("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _ = w.Check(context.Background())
	if applied, err := w.Check(context.Background()); !applied || err != nil {
		t.Fatalf("Check after an edit = %v, %v", applied, err)
	}
	applied, _ := rec.snapshot()
	if diff := cmp.Diff([]string{"v1", "v2"}, applied); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
}

func TestHalfWrittenFileIsNotApplied(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("v1")
	rec := &recorder{}
	w, err := New(Config{Sources: []string{path}, Apply: rec.apply, Metrics: metrics.New()})
	if err != nil {
		t.Fatal(err)
	}
	w.Prime(one(path, "v1"))
	ctx := context.Background()
	// An editor truncates, then writes: the poll in between sees "" (a
	// valid, empty configuration) and must not apply it.
	write("")
	_, _ = w.Check(ctx)
	write("v2 being wri")
	_, _ = w.Check(ctx)
	write("v2 being written")
	_, _ = w.Check(ctx)
	if applied, _ := rec.snapshot(); len(applied) != 0 {
		t.Fatalf("applied %q while the file was changing", applied)
	}
	if ok, err := w.Check(ctx); !ok || err != nil {
		t.Fatalf("settled content: Check = %v, %v", ok, err)
	}
	applied, _ := rec.snapshot()
	if diff := cmp.Diff([]string{"v2 being written"}, applied); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
}

func TestRunPollsOnTheClock(t *testing.T) {
	cm := newConfigMapDir(t, "v1")
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rec := &recorder{}
	w, err := New(Config{Sources: []string{cm.path()}, Apply: rec.apply, Metrics: metrics.New(), Clock: clk, Interval: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.Prime(one(cm.path(), "v1"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		w.Run(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()

	cm.swap("v2")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if applied, _ := rec.snapshot(); len(applied) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the swap was not applied by the polling loop")
		}
		// Ticks only once the loop is waiting on the ticker.
		if clk.HasWaiters() {
			clk.Step(5 * time.Second)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	m := metrics.New()
	apply := (&recorder{}).apply
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "no source", cfg: Config{Apply: apply, Metrics: m}},
		{name: "no apply", cfg: Config{Sources: []string{"x"}, Metrics: m}},
		{name: "no metrics", cfg: Config{Sources: []string{"x"}, Apply: apply}},
		{name: "negative interval", cfg: Config{Sources: []string{"x"}, Apply: apply, Metrics: m, Interval: -time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil {
				t.Error("New accepted a bad config")
			}
		})
	}
}
