package promclient

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// The cloud flags: each problem names its flag; good ones give the
// default backend its CloudAuth.
func TestCloudFlags(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/token", "t")
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the errors, in order
		auth string   // the CloudAuth's key when valid
	}{
		{name: "none", args: nil},
		{name: "sigv4", args: []string{"--prometheus-auth-sigv4", "--prometheus-sigv4-region=eu-west-1", "--prometheus-sigv4-role-arn=arn:aws:iam::1:role/r"}, auth: "sigv4"},
		{name: "azure workload identity", args: []string{"--prometheus-auth-azure=workload-identity", "--prometheus-azure-client-id=c"}, auth: "azuread"},
		{name: "google adc", args: []string{"--prometheus-auth-google"}, auth: "google"},
		{name: "region without sigv4", args: []string{"--prometheus-sigv4-region=r"}, want: []string{"--prometheus-sigv4-*: need --prometheus-auth-sigv4"}},
		{name: "unknown azure mode", args: []string{"--prometheus-auth-azure=cli"}, want: []string{`--prometheus-auth-azure "cli"`}},
		{name: "azure secret without its file", args: []string{"--prometheus-auth-azure=client-secret", "--prometheus-azure-client-id=c", "--prometheus-azure-tenant-id=t"},
			want: []string{"--prometheus-auth-azure: azuread: oauth needs one of client_secret and client_secret_file"}},
		{name: "two clouds", args: []string{"--prometheus-auth-sigv4", "--prometheus-auth-google"}, want: []string{"choose one cloud authentication"}},
		{name: "sigv4 and a token", args: []string{"--prometheus-auth-sigv4", "--prometheus-token-file=" + dir + "/token"},
			want: []string{"--prometheus-auth-sigv4 and --prometheus-token-file"}},
		{name: "google and an Authorization header", args: []string{"--prometheus-auth-google", "--prometheus-header=Authorization=Bearer x"},
			want: []string{"--prometheus-auth-google and an Authorization --prometheus-header"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, err := range o.Validate() {
				got = append(got, err.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors %q, want %d containing %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("error %d %q does not contain %q", i, got[i], w)
				}
			}
			if len(tc.want) > 0 {
				return
			}
			b, err := o.Backend()
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.auth, b.Auth.name()); d != "" {
				t.Errorf("authentication (-want +got):\n%s", d)
			}
		})
	}
}
