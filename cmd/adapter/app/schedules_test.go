package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestSchedulesConfig(t *testing.T) {
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "rules.yaml")
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	for f, body := range map[string]string{
		rulesFile: "rules: []\n",
		good:      "schedules:\n- name: office-hours\n  windows: [{start: '08:00', end: '18:00', replicas: 3}]\n",
		bad:       "schedules:\n- name: office-hours\n  windows:\n  - {start: '8am', end: '18:00', replicas: 3}\n",
	} {
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, file, want string
	}{
		{name: "none"},
		{name: "good", file: good},
		{name: "bad", file: bad, want: `--schedules-config: ` + bad + `:4: schedules[0].windows[0].start: Invalid value: "8am"`},
		{name: "missing", file: filepath.Join(dir, "nope.yaml"), want: "--schedules-config: open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewServerOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			args := []string{"--config=" + rulesFile}
			if tt.file != "" {
				args = append(args, "--schedules-config="+tt.file)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, err := range o.validateSchedules() {
				got = append(got, err.Error())
			}
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("errors %q, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tt.want)):
				t.Errorf("errors %q, want one starting %q", got, tt.want)
			}
			f, err := o.scheduleProviders()
			if (f != nil) != (tt.file == good) || (err != nil) != (tt.want != "") {
				t.Errorf("scheduleProviders: factory %v, error %v", f != nil, err)
			}
		})
	}
}
