package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// testRules is a rules file for the flag tests, which only check that it
// exists.
const testRules = "rules: []\n"

func TestValidateReportsEveryBadFlag(t *testing.T) {
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(rulesFile, []byte(testRules), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string // substrings, one per expected error, in order
	}{
		{name: "valid", args: []string{"--config=" + rulesFile}},
		{
			name: "everything wrong at once",
			args: []string{
				"--secure-port=70000",
				"--prometheus-url=localhost:9090",
				"--prometheus-verb=PATCH",
				"--prometheus-header=no-equals-sign",
				"--metrics-relist-interval=0s",
				"--metrics-max-age=-1m",
				"--config-reload-interval=-5s",
				"--client-cert-verify-cache-ttl=-1s",
				"--gc-heap-floor=lots",
				"--client-qps=-1",
			},
			want: []string{
				"--secure-port",
				"--prometheus-url", "--prometheus-verb", "--prometheus-header[0]",
				"--config: required",
				"--metrics-relist-interval", "--metrics-max-age", "--config-reload-interval", "--client-cert-verify-cache-ttl", `--gc-heap-floor: "lots"`, "--client-qps",
			},
		},
		{
			name: "negative heap floor",
			args: []string{"--config=" + rulesFile, "--gc-heap-floor=-1Mi"},
			want: []string{`--gc-heap-floor: "-1Mi": must not be negative (0 leaves GOGC alone)`},
		},
		{
			name: "fractional bytes",
			args: []string{"--config=" + rulesFile, "--gc-heap-floor=1.5"},
			want: []string{`--gc-heap-floor: "1.5": not a whole number of bytes`},
		},
		{
			name: "heap floor off",
			args: []string{"--config=" + rulesFile, "--gc-heap-floor=0"},
		},
		{
			name: "max age below the relist interval",
			args: []string{"--config=" + rulesFile, "--metrics-relist-interval=5m", "--metrics-max-age=1m"},
			want: []string{"--metrics-max-age 1m0s: must not be less than --metrics-relist-interval 5m0s"},
		},
		{
			name: "unknown discovery strategy",
			args: []string{"--config=" + rulesFile, "--discovery-strategy=fast"},
			want: []string{`--discovery-strategy: unknown discovery strategy "fast" (want labels, grouped or series)`},
		},
		{
			name: "every discovery strategy is accepted",
			args: []string{"--config=" + rulesFile, "--discovery-strategy=series"},
		},
		{
			name: "config is missing or a directory",
			args: []string{"--config=" + dir},
			want: []string{"is a directory"},
		},
		{
			name: "config does not exist",
			args: []string{"--config=" + filepath.Join(dir, "nope.yaml")},
			want: []string{"--config: stat"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewServerOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, err := range o.Validate() {
				got = append(got, err.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("error %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}

func TestValidateWithoutFlags(t *testing.T) {
	// Options used programmatically, without a flag set, validate too.
	o := NewServerOptions()
	errs := o.Validate()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "--config: required") {
		t.Errorf("Validate on defaults = %v, want only the missing --config", errs)
	}
}

func TestRunServerReportsFlagErrorsAndExits(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runServer([]string{"--prometheus-verb=PATCH", "--metrics-relist-interval=0s"}, &stdout, &stderr)
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	for _, want := range []string{"--prometheus-verb", "--metrics-relist-interval", "--config: required"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	stderr.Reset()
	if code := runServer([]string{"--no-such-flag"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "no-such-flag") {
		t.Errorf("unknown flag: exit %d, stderr %q", code, stderr.String())
	}
}

func TestFlagsKeepPrometheusAdapterArgs(t *testing.T) {
	// A prometheus-adapter Deployment's args, as kube-prometheus ships them.
	args := []string{
		"--cert-dir=/var/run/serving-cert",
		"--config=/etc/adapter/config.yaml",
		"--metrics-relist-interval=1m",
		"--prometheus-url=http://prometheus-k8s.monitoring.svc:9090/",
		"--secure-port=6443",
		"--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
		"--prometheus-auth-incluster",
		"--prometheus-ca-file=/etc/ssl/ca.crt",
		"--prometheus-token-file=/var/run/token",
		"--prometheus-header=X-Scope-OrgID=tenant",
		"--prometheus-verb=POST",
		"--metrics-max-age=5m",
		"--lister-kubeconfig=/etc/kubeconfig",
		"--authentication-kubeconfig=/etc/kubeconfig",
		"--authorization-kubeconfig=/etc/kubeconfig",
		"--disable-http2",
		"--v=2",
		"--audit-log-path=-",
	}
	o := NewServerOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("prometheus-adapter args rejected: %v", err)
	}
	if o.MaxAge != 5*time.Minute || o.RelistInterval != time.Minute || !o.DisableHTTP2 || o.Prometheus.Verb != "POST" {
		t.Errorf("parsed %+v", o)
	}
}
