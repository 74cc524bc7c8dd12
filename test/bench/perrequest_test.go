//go:build e2e && bench

package bench

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPerRequestArgs(t *testing.T) {
	const (
		windowOn  = "      --prometheus-coalesce-window duration   Also share ... At most 1s. (default 1s)\n      --prometheus-compression string   (default \"none\")\n"
		windowOff = "      --prometheus-coalesce-window duration   Also share ...; 0 (default) shares it only ... At most 1s.\n      --prometheus-compression string   (default \"none\")\n"
		noFlag    = "      --prometheus-compression string   (default \"none\")\n"
	)
	serving := []string{"--shared-evaluation-max-age=0"}
	for _, tc := range []struct {
		name    string
		help    string
		args    []string
		want    []string
		wantOwn bool
	}{
		{"window on by default", windowOn, serving, []string{"--shared-evaluation-max-age=0", "--prometheus-coalesce-window=0"}, true},
		{"window off by default (7a7ebab)", windowOff, serving, serving, false},
		{"no such flag", noFlag, serving, serving, false},
		{"window set by EnvServingArgs", windowOn, []string{"--shared-evaluation-max-age=0", "--prometheus-coalesce-window=100ms"}, []string{"--shared-evaluation-max-age=0", "--prometheus-coalesce-window=100ms"}, false},
		{"window set as two words", windowOn, []string{"--prometheus-coalesce-window", "0"}, []string{"--prometheus-coalesce-window", "0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, own := perRequestArgs(tc.help, tc.args)
			if diff := cmp.Diff(tc.want, got); diff != "" || own != tc.wantOwn {
				t.Errorf("perRequestArgs: own %v, want %v; args (-want +got):\n%s", own, tc.wantOwn, diff)
			}
			if len(tc.args) > 0 && &got[0] == &tc.args[0] && own {
				t.Error("perRequestArgs appended to the serving adapter's args in place")
			}
		})
	}
}
