package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ScrapeTarget is one scrape job of the test's Prometheus.
type ScrapeTarget struct {
	// Job is the job_name.
	Job string
	// Targets are host:port addresses (on 127.0.0.1).
	Targets []string
	// MetricsPath defaults to /metrics.
	MetricsPath string
	// HonorLabels keeps the exporter's namespace/pod labels as they are.
	HonorLabels bool
}

// PrometheusConfig configures StartPrometheus.
type PrometheusConfig struct {
	// Binary defaults to $PROMSCALER_PROMETHEUS, else <tools>/prometheus (3.x).
	Binary string
	// ScrapeInterval defaults to 1s.
	ScrapeInterval time.Duration
	// Targets are the scrape jobs; SetTargets replaces them at runtime.
	Targets []ScrapeTarget
	// StoragePath is the TSDB directory (--storage.tsdb.path), e.g. one
	// filled beforehand by `promtool tsdb create-blocks-from`. Default: a
	// fresh directory in the working dir.
	StoragePath string
	// QueryLog writes every PromQL query Prometheus runs to
	// Prometheus.QueryLogFile (the global query_log_file setting).
	QueryLog bool
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// ExternalLabels are the global external_labels (a Thanos sidecar
	// needs some, and its querier deduplicates by one of them).
	ExternalLabels map[string]string
	// RemoteWrite are remote_write destinations (e.g. a Cortex tenant).
	RemoteWrite []RemoteWrite
}

// RemoteWrite is one remote_write destination of the test's Prometheus,
// sent every second.
type RemoteWrite struct {
	// URL is the receiver's endpoint (e.g. http://127.0.0.1:9009/api/v1/push).
	URL string
	// Headers are set on every request (e.g. X-Scope-OrgID).
	Headers map[string]string
}

// Prometheus is a Prometheus server run by the environment.
type Prometheus struct {
	// URL is http://127.0.0.1:<port>.
	URL string
	// Process is the server process.
	Process *Process
	// QueryLogFile is the query log (JSON lines), when PrometheusConfig.QueryLog is set.
	QueryLogFile string
	configFile   string
	interval     time.Duration
	hc           *http.Client
	external     map[string]string
	remoteWrite  []RemoteWrite
}

// StartPrometheus starts a Prometheus server on 127.0.0.1 with its own TSDB
// in the working dir and waits until it is ready.
func (e *Env) StartPrometheus(ctx context.Context, cfg PrometheusConfig) (*Prometheus, error) {
	return retryPortClash(func() (*Prometheus, error) { return e.startPrometheus(ctx, cfg) })
}

func (e *Env) startPrometheus(ctx context.Context, cfg PrometheusConfig) (*Prometheus, error) {
	bin := firstNonEmpty(cfg.Binary, os.Getenv(EnvPrometheus), e.Tool("prometheus"))
	if cfg.ScrapeInterval <= 0 {
		cfg.ScrapeInterval = time.Second
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	// One dir per instance: a test may run several Prometheus servers.
	dir := filepath.Join(e.Dir, "prometheus-"+strconv.Itoa(port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating prometheus dir: %w", err)
	}
	p := &Prometheus{
		URL:         fmt.Sprintf("http://127.0.0.1:%d", port),
		configFile:  filepath.Join(dir, "prometheus.yml"),
		interval:    cfg.ScrapeInterval,
		hc:          &http.Client{Timeout: 10 * time.Second},
		external:    cfg.ExternalLabels,
		remoteWrite: cfg.RemoteWrite,
	}
	if cfg.QueryLog {
		p.QueryLogFile = filepath.Join(dir, "query.log")
	}
	if err := p.writeConfig(cfg.Targets); err != nil {
		return nil, err
	}
	args := []string{
		"--config.file=" + p.configFile,
		"--storage.tsdb.path=" + firstNonEmpty(cfg.StoragePath, filepath.Join(dir, "data")),
		"--storage.tsdb.retention.time=1d",
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(port),
		"--web.enable-lifecycle",
		"--log.level=warn",
	}
	args = append(args, cfg.ExtraArgs...)
	if p.Process, err = e.start("prometheus", bin, args); err != nil {
		return nil, err
	}
	if err := e.waitFor(ctx, p.Process, "prometheus /-/ready", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, code, err := httpGet(ctx, p.hc, p.URL+"/-/ready")
		return err == nil && code == http.StatusOK, nil
	}); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Prometheus) writeConfig(targets []ScrapeTarget) error {
	type staticConfig struct {
		Targets []string `yaml:"targets"`
	}
	type scrapeConfig struct {
		JobName        string         `yaml:"job_name"`
		ScrapeInterval string         `yaml:"scrape_interval"`
		ScrapeTimeout  string         `yaml:"scrape_timeout"`
		MetricsPath    string         `yaml:"metrics_path,omitempty"`
		HonorLabels    bool           `yaml:"honor_labels,omitempty"`
		StaticConfigs  []staticConfig `yaml:"static_configs"`
	}
	type queueConfig struct {
		BatchSendDeadline string `yaml:"batch_send_deadline"`
	}
	type remoteWrite struct {
		URL         string            `yaml:"url"`
		Headers     map[string]string `yaml:"headers,omitempty"`
		QueueConfig queueConfig       `yaml:"queue_config"`
	}
	doc := struct {
		Global        map[string]any `yaml:"global"`
		ScrapeConfigs []scrapeConfig `yaml:"scrape_configs"`
		RemoteWrite   []remoteWrite  `yaml:"remote_write,omitempty"`
	}{Global: map[string]any{"scrape_interval": p.interval.String(), "evaluation_interval": p.interval.String()}}
	if len(p.external) > 0 {
		doc.Global["external_labels"] = p.external
	}
	for _, rw := range p.remoteWrite {
		doc.RemoteWrite = append(doc.RemoteWrite, remoteWrite{URL: rw.URL, Headers: rw.Headers, QueueConfig: queueConfig{BatchSendDeadline: "1s"}})
	}
	if p.QueryLogFile != "" {
		doc.Global["query_log_file"] = p.QueryLogFile
	}
	for _, t := range targets {
		doc.ScrapeConfigs = append(doc.ScrapeConfigs, scrapeConfig{
			JobName: t.Job, ScrapeInterval: p.interval.String(), ScrapeTimeout: p.interval.String(),
			MetricsPath: t.MetricsPath, HonorLabels: t.HonorLabels,
			StaticConfigs: []staticConfig{{Targets: t.Targets}},
		})
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding prometheus config: %w", err)
	}
	tmp := p.configFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing prometheus config: %w", err)
	}
	if err := os.Rename(tmp, p.configFile); err != nil {
		return fmt.Errorf("writing prometheus config: %w", err)
	}
	return nil
}

// SetTargets replaces the scrape jobs and reloads Prometheus.
func (p *Prometheus) SetTargets(ctx context.Context, targets []ScrapeTarget) error {
	if err := p.writeConfig(targets); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/-/reload", nil)
	if err != nil {
		return fmt.Errorf("reloading prometheus: %w", err)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return fmt.Errorf("reloading prometheus: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reloading prometheus: HTTP %d", resp.StatusCode)
	}
	return nil
}

// Sample is one element of an instant-vector query result.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant query and returns its vector result (a scalar
// result comes back as one sample without labels).
func (p *Prometheus) Query(ctx context.Context, query string) ([]Sample, error) {
	return QueryPrometheus(ctx, p.hc, p.URL, query)
}

// QueryPrometheus runs an instant query against any Prometheus URL.
func QueryPrometheus(ctx context.Context, hc *http.Client, baseURL, query string) ([]Sample, error) {
	form := url.Values{"query": {query}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(baseURL, "/")+"/api/v1/query", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: decoding response (HTTP %d): %w", query, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", query, body.Error)
	}
	switch body.Data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(body.Data.Result, &vec); err != nil {
			return nil, fmt.Errorf("query %q: decoding vector: %w", query, err)
		}
		out := make([]Sample, 0, len(vec))
		for _, s := range vec {
			v, err := parseSampleValue(s.Value[1])
			if err != nil {
				return nil, fmt.Errorf("query %q: %w", query, err)
			}
			out = append(out, Sample{Labels: s.Metric, Value: v})
		}
		return out, nil
	case "scalar":
		var sc [2]any
		if err := json.Unmarshal(body.Data.Result, &sc); err != nil {
			return nil, fmt.Errorf("query %q: decoding scalar: %w", query, err)
		}
		v, err := parseSampleValue(sc[1])
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", query, err)
		}
		return []Sample{{Value: v}}, nil
	default:
		return nil, fmt.Errorf("query %q: unsupported result type %q", query, body.Data.ResultType)
	}
}

func parseSampleValue(v any) (float64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("sample value %q: %w", s, err)
	}
	return f, nil
}

// WaitForQuery polls query until it returns at least min samples.
func (p *Prometheus) WaitForQuery(ctx context.Context, query string, min int, timeout time.Duration) ([]Sample, error) {
	var last []Sample
	var lastErr error
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		last, lastErr = p.Query(ctx, query)
		if lastErr == nil && len(last) >= min {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting %s for %d samples of %q: got %d (last error: %v)", timeout, min, query, len(last), lastErr)
		case <-tick.C:
		}
	}
}
