package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	kdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/rules"
)

// Exit codes of the tools.
const (
	exitOK    = 0
	exitFail  = 1 // invalid configuration, metric not served, Prometheus error
	exitUsage = 2 // bad flags
)

// maxSeriesFile bounds what --series reads.
const maxSeriesFile = 1 << 30

// toolIO carries a tool's output streams.
type toolIO struct {
	stdout, stderr io.Writer
}

func (t toolIO) errorf(format string, args ...any) {
	fmt.Fprintf(t.stderr, format+"\n", args...)
}

// parseToolFlags parses args, reporting problems on stderr. It returns
// false (and the exit code) when the tool must stop.
func parseToolFlags(fs *pflag.FlagSet, args []string, t toolIO) (int, bool) {
	fs.SetOutput(t.stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		t.errorf("%s: unexpected arguments: %s", fs.Name(), strings.Join(fs.Args(), " "))
		return exitUsage, false
	}
	return 0, true
}

// newMapper returns the built-in RESTMapper, or the cluster's (API
// discovery) when kubeconfig is set.
func newMapper(kubeconfig string) (meta.RESTMapper, error) {
	if kubeconfig == "" {
		return kubemapper.New(), nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.Timeout = 30 * time.Second
	dc, err := kdiscovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: discovering the cluster's resources: %w", err)
	}
	return restmapper.NewDiscoveryRESTMapper(groups), nil
}

// loadedRules is what loadRules found.
type loadedRules struct {
	configs []*config.Config
	set     *rules.RuleSet
	// warnings and queryErrors count what was printed.
	warnings, queryErrors int
}

// loadRules loads, validates and compiles the configuration sources (files
// and directories, as the adapter's --config), printing every error and
// warning on stderr, each naming its file, line and rule. ok is false when
// the configuration is invalid. A query Prometheus would reject is printed
// as an error but does not make ok false (the adapter loads such a file).
func loadRules(sources []string, mapper meta.RESTMapper, t toolIO) (*loadedRules, bool) {
	files, err := rules.Read(sources)
	if err != nil {
		t.errorf("%v", err)
		return nil, false
	}
	// The backend keys are checked against --backends-config by
	// checkBackends, which says which file it read.
	loaded, err := rules.Load(files, rules.Options{Mapper: mapper, AnyBackend: true})
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			t.errorf("%s", line)
		}
		return nil, false
	}
	out := &loadedRules{configs: loaded.Configs, set: loaded.Set}
	for _, w := range loaded.Warnings {
		t.errorf("warning: %s", w)
		out.warnings++
	}
	for _, e := range loaded.QueryErrors {
		t.errorf("error: %s", e)
		out.queryErrors++
	}
	return out, true
}

// readSeries reads a saved Prometheus /api/v1/series answer: the whole
// response body or its "data" array.
func readSeries(path string) ([]model.LabelSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--series: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSeriesFile+1))
	if err != nil {
		return nil, fmt.Errorf("--series %s: %w", path, err)
	}
	if len(data) > maxSeriesFile {
		return nil, fmt.Errorf("--series %s: larger than %d bytes", path, maxSeriesFile)
	}
	return parseSeries(data, path)
}

func parseSeries(data []byte, path string) ([]model.LabelSet, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("--series %s: empty file (want a /api/v1/series response or its data array)", path)
	}
	var sets []model.LabelSet
	switch trimmed[0] {
	case '[':
		if err := json.Unmarshal(trimmed, &sets); err != nil {
			return nil, fmt.Errorf("--series %s: %w", path, describeJSONError(trimmed, err))
		}
	case '{':
		var body struct {
			Status string            `json:"status"`
			Error  string            `json:"error"`
			Data   *[]model.LabelSet `json:"data"`
		}
		if err := json.Unmarshal(trimmed, &body); err != nil {
			return nil, fmt.Errorf("--series %s: %w", path, describeJSONError(trimmed, err))
		}
		if body.Status == "error" {
			return nil, fmt.Errorf("--series %s: the saved response is a Prometheus error: %s", path, body.Error)
		}
		if body.Data == nil {
			return nil, fmt.Errorf("--series %s: no \"data\" array (want a /api/v1/series response or its data array)", path)
		}
		sets = *body.Data
	default:
		return nil, fmt.Errorf("--series %s: not JSON (want a /api/v1/series response or its data array)", path)
	}
	for i, ls := range sets {
		if _, ok := ls[model.MetricNameLabel]; !ok {
			return nil, fmt.Errorf("--series %s: series %d (%s) has no __name__ label", path, i, ls)
		}
	}
	return sets, nil
}

// describeJSONError adds the line of a JSON syntax error.
func describeJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("line %d: %w", line, err)
	}
	return err
}
