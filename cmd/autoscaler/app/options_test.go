package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/controller"
)

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return o
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // substrings, one per error, in order
	}{
		{name: "defaults", args: nil},
		{name: "kube-controller-manager style values", args: []string{
			"--horizontal-pod-autoscaler-sync-period=30s", "--concurrent-horizontal-pod-autoscaler-syncs=10",
			"--horizontal-pod-autoscaler-downscale-stabilization=0s", "--horizontal-pod-autoscaler-tolerance=0",
			"--feature-gates=HPAScaleToZero=false,HPAGeneration=true", "--mode=full", "--dry-run", "--dry-run-annotate",
			"--metrics-bind-address=0", "--leader-elect=false", "--leader-elect-renew-deadline=1h",
		}},
		{
			name: "every bad flag reported at once",
			args: []string{
				"--kubeconfig=/does/not/exist", "--kube-api-qps=0", "--kube-api-burst=0",
				"--horizontal-pod-autoscaler-sync-period=0", "--concurrent-horizontal-pod-autoscaler-syncs=0",
				"--horizontal-pod-autoscaler-downscale-stabilization=-1s", "--horizontal-pod-autoscaler-tolerance=-0.1",
				"--horizontal-pod-autoscaler-cpu-initialization-period=-1s", "--horizontal-pod-autoscaler-initial-readiness-delay=-1s",
				"--feature-gates=HPAFoo=true", "--api-request-timeout=0", "--dry-run-annotate", "--metrics-bind-address=localhost",
			},
			want: []string{
				"--kubeconfig: stat /does/not/exist",
				"--kube-api-qps 0: must be positive",
				"--kube-api-burst 0: must be at least 1",
				"--horizontal-pod-autoscaler-sync-period 0s: must be positive",
				"--concurrent-horizontal-pod-autoscaler-syncs 0: must be greater than 0",
				"--horizontal-pod-autoscaler-downscale-stabilization -1s: must not be negative",
				"--horizontal-pod-autoscaler-tolerance -0.1: must not be negative",
				"--horizontal-pod-autoscaler-cpu-initialization-period -1s: must not be negative",
				"--horizontal-pod-autoscaler-initial-readiness-delay -1s: must not be negative",
				`--feature-gates: unknown gate "HPAFoo"`,
				"--api-request-timeout 0s: must be positive",
				"--dry-run-annotate: needs --dry-run",
				`--metrics-bind-address "localhost"`,
			},
		},
		{
			name: "owned HPAs",
			args: []string{"--mode=full", "--hpa-selector=promscaler.io/controller=promscaler,tier!=batch", "--namespaces=team-a,team-b"},
		},
		{
			name: "bad mode, selector, namespaces",
			args: []string{"--mode=shadow", "--hpa-selector=a in (", "--namespaces=ok,Not_A_Namespace", "--leader-elect-fence-margin=15s"},
			want: []string{
				`--mode "shadow": want coexist or full`,
				`--hpa-selector "a in ("`,
				`--namespaces: "Not_A_Namespace"`,
				"--leader-elect-fence-margin 15s: must be less than --leader-elect-lease-duration 15s",
			},
		},
		{
			name: "dry run needs the full mode",
			args: []string{"--dry-run"},
			want: []string{"--dry-run: needs --mode=full"},
		},
		{
			name: "leader election durations",
			args: []string{"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=9s"},
			want: []string{
				"--leader-elect-lease-duration 10s: must be greater than --leader-elect-renew-deadline 10s",
				"--leader-elect-renew-deadline 10s: must be greater than 1.2 × --leader-elect-retry-period 9s",
			},
		},
		{
			name: "leader election lock",
			args: []string{"--leader-elect-resource-name=", "--leader-elect-resource-namespace=", "--leader-elect-retry-period=0"},
			want: []string{
				"--leader-elect-retry-period 0s: must be positive",
				"--leader-elect-resource-name: required with --leader-elect",
				"--leader-elect-resource-namespace: required with --leader-elect",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parse(t, tt.args...).Validate()
			var got []string
			for i, err := range errs {
				got = append(got, err.Error())
				if i < len(tt.want) && !strings.Contains(err.Error(), tt.want[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, err, tt.want[i])
				}
			}
			if len(errs) != len(tt.want) {
				t.Errorf("got %d errors, want %d:\n%s", len(errs), len(tt.want), strings.Join(got, "\n"))
			}
		})
	}
}

func TestConfig(t *testing.T) {
	o := parse(t, "--horizontal-pod-autoscaler-tolerance=0.05", "--horizontal-pod-autoscaler-downscale-stabilization=1m",
		"--horizontal-pod-autoscaler-cpu-initialization-period=2m", "--horizontal-pod-autoscaler-initial-readiness-delay=10s",
		"--feature-gates=HPAScaleToZero=false,PodLevelResources=false,StaleControllerConsistencyHPA=false", "--mode=full", "--dry-run",
		"--leader-elect-resource-name=hpa", "--leader-elect-resource-namespace=autoscaling")
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	core := autoscaler.DefaultConfig()
	core.Tolerance = 0.05
	core.DownscaleStabilizationWindow = time.Minute
	core.CPUInitializationPeriod = 2 * time.Minute
	core.InitialReadinessDelay = 10 * time.Second
	core.Features.ScaleToZero = false
	core.Features.PodLevelResources = false
	want := &Config{
		Mode: controller.ModeFull,
		QPS:  20, Burst: 30,
		Autoscaler:         core,
		SyncPeriod:         15 * time.Second,
		Workers:            5,
		RequestTimeout:     30 * time.Second,
		DryRun:             true,
		MetricsBindAddress: ":8080",
		LeaderElection: &LeaderElectionConfig{
			Name: "hpa", Namespace: "autoscaling",
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			FenceMargin: 2 * time.Second,
		},
	}
	if diff := cmp.Diff(want, cfg, cmpopts.IgnoreFields(LeaderElectionConfig{}, "Identity")); diff != "" {
		t.Errorf("Config (-want +got):\n%s", diff)
	}
	if id := cfg.LeaderElection.Identity; !strings.Contains(id, "_") || len(id) < 10 {
		t.Errorf("identity %q, want hostname_uuid", id)
	}
	other, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	if other.LeaderElection.Identity == cfg.LeaderElection.Identity {
		t.Error("two processes would share a leader election identity")
	}

	cfg, err = parse(t, "--leader-elect=false", "--metrics-bind-address=0").Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LeaderElection != nil || cfg.MetricsBindAddress != "" {
		t.Errorf("leader election %+v, bind address %q; want neither", cfg.LeaderElection, cfg.MetricsBindAddress)
	}
	if !cfg.StaleReadCheck {
		t.Error("StaleControllerConsistencyHPA is on by default in Kubernetes 1.37")
	}
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    string
		wantErrOut string
	}{
		{name: "help", args: []string{"--help"}, wantCode: 0, wantOut: "--horizontal-pod-autoscaler-sync-period duration"},
		{name: "help subcommand", args: []string{"help"}, wantCode: 0, wantOut: "autoscaler simulate -f SCENARIO"},
		{name: "unknown flag", args: []string{"--no-such-flag"}, wantCode: 2, wantErrOut: "unknown flag: --no-such-flag"},
		{name: "stray argument", args: []string{"simulat"}, wantCode: 2, wantErrOut: `unexpected argument "simulat"`},
		{
			name: "invalid flags", args: []string{"--horizontal-pod-autoscaler-sync-period=-1s", "--concurrent-horizontal-pod-autoscaler-syncs=-1"}, wantCode: 2,
			wantErrOut: "autoscaler: --horizontal-pod-autoscaler-sync-period -1s: must be positive\nautoscaler: --concurrent-horizontal-pod-autoscaler-syncs -1: must be greater than 0\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantOut) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tt.wantOut)
			}
			if !strings.Contains(stderr.String(), tt.wantErrOut) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.wantErrOut)
			}
		})
	}
}
