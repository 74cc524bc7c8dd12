//go:build e2eengines

package engines

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

// lookback is every engine's lookback here (Prometheus' and Thanos'
// --query.lookback-delta, Cortex's -querier.lookback-delta,
// VictoriaMetrics' staleness interval): short, so that a series without
// staleness markers disappears without a maximum sample age within a test.
const lookback = 40 * time.Second

// engine is one running engine as the suite sees it.
type engine struct {
	name string
	// url and headers are the adapter's default backend.
	url     string
	headers map[string]string
	// backends is the --backends-config file's text ("" for none);
	// extraRules are appended to the suite's rules.
	backends, extraRules string
	// push are the remote write endpoints of the maximum sample age check.
	push []pushTarget
	// ageParam names the query parameter of the maximum sample age the
	// engine honours ("" when none).
	ageParam string
}

// pushTarget is a remote write endpoint and its headers.
type pushTarget struct {
	url     string
	headers map[string]string
}

// freeAddr returns 127.0.0.1:<a free port>.
func freeAddr(t *testing.T) (string, int) {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port), port
}

// startProcess starts a server and waits until readyURL answers 200.
func startProcess(t *testing.T, env *framework.Env, name, bin string, args []string, readyURL string) *framework.Process {
	t.Helper()
	p, err := env.StartProcess(name, bin, args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.WaitHTTP(ctx, p, readyURL, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return p
}

// thanos is the Thanos stack: two Prometheus replicas (external labels
// cluster="engines" and replica="a"/"b") scraping the exporter, a sidecar
// on each, and a querier deduplicating by replica with partial responses
// on (its default).
type thanos struct {
	engine
	proms    []*framework.Prometheus
	sidecars []*framework.Process
}

func startThanos(t *testing.T, env *framework.Env, exporterAddr string) *thanos {
	t.Helper()
	bin := requireTool(t, env, "thanos")
	th := &thanos{}
	var endpoints []string
	for _, replica := range []string{"a", "b"} {
		prom := env.MustStartPrometheus(t, framework.PrometheusConfig{
			Targets:        []framework.ScrapeTarget{{Job: "exporter", Targets: []string{exporterAddr}, HonorLabels: true}},
			ExternalLabels: map[string]string{"cluster": "engines", "replica": replica},
			ExtraArgs:      []string{"--web.enable-remote-write-receiver", "--query.lookback-delta=" + lookback.String()},
		})
		grpc, _ := freeAddr(t)
		http, _ := freeAddr(t)
		sc := startProcess(t, env, "thanos-sidecar-"+replica, bin, []string{"sidecar",
			"--prometheus.url=" + prom.URL, "--tsdb.path=" + t.TempDir(),
			"--grpc-address=" + grpc, "--http-address=" + http, "--log.level=warn",
		}, "http://"+http+"/-/ready")
		th.proms = append(th.proms, prom)
		th.sidecars = append(th.sidecars, sc)
		endpoints = append(endpoints, "--endpoint="+grpc)
		th.push = append(th.push, pushTarget{url: prom.URL + "/api/v1/write"})
	}
	grpc, _ := freeAddr(t)
	http, _ := freeAddr(t)
	args := append([]string{"query", "--grpc-address=" + grpc, "--http-address=" + http,
		"--query.replica-label=replica", "--query.lookback-delta=" + lookback.String(), "--log.level=warn",
	}, endpoints...)
	startProcess(t, env, "thanos-query", bin, args, "http://"+http+"/-/ready")
	th.name, th.url, th.ageParam = "thanos", "http://"+http, "lookback_delta"
	return th
}

// startVictoriaMetrics starts VictoriaMetrics single-node scraping the
// exporter itself (-promscrape.config), with a 1 s latency offset (30 s by
// default: fresher samples are not answered) and a 40 s staleness
// interval.
func startVictoriaMetrics(t *testing.T, env *framework.Env, exporterAddr string, extraArgs ...string) *engine {
	t.Helper()
	bin := requireTool(t, env, "victoria-metrics")
	scrape := writeFile(t, "vm-scrape.yaml", fmt.Sprintf(`global: {scrape_interval: 1s}
scrape_configs:
- job_name: exporter
  honor_labels: true
  static_configs: [{targets: [%q]}]
`, exporterAddr))
	addr, _ := freeAddr(t)
	startProcess(t, env, "victoria-metrics", bin, append([]string{
		"-storageDataPath=" + t.TempDir(), "-httpListenAddr=" + addr, "-retentionPeriod=1d",
		"-promscrape.config=" + scrape, "-search.latencyOffset=1s", "-search.disableCache",
		"-search.minStalenessInterval=" + lookback.String(), "-search.maxStalenessInterval=" + lookback.String(),
		"-loggerLevel=WARN",
	}, extraArgs...), "http://"+addr+"/health")
	return &engine{name: "victoriametrics", url: "http://" + addr, ageParam: "max_lookback",
		push: []pushTarget{{url: "http://" + addr + "/api/v1/write"}}}
}

// Cortex tenants.
const (
	tenantA = "tenant-a"
	tenantB = "tenant-b"
)

// cortexConfig is Cortex's single-process blocks configuration
// (docs/configuration/single-process-config-blocks-local.yaml of v1.21)
// with auth_enabled (tenants by X-Scope-OrgID) and the test's ports and
// directories.
const cortexConfig = `auth_enabled: true
server:
  http_listen_address: 127.0.0.1
  http_listen_port: %[1]d
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: %[2]d
  log_level: warn
distributor:
  shard_by_all_labels: true
  pool:
    health_check_ingesters: true
ingester:
  lifecycler:
    address: 127.0.0.1
    min_ready_duration: 0s
    final_sleep: 0s
    num_tokens: 512
    ring:
      kvstore:
        store: inmemory
      replication_factor: 1
querier:
  lookback_delta: %[4]s
  active_query_tracker_dir: %[3]s/active-query-tracker
blocks_storage:
  tsdb:
    dir: %[3]s/tsdb
  bucket_store:
    sync_dir: %[3]s/tsdb-sync
  backend: filesystem
  filesystem:
    dir: %[3]s/blocks
compactor:
  data_dir: %[3]s/compactor
  sharding_ring:
    kvstore:
      store: inmemory
frontend_worker:
  match_max_concurrent: true
ruler_storage:
  backend: local
  local:
    directory: %[3]s/rules
alertmanager_storage:
  backend: local
  local:
    path: %[3]s/alerts
alertmanager:
  external_url: http://localhost/alertmanager
  data_dir: %[3]s/alertmanager
ruler:
  rule_path: %[3]s/ruler
`

// startCortex starts Cortex in single-binary mode and one Prometheus per
// tenant remote-writing to it: tenant-a scrapes exporterA, tenant-b
// exporterB. The adapter's default backend is tenant-a; the backends file
// defines tenant-b.
func startCortex(t *testing.T, env *framework.Env, exporterA, exporterB string) *engine {
	t.Helper()
	bin := requireTool(t, env, "cortex")
	dir := t.TempDir()
	for _, d := range []string{"rules", "alerts"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	addr, httpPort := freeAddr(t)
	_, grpcPort := freeAddr(t)
	cfg := writeFile(t, "cortex.yaml", fmt.Sprintf(cortexConfig, httpPort, grpcPort, dir, lookback))
	startProcess(t, env, "cortex", bin, []string{"-config.file=" + cfg, "-target=all"}, "http://"+addr+"/ready")
	push := "http://" + addr + "/api/v1/push"
	e := &engine{name: "cortex", url: "http://" + addr + "/prometheus", headers: map[string]string{"X-Scope-OrgID": tenantA}}
	for tenant, x := range map[string]string{tenantA: exporterA, tenantB: exporterB} {
		h := map[string]string{"X-Scope-OrgID": tenant}
		env.MustStartPrometheus(t, framework.PrometheusConfig{
			Targets:     []framework.ScrapeTarget{{Job: "exporter", Targets: []string{x}, HonorLabels: true}},
			RemoteWrite: []framework.RemoteWrite{{URL: push, Headers: h}},
		})
	}
	e.push = []pushTarget{{url: push, headers: map[string]string{"X-Scope-OrgID": tenantA}}}
	// The query-frontend (part of -target=all) re-encodes an instant query
	// with time, query and stats only (pkg/querier/tripperware/
	// instantquery): lookback_delta and max_lookback never reach the
	// querier, which would honour lookback_delta (pkg/api/queryapi).
	e.ageParam = ""
	e.backends = fmt.Sprintf(`backends:
- name: %s
  url: %s
  headers:
    X-Scope-OrgID: %s
`, tenantB, e.url, tenantB)
	e.extraRules = `- name: tenant_b_jobs_total
  query: 'sum(eng_jobs_waiting)'
  backend: ` + tenantB + "\n"
	return e
}
