//go:build e2e && chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// Fault suite settings (environment):
//
//	PROMSCALER_CHAOS_RATE    requests per second through the aggregator (default 50)
//	PROMSCALER_CHAOS_FAULTS  comma-separated fault names to run (default: all)
//	PROMSCALER_CHAOS_HOLD    how long each timed fault lasts (default 20s)
//	PROMSCALER_CHAOS_ADAPTER_ARGS  more adapter flags (space-separated), for A/B runs
const (
	defaultRate = 50
	defaultHold = 20 * time.Second
	// settle is the quiet time after recovery before the "after" footprint.
	settle = 10 * time.Second
)

// fault is one row of the table.
type fault struct {
	name string
	// does says what the fault does, for docs/reliability.md.
	does string
	// inject runs the fault and returns when it ended (the moment the
	// system was put back) and notes for the table.
	inject func(t *testing.T, fx *faultRun) (end time.Time, notes string)
}

// faultRun is what an inject function works with.
type faultRun struct {
	s     *stack
	hold  time.Duration
	start time.Time
	ctx   context.Context
}

// row is one fault's figures.
type row struct {
	name, does    string
	start, end    time.Time
	w             window
	wrongAfter    int
	recovery      time.Duration
	recovered     bool
	exits         int
	probes        probeSummary
	before, after footprint
	notes         string
}

func (r row) restarts() int {
	n := r.exits
	if r.probes.kubeletRestart() {
		n++
	}
	return n
}

func TestFaults(t *testing.T) {
	rate := envInt("PROMSCALER_CHAOS_RATE", defaultRate)
	hold := defaultHold
	if v, err := time.ParseDuration(os.Getenv("PROMSCALER_CHAOS_HOLD")); err == nil && v > 0 {
		hold = v
	}
	var only []string
	if v := os.Getenv("PROMSCALER_CHAOS_FAULTS"); v != "" {
		only = strings.Split(v, ",")
	}
	setAdapterPod(t) // Events of config-emptied and config-bad-then-good
	s := startStack(t, stackOptions{rotation: true, adapterArgs: strings.Fields(os.Getenv("PROMSCALER_CHAOS_ADAPTER_ARGS"))})
	out := outDir(t, s)
	stamp := time.Now().UTC().Format("20060102-150405")
	table := filepath.Join(out, "faults-"+stamp+".md")
	probe := startProber(func() string { return s.adapter.URL })
	load := s.startLoad(rate, 0)
	time.Sleep(5 * time.Second)

	sc := &scoreboard{table: table, rate: rate, hold: hold}
	for _, f := range faults() {
		if len(only) > 0 && !slices.Contains(only, f.name) {
			continue
		}
		t.Run(f.name, func(t *testing.T) { sc.run(t, s, load, probe, f) })
	}
	load.close()
	probe.close()
	if len(only) == 0 || slices.Contains(only, replicaFaultName) {
		t.Run(replicaFaultName, func(t *testing.T) { replicaFault(t, s, sc) })
	}
	rows := sc.rows
	t.Logf("fault table %s:\n%s", table, faultTable(rows, rate, hold))
}

// scoreboard runs faults and keeps the table.
type scoreboard struct {
	table string
	rate  int
	hold  time.Duration
	rows  []row
}

// run injects f on s under load, waits for recovery and a quiet settle
// time, and records the row.
func (sc *scoreboard) run(t *testing.T, s *stack, load *loader, probe *prober, f fault) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := s.waitCorrect(ctx, 2*time.Minute); err != nil {
		t.Fatalf("before the fault: %v", err)
	}
	r := row{name: f.name, does: f.does, before: s.footprint(ctx, s.adapter)}
	pid := s.adapter.Process.Pid()
	fx := &faultRun{s: s, hold: sc.hold, ctx: ctx, start: time.Now()}
	r.start = fx.start
	r.end, r.notes = f.inject(t, fx)
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r.recovery, r.recovered = load.recovery(r.end); r.recovered {
			break
		}
	}
	time.Sleep(settle)
	if exited, _ := s.adapter.Process.Exited(); exited || s.adapter.Process.Pid() != pid {
		r.exits++
	}
	r.w = load.window(r.start, r.end)
	r.wrongAfter = load.window(r.end, time.Now()).wrong
	r.probes = probe.window(r.start, time.Now())
	r.after = s.footprint(ctx, s.adapter)
	sc.rows = append(sc.rows, r)
	t.Logf("%s: %s", f.name, r.line())
	if err := os.WriteFile(sc.table, []byte(faultTable(sc.rows, sc.rate, sc.hold)), 0o644); err != nil {
		t.Error(err)
	}
	if r.w.wrong+r.wrongAfter > 0 {
		t.Errorf("%s: %d wrong values; answers: %q", f.name, r.w.wrong+r.wrongAfter, r.w.wrongBodies)
	}
	if r.restarts() > 0 {
		t.Errorf("%s: %d restarts (process exits %d; %s)", f.name, r.restarts(), r.exits, r.probes)
	}
	if !r.recovered {
		t.Errorf("%s: no correct answer within 3 minutes after the fault ended", f.name)
	}
}

func (r row) line() string {
	return fmt.Sprintf("%d requests during the fault (ok %d, wrong %d, partial %d, errors %s), wrong after %d, recovery %v, restarts %d, %s, RSS %.1f->%.1f MiB, goroutines %d->%d; %s",
		r.w.total, r.w.ok, r.w.wrong, r.w.partial, r.w.errorText(), r.wrongAfter, r.recoveryText(), r.restarts(), r.probes,
		r.before.rss, r.after.rss, r.before.goroutines, r.after.goroutines, r.notes)
}

func (r row) recoveryText() string {
	if !r.recovered {
		return "none in 3 min"
	}
	return r.recovery.Round(10 * time.Millisecond).String()
}

func faultTable(rows []row, rate int, hold time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Fault suite run %s: %d req/s through the aggregator (custom and external metrics alternating), timed faults held %v; load average %s.\n\n",
		time.Now().UTC().Format(time.RFC3339), rate, hold, framework.LoadAvg())
	b.WriteString("| fault | lasted | requests in the fault | wrong values | errors during the fault | p99 / max latency in the fault | recovery | restarts | probes (1 s polls failed: livez / readyz) | RSS MiB before → after | goroutines before → after | notes |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %v | %d (ok %d, partial %d) | %d | %s | %v / %v | %s | %d | %d / %d | %.1f → %.1f | %s → %s | %s |\n",
			r.name, r.end.Sub(r.start).Round(100*time.Millisecond), r.w.total, r.w.ok, r.w.partial, r.w.wrong+r.wrongAfter, r.w.errorText(),
			r.w.p99.Round(time.Millisecond), r.w.maxLatency.Round(time.Millisecond),
			r.recoveryText(), r.restarts(), r.probes.liveFail, r.probes.readyFail, r.before.rss, r.after.rss, gor(r.before.goroutines), gor(r.after.goroutines), r.notes)
	}
	return b.String()
}

// faults lists the suite, in priority order.
func faults() []fault {
	fs := []fault{
		{name: "prometheus-paused", does: "Prometheus is stopped with SIGSTOP (connections stay open, nothing answers) for the hold time, then resumed with SIGCONT.",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				pid := fx.s.promPid()
				signal(t, pid, syscall.SIGSTOP)
				time.Sleep(fx.hold)
				signal(t, pid, syscall.SIGCONT)
				return time.Now(), ""
			}},
		{name: "prometheus-killed", does: "Prometheus is killed with SIGKILL, stays down for the hold time, and is started again on the same port and TSDB.",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				fx.s.killPrometheus(t)
				time.Sleep(fx.hold)
				up := fx.s.restartPrometheus(t, fx.ctx)
				return time.Now(), fmt.Sprintf("Prometheus ready again %v after its start", up.Round(100*time.Millisecond))
			}},
		{name: "prometheus-slow", does: "A proxy between the adapter and Prometheus delays every Prometheus request by 5 s for the hold time.",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				fx.s.proxy.set(slow, 5*time.Second)
				time.Sleep(fx.hold)
				fx.s.proxy.set(passThrough, 0)
				return time.Now(), ""
			}},
		{name: "prometheus-garbage", does: "The proxy answers every Prometheus request itself, 200 with a malformed body (truncated JSON, a non-number value, a sample without its value, the wrong result type, HTML, empty, binary): first each body alone (one custom and one external request each, to name the bodies that yield a wrong value), then all in rotation for the hold time.",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				kinds := fx.s.garbageByKind(fx.ctx)
				fx.s.proxy.set(garbage, 0)
				time.Sleep(fx.hold)
				fx.s.proxy.set(passThrough, 0)
				return time.Now(), kinds
			}},
		{name: "config-emptied", does: "The rules file is truncated to nothing (an accidentally emptied ConfigMap key) for the hold time, then the good file is put back (hot reload, --config-reload-interval=1s): the reload must be refused, every metric keep answering, and the refusal show in the log, promscaler_config_rules_emptied_total and a RulesEmptied Event.",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				writeFile(t, fx.s.rules, "")
				time.Sleep(fx.hold)
				res := fx.s.ask(fx.ctx, kindCustom)
				if !res.correct() {
					t.Errorf("after %v with the rules file emptied: status %d (err %q), want the rules in service to answer", fx.hold, res.status, res.err)
				}
				problems, eventNote := fx.s.checkRulesEmptied(fx.ctx)
				for _, p := range problems {
					t.Errorf("rules file emptied: %s", p)
				}
				writeFile(t, fx.s.rules, adapterRules)
				end := time.Now()
				time.Sleep(3 * time.Second)
				return end, fmt.Sprintf("after %v emptied: status %d; %s; %s", fx.hold, res.status, fx.s.metricsNote(fx.ctx, "promscaler_config_rules_emptied_total", "promscaler_config_reloads_total"), eventNote)
			}},
		{name: "config-bad-then-good", does: "The rules file is replaced by one whose metricsQuery Prometheus would reject (unbalanced brackets), kept for the hold time, then the good file is put back (hot reload, --config-reload-interval=1s).",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				writeFile(t, fx.s.rules, badRules)
				time.Sleep(fx.hold)
				writeFile(t, fx.s.rules, adapterRules)
				end := time.Now()
				time.Sleep(5 * time.Second) // two equal reads 1 s apart, then the swap
				return end, fx.s.reloadNote(fx.ctx) + " (5 s after the good file was back)"
			}},
		{name: "apiserver-restarted", does: "kube-apiserver is stopped (SIGTERM) and started again with the same flags; the load goes through it, so it sees the outage; the adapter must reconnect its informers and authentication.",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				down := fx.s.restartAPIServer(t, fx.ctx)
				return time.Now(), fmt.Sprintf("kube-apiserver down %v", down.Round(100*time.Millisecond))
			}},
	}
	fs = append(fs, autoscalerFaults(func(t *testing.T, s *stack) *autoscalers { return s.autoscalers(t) })...)
	fs = append(fs, []fault{
		{name: "h2-rapid-reset", does: "Four HTTP/2 connections to the adapter's own port (admin client certificate, so each stream reaches a handler) send HEADERS for the truth metric each followed at once by RST_STREAM(CANCEL), in batches of 100, for the hold time (CVE-2023-44487); the suite reconnects whenever the adapter closes a connection.",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				ctx, cancel := context.WithTimeout(fx.ctx, fx.hold)
				defer cancel()
				mid := make(chan int, 1)
				go func() { time.Sleep(fx.hold / 2); g, _ := fx.s.adapterGoroutines(fx.ctx, fx.s.adapter); mid <- g }()
				st, err := rapidReset(ctx, fmt.Sprintf("127.0.0.1:%d", fx.s.adapter.Port), kindCustom.path(), fx.s.rotationAdmin(), 4)
				if err != nil {
					t.Error(err)
					return time.Now(), err.Error()
				}
				return time.Now(), fmt.Sprintf("%d streams opened and reset on %d connections; the adapter sent %d GOAWAY, %d connections ended by it; adapter goroutines mid-attack %d",
					st.streams.Load(), st.conns.Load(), st.goaways.Load(), st.closed.Load(), <-mid)
			}},
		{name: "slowloris", does: "500 TLS connections to the adapter's port each send the start of an HTTP/1.1 request and one more header line every 5 s, never finishing, for 45 s (longer than the hold: the server's header timeout is what is measured).",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				ctx, cancel := context.WithTimeout(fx.ctx, max(fx.hold, 45*time.Second))
				defer cancel()
				mid := make(chan footprint, 1)
				go func() { time.Sleep(20 * time.Second); mid <- fx.s.footprint(fx.ctx, fx.s.adapter) }()
				closed, after, open := slowloris(ctx, fmt.Sprintf("127.0.0.1:%d", fx.s.adapter.Port), 500)
				m := <-mid
				return time.Now(), fmt.Sprintf("the adapter closed %d of 500 (median after %v), %d still open at the end; mid-attack RSS %.1f MiB, goroutines %d",
					closed, after.Round(100*time.Millisecond), open, m.rss, m.goroutines)
			}},
	}...)
	return append(fs, []fault{
		{name: "serving-cert-rotated", does: "The adapter's serving certificate and key files (--tls-cert-file, --tls-private-key-file) are replaced by a pair from another CA.",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				took, err := fx.s.rotateServing(t)
				if err != nil {
					t.Error(err)
					return time.Now(), err.Error()
				}
				time.Sleep(fx.hold) // the load runs on with the new certificate
				return time.Now(), fmt.Sprintf("new certificate served %v after the files changed; the row covers the hold time after it", took.Round(time.Millisecond))
			}},
		{name: "client-ca-rotated", does: "A new CA is added to the --client-ca-file bundle, then the old one removed: a client of the new CA must be served, one of the removed CA refused (401, or 403 as the anonymous user it falls back to).",
			inject: func(t *testing.T, fx *faultRun) (time.Time, string) {
				accepted, refused, err := fx.s.rotateClientCA(t, fx.ctx)
				if err != nil {
					t.Error(err)
					return time.Now(), err.Error()
				}
				time.Sleep(fx.hold)
				return time.Now(), fmt.Sprintf("new CA's client served %v after it was added; old CA's client refused (401/403) %v after it was removed; the row covers the hold time after it",
					accepted.Round(time.Millisecond), refused.Round(time.Millisecond))
			}},
	}...)
}

func signal(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("signal %v to %d: %v", sig, pid, err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// gor shows a goroutine count, "?" when /metrics could not be read.
func gor(n int) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}
