//go:build e2e && bench

package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/promscaler/promscaler/test/e2e/framework"
	"github.com/promscaler/promscaler/test/exporter"
)

// Environment variables that size the harness (defaults: the targets).
const (
	// EnvSeries is the number of generated series behind discovery (default
	// 1,000,000: 10 metrics × 100 namespaces × SERIES/1,000 pods).
	EnvSeries = "PROMSCALER_BENCH_SERIES"
	// EnvServePods is the number of pods of each serving namespace (default 100).
	EnvServePods = "PROMSCALER_BENCH_SERVE_PODS"
	// EnvBigPods is the number of pods of the `*` namespace (default 5,000).
	EnvBigPods = "PROMSCALER_BENCH_BIG_PODS"
	// EnvWorkers is the closed-loop concurrency (default 8); as many serving
	// namespaces are created, so the distinct-namespace run never coalesces.
	EnvWorkers = "PROMSCALER_BENCH_WORKERS"
	// EnvDuration is the length of each load run (default 10s).
	EnvDuration = "PROMSCALER_BENCH_DURATION"
	// EnvRelist is the discovery adapter's --metrics-relist-interval (default 30s).
	EnvRelist = "PROMSCALER_BENCH_RELIST"
	// EnvRelists is the number of relists measured per strategy (default 2).
	EnvRelists = "PROMSCALER_BENCH_RELISTS"
	// EnvRates lists the open-loop rates of the overhead runs (default "500,100").
	EnvRates = "PROMSCALER_BENCH_RATES"
	// EnvBurstPerConn is how many of BenchmarkCoalesce1000's requests share
	// one connection (default 100).
	EnvBurstPerConn = "PROMSCALER_BENCH_BURST_PER_CONN"
	// EnvStrategies lists the --discovery-strategy values to measure besides
	// the default (default: labels,grouped,series when the adapter has the flag).
	EnvStrategies = "PROMSCALER_BENCH_STRATEGIES"
	// EnvServingArgs adds flags to the serving adapter's command line
	// (space-separated), e.g. "--prometheus-coalesce-window=0" to measure
	// every sequential request with a query of its own.
	EnvServingArgs = "PROMSCALER_BENCH_SERVING_ARGS"
	// EnvAdapterEnv adds environment variables (space-separated k=v) to the
	// adapters' environment only, e.g. "GOGC=400" or "GODEBUG=gctrace=1"
	// (the load generator and Prometheus keep theirs).
	EnvAdapterEnv = "PROMSCALER_BENCH_ADAPTER_ENV"
	// EnvHTTP1, when set, makes the load generator talk keep-alive HTTP/1.1
	// to the adapter (a connection per request in flight) instead of HTTP/2.
	EnvHTTP1 = "PROMSCALER_BENCH_HTTP1"
	// EnvTimeline names a folder where BenchmarkOverhead writes each leg's
	// requests (result.writeTimeline).
	EnvTimeline = "PROMSCALER_BENCH_TIMELINE"
)

// Names of the harness's objects and series.
const (
	servingMetric = "bench_serving"
	bigNamespace  = "bench-big"
	podLabel      = "app"
	podLabelValue = "bench"
	// maxAge is the discovery adapters' --metrics-max-age: the backfilled
	// samples are 10 to 30 minutes old when Prometheus starts. None is
	// within the 5-minute lookback of an instant query, so the serving
	// queries read only the scraped series (see docs/performance.md).
	maxAge = time.Hour
)

func servingNamespace(i int) string { return fmt.Sprintf("bench-serve-%d", i) }
func servingPod(i int) string       { return fmt.Sprintf("pod-%04d", i) }

// settings are the harness sizes, from the environment.
type settings struct {
	series, servePods, bigPods, workers, relists int
	burstPerConn                                 int
	rates                                        []int
	duration, relist                             time.Duration
	servingArgs                                  []string
}

func loadSettings() settings {
	return settings{
		series:       envInt(EnvSeries, 1_000_000),
		servePods:    envInt(EnvServePods, 100),
		bigPods:      envInt(EnvBigPods, 5_000),
		workers:      envInt(EnvWorkers, 8),
		relists:      envInt(EnvRelists, 2),
		burstPerConn: envInt(EnvBurstPerConn, 100),
		rates:        envInts(EnvRates, []int{500, 100}),
		duration:     envDuration(EnvDuration, 10*time.Second),
		relist:       envDuration(EnvRelist, 30*time.Second),
		servingArgs:  servingArgs(strings.Fields(os.Getenv(EnvServingArgs))),
	}
}

// servingArgs are the serving adapter's extra flags: the serving
// benchmarks measure the per-request path (and compare it with the same
// query sent straight to Prometheus), so shared evaluation is off unless
// EnvServingArgs sets --shared-evaluation-max-age; BenchmarkHPAPeriods
// measures sharing.
func servingArgs(extra []string) []string {
	for _, a := range extra {
		if strings.HasPrefix(a, "--shared-evaluation-max-age") {
			return extra
		}
	}
	return append([]string{"--shared-evaluation-max-age=0"}, extra...)
}

// stack is the environment every benchmark shares: control plane,
// Prometheus on the backfilled TSDB scraping the exporter, the pods.
type stack struct {
	cfg      settings
	env      *framework.Env
	prom     *framework.Prometheus
	exporter *exporter.Exporter
	bulk     BulkSpec
	rules    string
	// adapterKubeconfig is the adapter's identity (its ServiceAccount's user).
	adapterKubeconfig string
	// admin talks to the adapter directly with the admin client certificate.
	admin *http.Client
	// promHC talks to Prometheus, asking for uncompressed answers as the
	// adapter does by default (--prometheus-compression=none): the raw
	// Prometheus legs of the serving benchmarks are then the adapter's own
	// request.
	promHC *http.Client
}

var (
	shared     *stack
	sharedErr  error
	sharedOnce sync.Once
)

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench %s: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// setup returns the shared stack, starting it on first use.
func setup(b *testing.B) *stack {
	b.Helper()
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		shared, sharedErr = startStack(ctx, loadSettings())
	})
	if sharedErr != nil {
		b.Fatalf("starting the bench stack: %v", sharedErr)
	}
	return shared
}

func TestMain(m *testing.M) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "bench: %v: stopping the environment\n", s)
		closeShared()
		os.Exit(130)
	}()
	code := m.Run()
	closeShared()
	os.Exit(code)
}

var (
	// liveEnv is the environment as soon as it exists, so an interrupt
	// during the set-up stops it too.
	liveEnv   atomic.Pointer[framework.Env]
	closeOnce sync.Once
)

func closeShared() {
	closeOnce.Do(func() {
		if e := liveEnv.Load(); e != nil {
			e.Close()
		}
	})
}

func startStack(ctx context.Context, cfg settings) (_ *stack, err error) {
	t0 := time.Now()
	progress("settings: %d series, %d serving namespaces of %d pods, %d pods in %s, runs of %s, serving adapter flags %q (load %s)",
		cfg.series, cfg.workers, cfg.servePods, cfg.bigPods, bigNamespace, cfg.duration, cfg.servingArgs, framework.LoadAvg())
	env, err := framework.Start(ctx, framework.Config{Logf: progress})
	if err != nil {
		return nil, err
	}
	liveEnv.Store(env)
	s := &stack{cfg: cfg, env: env}
	defer func() {
		if err != nil {
			env.Close()
		}
	}()
	if s.rules, err = filepath.Abs(filepath.Join("testdata", "rules.yaml")); err != nil {
		return nil, err
	}

	// 1. Bulk series: generate, backfill.
	pods := max(cfg.series/1000, 1)
	now := time.Now()
	s.bulk = BulkSpec{Metrics: 10, Namespaces: 100, Pods: pods,
		Times: []time.Time{now.Add(-30 * time.Minute), now.Add(-20 * time.Minute), now.Add(-10 * time.Minute)}}
	tsdb := filepath.Join(env.Dir, "tsdb")
	if err := backfill(ctx, env.Dir, tsdb, s.bulk); err != nil {
		return nil, err
	}

	// 2. The exporter of the serving gauges.
	s.exporter = exporter.New(nil)
	exporterAddr, stopExporter, err := s.exporter.Serve()
	if err != nil {
		return nil, fmt.Errorf("exporter: %w", err)
	}
	env.OnClose(stopExporter)
	var series []exporter.Series
	add := func(ns string, n int) {
		for i := range n {
			series = append(series, exporter.Series{Name: servingMetric,
				Labels: map[string]string{"namespace": ns, "pod": servingPod(i)}, Value: float64(1 + i%50)})
		}
	}
	for w := range cfg.workers {
		add(servingNamespace(w), cfg.servePods)
	}
	add(bigNamespace, cfg.bigPods)
	if err := s.exporter.Set(series...); err != nil {
		return nil, err
	}

	// 3. Prometheus on the backfilled TSDB, scraping the exporter.
	t1 := time.Now()
	s.prom, err = env.StartPrometheus(ctx, framework.PrometheusConfig{
		ScrapeInterval: 2 * time.Second,
		StoragePath:    tsdb,
		QueryLog:       true,
		Targets:        []framework.ScrapeTarget{{Job: "bench", Targets: []string{exporterAddr}, HonorLabels: true}},
	})
	if err != nil {
		return nil, err
	}
	progress("prometheus ready in %s", time.Since(t1).Round(time.Millisecond))
	s.promHC = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}, Timeout: 5 * time.Minute}
	if _, err := s.prom.WaitForQuery(ctx, `count(`+servingMetric+`)`, 1, time.Minute); err != nil {
		return nil, err
	}

	// 4. Namespaces and pods.
	if err := s.createPods(ctx); err != nil {
		return nil, err
	}

	// 5. The adapter's RBAC and identity; the admin client.
	if err := env.EnsureNamespace(ctx, framework.AdapterNamespace); err != nil {
		return nil, err
	}
	if _, err := env.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(env.RepoRoot, "deploy", "base", "rbac.yaml")); err != nil {
		return nil, fmt.Errorf("applying adapter RBAC: %w", err)
	}
	saUser := "system:serviceaccount:" + framework.AdapterNamespace + ":" + framework.AdapterServiceAccount
	if s.adapterKubeconfig, err = env.UserKubeconfig(saUser, "system:serviceaccounts", "system:serviceaccounts:"+framework.AdapterNamespace, "system:authenticated"); err != nil {
		return nil, err
	}
	if s.admin, err = adminClient(env.PKI.Admin); err != nil {
		return nil, err
	}
	progress("stack ready in %s (dir %s)", time.Since(t0).Round(time.Second), env.Dir)
	return s, nil
}

// backfill writes the spec as OpenMetrics into dir and turns it into TSDB
// blocks in tsdb with promtool.
func backfill(ctx context.Context, dir, tsdb string, spec BulkSpec) error {
	om := filepath.Join(dir, "bulk.om")
	t0 := time.Now()
	progress("generating %d series (%d samples) into %s", spec.Series(), spec.Series()*len(spec.Times), om)
	f, err := os.Create(om)
	if err != nil {
		return fmt.Errorf("creating %s: %w", om, err)
	}
	if err := WriteOpenMetrics(f, spec); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", om, err)
	}
	fi, _ := os.Stat(om)
	progress("generated %d MB in %s; backfilling with promtool", fi.Size()>>20, time.Since(t0).Round(time.Millisecond))
	t1 := time.Now()
	promtool := os.Getenv("PROMSCALER_PROMTOOL")
	if promtool == "" {
		promtool = "/usr/bin/promtool"
	}
	cmd := exec.CommandContext(ctx, promtool, "tsdb", "create-blocks-from", "openmetrics", om, tsdb)
	// Dies with the harness (an interrupt exits without cancelling ctx).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("promtool tsdb create-blocks-from openmetrics: %w: %s", err, lastLines(string(out), 20))
	}
	progress("backfilled in %s (promtool peak RSS %d MiB)", time.Since(t1).Round(time.Millisecond), maxRSSMiB(cmd.ProcessState))
	if err := os.Remove(om); err != nil {
		return fmt.Errorf("removing %s: %w", om, err)
	}
	return nil
}

func maxRSSMiB(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss >> 10
	}
	return 0
}

// createPods creates the serving namespaces and the big namespace with their
// pods (no status: the adapter lists pods from a metadata informer), with
// parallel creators and no client-side rate limit.
func (s *stack) createPods(ctx context.Context) error {
	rc := *s.env.RESTConfig
	rc.QPS, rc.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(&rc)
	if err != nil {
		return fmt.Errorf("pod creator client: %w", err)
	}
	type job struct{ ns, name string }
	jobs := make(chan job)
	var namespaces []string
	total := 0
	for w := range s.cfg.workers {
		namespaces = append(namespaces, servingNamespace(w))
		total += s.cfg.servePods
	}
	namespaces = append(namespaces, bigNamespace)
	total += s.cfg.bigPods
	for _, ns := range namespaces {
		if err := s.env.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	t0 := time.Now()
	tmpl := framework.PodTemplate(map[string]string{podLabel: podLabelValue})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
				pod.Name, pod.Namespace = j.name, j.ns
				_, err := cs.CoreV1().Pods(j.ns).Create(ctx, pod, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("creating pod %s/%s: %w", j.ns, j.name, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for w := range s.cfg.workers {
		for i := range s.cfg.servePods {
			jobs <- job{servingNamespace(w), servingPod(i)}
		}
	}
	for i := range s.cfg.bigPods {
		jobs <- job{bigNamespace, servingPod(i)}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	d := time.Since(t0)
	progress("created %d pods in %s (%.0f/s)", total, d.Round(time.Millisecond), float64(total)/d.Seconds())
	return nil
}
