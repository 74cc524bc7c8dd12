//go:build e2e && chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// Prometheus restart suite settings (environment):
//
//	PROMSCALER_CHAOS_RESTART_RATE  requests per second through the aggregator (default 200)
const defaultRestartRate = 200

// maxRestartRecovery is the longest the adapter may take, after Prometheus
// is ready again, to answer correctly: one probe period of the backend's
// breaker (DefaultBreakerOpen) plus the load's own latency.
const maxRestartRecovery = 2500 * time.Millisecond

// restartRow is one outage's figures.
type restartRow struct {
	outage, startup, recovery time.Duration
	recovered                 bool
	during, after             window
}

// TestPrometheusRestarts kills Prometheus (SIGKILL) for 15 s and for 40 s
// under load, with the adapter querying it directly: while it is down the
// adapter's connections are refused, exactly as in a cluster when the
// Prometheus pod restarts (the fault suite's proxy would turn that into a
// 502). It measures how long after Prometheus is ready again the adapter
// answers correctly.
func TestPrometheusRestarts(t *testing.T) {
	rate := envInt("PROMSCALER_CHAOS_RESTART_RATE", defaultRestartRate)
	s := startStack(t, stackOptions{direct: true, adapterArgs: strings.Fields(os.Getenv("PROMSCALER_CHAOS_ADAPTER_ARGS"))})
	table := filepath.Join(outDir(t, s), "restarts-"+time.Now().UTC().Format("20060102-150405")+".md")
	load := s.startLoad(rate, 0)
	defer load.close()
	time.Sleep(5 * time.Second)

	var rows []restartRow
	for _, outage := range []time.Duration{15 * time.Second, 40 * time.Second} {
		t.Run(fmt.Sprintf("down-%v", outage), func(t *testing.T) {
			r := s.restartOnce(t, load, outage)
			rows = append(rows, r)
			t.Logf("outage %v: Prometheus ready %v after its start; recovery after ready %s; %d requests during the outage (errors %s), %d after ready (ok %d, errors %s)",
				outage, r.startup.Round(100*time.Millisecond), r.recoveryText(), r.during.total, r.during.errorText(), r.after.total, r.after.ok, r.after.errorText())
			if err := os.WriteFile(table, []byte(restartTable(rows, rate)), 0o644); err != nil {
				t.Error(err)
			}
			switch {
			case !r.recovered:
				t.Errorf("no correct answer within 2 minutes after Prometheus was ready again")
			case r.recovery > maxRestartRecovery:
				t.Errorf("first correct answer %v after Prometheus was ready again, want at most %v", r.recovery, maxRestartRecovery)
			}
			// A metric known before the outage is unavailable while
			// Prometheus is down, never unknown: no 404 (issue 32: 61-88
			// in the second after a 15 s outage, discovery believing the
			// restarted Prometheus' empty answers).
			if n := r.during.errors["404"] + r.after.errors["404"]; n > 0 {
				t.Errorf("%d requests for a metric known before the outage answered 404", n)
			}
			if r.during.wrong+r.after.wrong > 0 {
				t.Errorf("%d wrong values: %q", r.during.wrong+r.after.wrong, r.during.wrongBodies)
			}
		})
	}
	t.Logf("restart table %s:\n%s", table, restartTable(rows, rate))
}

// restartOnce kills Prometheus, keeps it down for outage, starts it again
// (same port and TSDB) and waits for the first correct answer after it is
// ready.
func (s *stack) restartOnce(t *testing.T, load *loader, outage time.Duration) restartRow {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := s.waitCorrect(ctx, 2*time.Minute); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	r := restartRow{outage: outage}
	start := time.Now()
	s.killPrometheus(t)
	time.Sleep(outage)
	r.startup = s.restartPrometheus(t, ctx)
	ready := time.Now()
	for deadline := ready.Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if r.recovery, r.recovered = load.recovery(ready); r.recovered {
			break
		}
	}
	time.Sleep(2 * time.Second)
	r.during = load.window(start, ready)
	r.after = load.window(ready, ready.Add(r.recovery+time.Second))
	return r
}

func (r restartRow) recoveryText() string {
	if !r.recovered {
		return "none in 2 min"
	}
	return r.recovery.Round(10 * time.Millisecond).String()
}

func restartTable(rows []restartRow, rate int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Prometheus restart run %s: %d req/s through the aggregator (custom and external metrics alternating), the adapter querying Prometheus directly (connections refused while it is down); load average %s.\n\n",
		time.Now().UTC().Format(time.RFC3339), rate, framework.LoadAvg())
	b.WriteString("| Prometheus down | its start until ready | requests while down or starting | errors | recovery after ready (first correct answer) | requests in the recovery + 1 s | errors there |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %v | %v | %d | %s | %s | %d (ok %d) | %s |\n", r.outage, r.startup.Round(100*time.Millisecond),
			r.during.total, r.during.errorText(), r.recoveryText(), r.after.total, r.after.ok, r.after.errorText())
	}
	return b.String()
}
