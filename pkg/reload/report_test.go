package reload

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/rules"
)

// TestReloadReportsRejection: issue 21. A rejected file is reported once
// (Report: the Event on the adapter's Pod) and listed by Rejected (the
// readiness details) until a version of it is accepted.
func TestReloadReportsRejection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, ruleFile("queue_depth", "sum(<<.Series>>{<<.LabelMatchers>>})"))
	files, err := rules.Read([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{}
	if err := srv.apply(context.Background(), files, ""); err != nil {
		t.Fatal(err)
	}
	type report struct{ file, err string }
	var reports []report
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	w, err := New(Config{Sources: []string{path}, Apply: srv.apply, Metrics: metrics.New(), Clock: clk,
		Report: func(file string, err error) { reports = append(reports, report{file, err.Error()}) }})
	if err != nil {
		t.Fatal(err)
	}
	w.Prime(files)
	if got := w.Rejected(); len(got) != 0 {
		t.Fatalf("Rejected() at start = %+v, want none", got)
	}

	write(t, path, ruleFile("queue_depth", "sum(<<.Series>>{<<.LabelMatchers>>)"))
	_ = checkTwice(t, w)
	clk.Step(time.Minute)
	_ = checkTwice(t, w) // the same refused content: not reported again
	if len(reports) != 1 || reports[0].file != path || !strings.Contains(reports[0].err, "Prometheus would reject") ||
		!strings.Contains(reports[0].err, "previous version stays in service") {
		t.Fatalf("reports = %+v, want one for %s saying why and that the previous version serves", reports, path)
	}
	got := w.Rejected()
	if len(got) != 1 || got[0].File != path || got[0].Err != reports[0].err || !got[0].Since.Equal(time.Unix(1_700_000_000, 0)) {
		t.Errorf("Rejected() = %+v, want %s with the reported error since the rejection", got, path)
	}

	write(t, path, ruleFile("queue_depth", "max(<<.Series>>{<<.LabelMatchers>>})"))
	if err := checkTwice(t, w); err != nil {
		t.Fatal(err)
	}
	if got := w.Rejected(); len(got) != 0 {
		t.Errorf("Rejected() after the fix = %+v, want none", got)
	}
}
