package app

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/promscaler/promscaler/pkg/discovery"
	"github.com/promscaler/promscaler/pkg/promclient"
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
		// parseErr: the flag's value is refused when parsed (a substring).
		parseErr string
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
				"--client-qps=-1",
			},
			want: []string{
				"--secure-port",
				"--prometheus-url", "--prometheus-verb", "--prometheus-header[0]",
				"--config: required",
				"--metrics-relist-interval", "--metrics-max-age", "--config-reload-interval", "--client-cert-verify-cache-ttl", "--client-qps",
			},
		},
		{
			name: "the retired heap floor flag is accepted",
			args: []string{"--config=" + rulesFile, "--gc-heap-floor=128Mi"},
		},
		{
			name: "max age below the relist interval",
			args: []string{"--config=" + rulesFile, "--metrics-relist-interval=5m", "--metrics-max-age=1m"},
			want: []string{"--metrics-max-age 1m0s: must not be less than --metrics-relist-interval 5m0s"},
		},
		{
			name:     "unknown discovery strategy",
			args:     []string{"--config=" + rulesFile, "--discovery-strategy=fast"},
			parseErr: `invalid argument "fast" for "--discovery-strategy" flag: unknown discovery strategy "fast" (want labels, grouped or series)`,
		},
		{
			name: "every discovery strategy is accepted",
			args: []string{"--config=" + rulesFile, "--discovery-strategy=series"},
		},
		{
			name: "config is a directory of rules files",
			args: []string{"--config=" + dir},
		},
		{
			name: "config given several times",
			args: []string{"--config=" + rulesFile, "--config=" + dir, "--strict"},
		},
		{
			name: "config missing",
			args: []string{"--strict"},
			want: []string{"--config: required"},
		},
		{
			name: "team rules in two namespaces",
			args: []string{"--config=" + rulesFile, "--team-rules", "--team-rules-namespaces=team-a,team-b", "--team-rules-namespace-label=kubernetes_namespace"},
		},
		{
			name: "team rules flags wrong",
			args: []string{"--config=" + rulesFile, "--team-rules-namespaces=team-a,Team_B", "--team-rules-namespace-label=__name__"},
			want: []string{"--team-rules-namespaces: needs --team-rules", "--team-rules-namespace-label", `--team-rules-namespaces: "Team_B"`},
		},
		{
			name: "team limits set",
			args: []string{"--config=" + rulesFile, "--team-rules", "--team-rules-max-metrics-per-rule=20", "--team-rules-max-waiting=5", "--team-rules-max-rules-per-configmap=10", "--team-rules-max-configmaps=3"},
		},
		{
			name: "team limits wrong",
			args: []string{"--config=" + rulesFile, "--team-rules", "--team-rules-max-rules-per-configmap=0", "--team-rules-max-configmaps=-1", "--team-rules-max-metrics-per-rule=0", "--team-rules-max-waiting=-2", "--team-rules-max-in-flight=-1"},
			want: []string{"--team-rules-max-rules-per-configmap 0: must be at least 1", "--team-rules-max-configmaps -1: must be at least 1",
				"--team-rules-max-metrics-per-rule 0: must be at least 1", "--team-rules-max-in-flight -1: must not be negative (0: no bound per team)",
				"--team-rules-max-waiting -2: must not be negative (0: no bound per team"},
		},
		{
			name: "team bounds switched off, the backend's waiting bound too",
			args: []string{"--config=" + rulesFile, "--team-rules", "--team-rules-max-in-flight=0", "--team-rules-max-waiting=0", "--prometheus-max-waiting=0"},
		},
		{
			name:     "team waiting bound not a number",
			args:     []string{"--config=" + rulesFile, "--team-rules-max-waiting=some"},
			parseErr: `invalid argument "some" for "--team-rules-max-waiting" flag`,
		},
		{
			name: "team waiting bound above the backend's",
			args: []string{"--config=" + rulesFile, "--team-rules", "--prometheus-max-waiting=8", "--team-rules-max-waiting=9"},
			want: []string{"--team-rules-max-waiting 9: must not be more than --prometheus-max-waiting (8)"},
		},
		{
			name: "team waiting bound without the backend's",
			args: []string{"--config=" + rulesFile, "--team-rules", "--prometheus-max-waiting=0", "--team-rules-max-waiting=4"},
			want: []string{"--team-rules-max-waiting 4: needs a --prometheus-max-waiting bound"},
		},
		{
			name: "shared evaluation off, or its age bound at most a minute",
			args: []string{"--config=" + rulesFile, "--shared-evaluation-max-age=0", "--shared-evaluation-max-age=1m"},
		},
		{
			name: "shared evaluation age bound out of range",
			args: []string{"--config=" + rulesFile, "--shared-evaluation-max-age=2m"},
			want: []string{"--shared-evaluation-max-age 2m0s: must be 0 (sharing off) or between 1s and 1m0s"},
		},
		{
			name: "shared evaluation age bound negative",
			args: []string{"--config=" + rulesFile, "--shared-evaluation-max-age=-1s"},
			want: []string{"--shared-evaluation-max-age -1s"},
		},
		{
			name: "shared evaluation age bound under a second",
			args: []string{"--config=" + rulesFile, "--shared-evaluation-max-age=500ms"},
			want: []string{"--shared-evaluation-max-age 500ms"},
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
			if err := fs.Parse(tc.args); tc.parseErr != "" || err != nil {
				if err == nil || !strings.Contains(err.Error(), tc.parseErr) {
					t.Fatalf("Parse: %v, want %q", err, tc.parseErr)
				}
				return
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

// --shared-evaluation-max-age reaches the provider's configuration; 0
// turns sharing off.
func TestSharedEvaluationFlag(t *testing.T) {
	tests := []struct {
		args         []string
		wantMaxAge   time.Duration
		wantDisabled bool
	}{
		{args: nil, wantMaxAge: 15 * time.Second},
		{args: []string{"--shared-evaluation-max-age=30s"}, wantMaxAge: 30 * time.Second},
		{args: []string{"--shared-evaluation-max-age=0"}, wantDisabled: true},
	}
	for _, tc := range tests {
		o := NewServerOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		got := o.sharedConfig()
		if got.MaxAge != tc.wantMaxAge || got.Disabled != tc.wantDisabled {
			t.Errorf("%v: MaxAge %v, Disabled %t; want %v, %t", tc.args, got.MaxAge, got.Disabled, tc.wantMaxAge, tc.wantDisabled)
		}
	}
}

// The team limits' flags reach the discovery options and every backend's
// guard, the backends file's entries too, at startup and when the file is
// reloaded over the default backend. The team bounds follow the other guard
// flags: 0 switches a bound off (GuardConfig's -1); --team-rules-max-in-flight
// defaults to DefaultMaxConcurrentPerTeam; --team-rules-max-waiting not given
// leaves GuardConfig's 0, a quarter of each backend's own waiting bound.
func TestTeamLimitFlags(t *testing.T) {
	const file = "backends:\n- name: thanos\n  url: http://thanos:9090\n  max_waiting: 8\n"
	backendsFile := filepath.Join(t.TempDir(), "backends.yaml")
	if err := os.WriteFile(backendsFile, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	type guard struct {
		Backend                                             string
		MaxWaiting, MaxWaitingPerTeam, MaxConcurrentPerTeam int
	}
	// both is the guards of the default backend and of thanos with the
	// given team bounds.
	both := func(waitingPerTeam, concurrentPerTeam int) []guard {
		return []guard{
			{Backend: promclient.DefaultBackendName, MaxWaiting: promclient.DefaultMaxWaiting, MaxWaitingPerTeam: waitingPerTeam, MaxConcurrentPerTeam: concurrentPerTeam},
			{Backend: "thanos", MaxWaiting: 8, MaxWaitingPerTeam: waitingPerTeam, MaxConcurrentPerTeam: concurrentPerTeam},
		}
	}
	const derived, none = 0, -1 // GuardConfig's readings
	tests := []struct {
		name        string
		args        []string
		wantMetrics int
		want        []guard
	}{
		{name: "not given: the defaults, the waiting bound derived per backend", wantMetrics: discovery.DefaultMaxTeamRuleMetrics,
			want: both(derived, promclient.DefaultMaxConcurrentPerTeam)},
		{name: "given", args: []string{"--team-rules-max-metrics-per-rule=20", "--team-rules-max-waiting=6", "--team-rules-max-in-flight=3"}, wantMetrics: 20,
			want: both(6, 3)},
		{name: "0 switches both off", args: []string{"--team-rules-max-waiting=0", "--team-rules-max-in-flight=0"}, wantMetrics: discovery.DefaultMaxTeamRuleMetrics,
			want: both(none, none)},
		{name: "0 switches the in-flight bound off, the waiting bound derived", args: []string{"--team-rules-max-in-flight=0"}, wantMetrics: discovery.DefaultMaxTeamRuleMetrics,
			want: both(derived, none)},
		{name: "0 switches the waiting bound off, the in-flight bound's default", args: []string{"--team-rules-max-waiting=0"}, wantMetrics: discovery.DefaultMaxTeamRuleMetrics,
			want: both(none, promclient.DefaultMaxConcurrentPerTeam)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewServerOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--backends-config=" + backendsFile}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if got := o.Discovery.MaxTeamRuleMetrics; got != tc.wantMetrics {
				t.Errorf("MaxTeamRuleMetrics %d, want %d", got, tc.wantMetrics)
			}
			backends, err := o.backends()
			if err != nil {
				t.Fatal(err)
			}
			// The backends file reloaded (pkg/server's watchBackends) over
			// the default backend.
			reloaded, err := promclient.ParseBackends([]byte(file), backendsFile, backends[0])
			if err != nil {
				t.Fatal(err)
			}
			guards := func(bs []promclient.Backend) []guard {
				var out []guard
				for _, b := range bs {
					out = append(out, guard{Backend: b.Name, MaxWaiting: b.Guard.MaxWaiting, MaxWaitingPerTeam: b.Guard.MaxWaitingPerTeam, MaxConcurrentPerTeam: b.Guard.MaxConcurrentPerTeam})
				}
				return out
			}
			if diff := cmp.Diff(tc.want, guards(backends)); diff != "" {
				t.Errorf("backends' guards (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want[1:], guards(reloaded)); diff != "" {
				t.Errorf("the backends file's guards when reloaded (-want +got):\n%s", diff)
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
	if o.Discovery.MaxAge != 5*time.Minute || o.Discovery.Interval != time.Minute || !o.DisableHTTP2 || o.Prometheus.Default.Verb != "POST" {
		t.Errorf("parsed %+v", o)
	}
}

// TestCommunityChartArgv parses the container args the prometheus-community
// prometheus-adapter Helm chart renders (a leading program path, klog
// flags, the serving and Prometheus flags), with and without its tls
// values, and checks the options they set.
func TestCommunityChartArgv(t *testing.T) {
	rulesFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(rulesFile, []byte(testRules), 0o644); err != nil {
		t.Fatal(err)
	}
	chart := []string{
		"/adapter",
		"--secure-port=6443",
		"--cert-dir=/tmp/cert",
		"--logtostderr=true",
		"--prometheus-url=http://prometheus.default.svc:9090/",
		"--metrics-relist-interval=1m",
		"--v=4",
		"--config=" + rulesFile,
	}
	type parsed struct {
		Port                  int
		CertDir, Cert, Key    string
		PrometheusURL         string
		Relist                time.Duration
		Config                string
		V, LogToStderr, Flush string
	}
	tests := []struct {
		name string
		args []string
		want parsed
	}{
		{
			name: "defaults",
			args: chart,
			want: parsed{Port: 6443, CertDir: "/tmp/cert", PrometheusURL: "http://prometheus.default.svc:9090/", Relist: time.Minute, Config: rulesFile, V: "4", LogToStderr: "true", Flush: "5s"},
		},
		{
			name: "tls.enable",
			args: append(slices.Clone(chart), "--tls-cert-file=/var/run/serving-cert/tls.crt", "--tls-private-key-file=/var/run/serving-cert/tls.key"),
			want: parsed{Port: 6443, CertDir: "/tmp/cert", Cert: "/var/run/serving-cert/tls.crt", Key: "/var/run/serving-cert/tls.key", PrometheusURL: "http://prometheus.default.svc:9090/", Relist: time.Minute, Config: rulesFile, V: "4", LogToStderr: "true", Flush: "5s"},
		},
		{
			name: "more klog flags, either word separator",
			args: append(slices.Clone(chart), "--vmodule=server=5", "--log-flush-frequency=2s", "--log_file_max_size=10", "--log-dir=/tmp", "--alsologtostderr=false", "--v=2"),
			want: parsed{Port: 6443, CertDir: "/tmp/cert", PrometheusURL: "http://prometheus.default.svc:9090/", Relist: time.Minute, Config: rulesFile, V: "2", LogToStderr: "true", Flush: "2s"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			o, code, ok := parseServerFlags(withoutProgramPath(tc.args), io.Discard, &stderr)
			if !ok {
				t.Fatalf("rejected (exit %d): %s", code, stderr.String())
			}
			// klog's verbosity and component-base's flush frequency are
			// process-wide: put them back.
			t.Cleanup(func() {
				_ = o.flags.Set("v", "0")
				_ = o.flags.Set("log-flush-frequency", "5s")
			})
			ss := o.Base.SecureServing
			got := parsed{
				Port: ss.BindPort, CertDir: ss.ServerCert.CertDirectory,
				Cert: ss.ServerCert.CertKey.CertFile, Key: ss.ServerCert.CertKey.KeyFile,
				PrometheusURL: o.Prometheus.Default.URL, Relist: o.Discovery.Interval, Config: strings.Join(o.ConfigFiles, ","),
				V: o.flags.Lookup("v").Value.String(), LogToStderr: o.flags.Lookup("logtostderr").Value.String(),
				Flush: o.flags.Lookup("log-flush-frequency").Value.String(),
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBadArgumentsExit2 checks that an argument the adapter does not know
// still exits 2 with a message naming it, the program path aside.
func TestBadArgumentsExit2(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "positional after the program path", args: []string{"/adapter", "serve"}, want: `unexpected argument "serve"`},
		{name: "positional without it", args: []string{"serve", "--v=1"}, want: `unexpected argument "serve"`},
		{name: "unknown flag", args: []string{"/adapter", "--prometheus-urls=http://x"}, want: "unknown flag: --prometheus-urls"},
		{name: "bad value", args: []string{"/adapter", "--v=lots"}, want: `"lots" for "-v, --v"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.want)
			}
		})
	}
}
