package bench

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEnvSettings(t *testing.T) {
	t.Setenv("BENCH_TEST_INT", " 7")
	t.Setenv("BENCH_TEST_INTS", "100, 1000")
	t.Setenv("BENCH_TEST_DURATION", "15s")
	t.Setenv("BENCH_TEST_CHOICES", "idle, spread")
	t.Setenv("BENCH_TEST_CHOICE", "provider")
	got := []any{
		envInt("BENCH_TEST_INT", 1), envInt("BENCH_TEST_UNSET", 1),
		envInts("BENCH_TEST_INTS", []int{5}), envInts("BENCH_TEST_UNSET", []int{5}),
		envDuration("BENCH_TEST_DURATION", time.Second), envDuration("BENCH_TEST_UNSET", time.Second),
		envChoices("BENCH_TEST_CHOICES", []string{"burst"}, "spread", "burst", "idle"),
		envChoices("BENCH_TEST_UNSET", []string{"burst"}, "spread", "burst", "idle"),
		envChoice("BENCH_TEST_CHOICE", "adapter", "adapter", "provider"),
		envChoice("BENCH_TEST_UNSET", "adapter", "adapter", "provider"),
	}
	want := []any{7, 1, []int{100, 1000}, []int{5}, 15 * time.Second, time.Second,
		[]string{"idle", "spread"}, []string{"burst"}, "provider", "adapter"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
}

// TestEnvSettingRefused runs this test binary again with each bad value:
// it must stop with exit status 2 and a message naming the variable,
// not measure with the default.
func TestEnvSettingRefused(t *testing.T) {
	if read := os.Getenv("BENCH_TEST_READ"); read != "" {
		switch read {
		case "int":
			envInt("BENCH_TEST_VALUE", 1)
		case "ints":
			envInts("BENCH_TEST_VALUE", []int{1})
		case "duration":
			envDuration("BENCH_TEST_VALUE", time.Second)
		case "choices":
			envChoices("BENCH_TEST_VALUE", nil, "spread", "burst")
		case "choice":
			envChoice("BENCH_TEST_VALUE", "adapter", "adapter", "provider")
		}
		return // read a bad value without stopping: the parent fails
	}
	for _, tc := range []struct{ read, value, want string }{
		{"int", "15x", "a positive whole number"},
		{"int", "0", "a positive whole number"},
		{"ints", "100,,1000", "comma-separated list"},
		{"ints", "100,-1", "comma-separated list"},
		{"duration", "15", "positive duration"},
		{"duration", "-5s", "positive duration"},
		{"choices", "spread,brust", "list of spread, burst"},
		{"choice", "adapter,provider", "one of adapter, provider"},
		{"choice", "in-process", "one of adapter, provider"},
	} {
		t.Run(tc.read+"="+tc.value, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestEnvSettingRefused$")
			cmd.Env = append(os.Environ(), "BENCH_TEST_READ="+tc.read, "BENCH_TEST_VALUE="+tc.value)
			out, err := cmd.CombinedOutput()
			exit, ok := err.(*exec.ExitError)
			if !ok || exit.ExitCode() != 2 {
				t.Fatalf("exit %v, want status 2; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), "BENCH_TEST_VALUE=") || !strings.Contains(string(out), tc.want) {
				t.Errorf("output %q: want the variable named and %q", out, tc.want)
			}
		})
	}
}
