package framework

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// MemMiB returns a field of /proc/<pid>/status (VmRSS: resident set, VmHWM:
// its peak) in MiB.
func MemMiB(pid int, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading memory of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %s of %d: %w", field, pid, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// LoadAvg is the 1, 5 and 15 minute load averages, as uptime prints them.
func LoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Get fetches url with hc and returns the body and the status.
func Get(ctx context.Context, hc *http.Client, url string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

// AutoscalerLeads reports whether the autoscaler serving metricsURL says
// (promscaler_autoscaler_leader 1) that it is the active controller.
func AutoscalerLeads(ctx context.Context, metricsURL string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if sc.Text() == "promscaler_autoscaler_leader 1" {
			return true
		}
	}
	return false
}

// StartCommand runs argv (binary first) as a process of the environment,
// its output in the log dir under name: for tests that start a server
// again with the command line it had (Process.Args). Close stops it.
func (e *Env) StartCommand(name string, argv []string) (*Process, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("starting %s: empty command line", name)
	}
	return e.start(name, argv[0], argv[1:])
}
