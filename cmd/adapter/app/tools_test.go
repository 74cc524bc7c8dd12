package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"

	"github.com/promscaler/promscaler/test/golden"
	"github.com/promscaler/promscaler/test/promtest"
)

// fakeSpec is a <case>.fake.json file: a fake Prometheus for live cases
// (args containing $PROM).
type fakeSpec struct {
	Series  string                  `json:"series"`
	Answers map[string]model.Vector `json:"answers"`
}

// TestToolsGolden runs each testdata/tools/<case>.args (one argument per
// line, run from testdata/tools) and compares the exit code, stdout and
// stderr with <case>.golden. Regenerate with go test ./cmd/adapter/app -update.
func TestToolsGolden(t *testing.T) {
	t.Chdir(filepath.Join("testdata", "tools"))
	cases, err := filepath.Glob("*.args")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, c := range cases {
		name := strings.TrimSuffix(c, ".args")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(c)
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
			if spec, err := os.ReadFile(name + ".fake.json"); err == nil {
				srv := startFake(t, spec)
				for i, a := range args {
					args[i] = strings.ReplaceAll(a, "$PROM", srv.URL)
				}
			}
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			got := fmt.Sprintf("exit: %d\n--- stdout\n%s--- stderr\n%s", code, stdout.String(), stderr.String())
			golden.Check(t, name+".golden", []byte(got))
		})
	}
}

func startFake(t *testing.T, spec []byte) *promtest.Server {
	t.Helper()
	var fs fakeSpec
	if err := json.Unmarshal(spec, &fs); err != nil {
		t.Fatal(err)
	}
	seriesJSON, err := os.ReadFile(fs.Series)
	if err != nil {
		t.Fatal(err)
	}
	series, err := parseSeries(seriesJSON, fs.Series)
	if err != nil {
		t.Fatal(err)
	}
	srv := promtest.New(series)
	t.Cleanup(srv.Close)
	for q, v := range fs.Answers {
		srv.Answer(q, v)
	}
	return srv
}

// TestSeedExample checks the seed example of issue 2 directly, so that a
// careless -update cannot bless a wrong answer.
func TestSeedExample(t *testing.T) {
	dir := filepath.Join("testdata", "tools", "inputs")
	var stdout, stderr bytes.Buffer
	code := run([]string{"explain", "--config", filepath.Join(dir, "seed.yaml"), "--series", filepath.Join(dir, "seed-series.json"),
		"--metric", "fpm_active_rate", "--resource", "pods", "--namespace", "abtest", "--names", "a,b"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	want := `sum(max_over_time(pm_status{namespace="abtest",pod_name=~"a|b",state="active processes"}[2m])) by (pod_name) / sum(max_over_time(pm_status{namespace="abtest",pod_name=~"a|b",state="total processes"}[2m])) by (pod_name)` + "\n"
	if diff := cmp.Diff(want, stdout.String()); diff != "" {
		t.Errorf("query (-want +got):\n%s", diff)
	}
	if !strings.Contains(stderr.String(), `rules[0] (series "pm_status")`) {
		t.Errorf("stderr does not name the rule and series:\n%s", stderr.String())
	}

	stdout.Reset()
	stderr.Reset()
	code = run([]string{"check-config", "--config", filepath.Join(dir, "seed.yaml"), "--series", filepath.Join(dir, "seed-series.json")}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("check-config exit %d, stderr:\n%s", code, stderr.String())
	}
	var got []discoveredMetric
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var m discoveredMetric
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	wantLines := []discoveredMetric{
		{API: "custom.metrics.k8s.io", Resource: "namespaces", Metric: "fpm_active_rate", SeriesName: "pm_status", Rule: "rules[0]"},
		{API: "custom.metrics.k8s.io", Resource: "pods", Namespaced: true, Metric: "fpm_active_rate", SeriesName: "pm_status", Rule: "rules[0]"},
	}
	if diff := cmp.Diff(wantLines, got); diff != "" {
		t.Errorf("check-config --series (-want +got):\n%s", diff)
	}
}

func TestParseSeries(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr string
	}{
		{name: "response body", in: `{"status":"success","data":[{"__name__":"up","job":"x"}]}`, want: 1},
		{name: "data array", in: `[{"__name__":"up"},{"__name__":"down"}]`, want: 2},
		{name: "empty array", in: `[]`, want: 0},
		{name: "error response", in: `{"status":"error","error":"bad"}`, wantErr: "a Prometheus error: bad"},
		{name: "no data", in: `{"status":"success"}`, wantErr: `no "data" array`},
		{name: "empty", in: " \n", wantErr: "empty file"},
		{name: "yaml", in: "rules: []", wantErr: "not JSON"},
		{name: "syntax error line", in: "[\n{\"__name__\":\"up\"},\n{,}]", wantErr: "line 3"},
		{name: "no name", in: `[{"job":"x"}]`, wantErr: "has no __name__ label"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSeries([]byte(tc.in), "s.json")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Errorf("%d series, want %d", len(got), tc.want)
			}
		})
	}
}

func FuzzParseSeries(f *testing.F) {
	for _, s := range []string{
		`{"status":"success","data":[{"__name__":"up","job":"x"}]}`, `[{"__name__":"up"}]`, `{"status":"error","error":"x"}`, `[`, `{}`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sets, err := parseSeries(data, "fuzz.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--series fuzz.json: ") {
				t.Fatalf("error does not name the flag and file: %v", err)
			}
			return
		}
		for _, ls := range sets {
			if _, ok := ls[model.MetricNameLabel]; !ok {
				t.Fatalf("accepted a series without __name__: %v", ls)
			}
		}
	})
}

// fakeAPIServer serves the legacy API discovery documents of a cluster with
// a namespaced and a cluster-scoped custom resource.
func fakeAPIServer(t *testing.T) string {
	t.Helper()
	docs := map[string]string{
		"/api": `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}`,
		"/apis": `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"example.com","versions":[{"groupVersion":"example.com/v1","version":"v1"}],` +
			`"preferredVersion":{"groupVersion":"example.com/v1","version":"v1"}}]}`,
		"/api/v1": `{"kind":"APIResourceList","groupVersion":"v1","resources":[` +
			`{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list"]},` +
			`{"name":"namespaces","singularName":"namespace","namespaced":false,"kind":"Namespace","verbs":["get","list"]}]}`,
		"/apis/example.com/v1": `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"example.com/v1","resources":[` +
			`{"name":"widgets","singularName":"widget","namespaced":true,"kind":"Widget","verbs":["get","list"]},` +
			`{"name":"gadgets","singularName":"gadget","namespaced":false,"kind":"Gadget","verbs":["get","list"]}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: %q}
contexts:
- name: fake
  context: {cluster: fake, user: nobody}
current-context: fake
users:
- name: nobody
  user: {}
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// TestCheckConfigKubeconfig resolves resources through a cluster's API
// discovery: custom resources are known, and a cluster-scoped one is served
// without a namespace even when its series carry one.
func TestCheckConfigKubeconfig(t *testing.T) {
	kubeconfig := fakeAPIServer(t)
	dir := t.TempDir()
	configPath := filepath.Join(dir, "config.yaml")
	seriesPath := filepath.Join(dir, "series.json")
	if err := os.WriteFile(configPath, []byte(`
rules:
- seriesQuery: '{__name__="items",namespace!=""}'
  resources:
    template: <<.Resource>>
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seriesPath, []byte(`[
		{"__name__":"items","namespace":"shop","widget":"w1"},
		{"__name__":"items","namespace":"monitoring","gadget":"g1"}
	]`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"check-config", "--config", configPath, "--series", seriesPath, "--kubeconfig", kubeconfig}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	want := strings.Join([]string{
		`{"api":"custom.metrics.k8s.io","group":"","resource":"namespaces","namespaced":false,"metric":"items","seriesName":"items","rule":"rules[0]"}`,
		`{"api":"custom.metrics.k8s.io","group":"example.com","resource":"gadgets","namespaced":false,"metric":"items","seriesName":"items","rule":"rules[0]"}`,
		`{"api":"custom.metrics.k8s.io","group":"example.com","resource":"widgets","namespaced":true,"metric":"items","seriesName":"items","rule":"rules[0]"}`,
	}, "\n") + "\n"
	if diff := cmp.Diff(want, stdout.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}

	// Without --kubeconfig the built-in mapper knows neither resource.
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"check-config", "--config", configPath, "--series", seriesPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "example.com") {
		t.Errorf("built-in mapper resolved custom resources:\n%s", stdout.String())
	}

	// An unreachable cluster is a clear error.
	stdout.Reset()
	stderr.Reset()
	bad := filepath.Join(dir, "missing-kubeconfig")
	if code := run([]string{"check-config", "--config", configPath, "--kubeconfig", bad}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "--kubeconfig") {
		t.Errorf("missing kubeconfig: exit %d, stderr %q", code, stderr.String())
	}
}

func TestCheckConfigBackends(t *testing.T) {
	dir := t.TempDir()
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(`externalRules:
- seriesQuery: 'queue'
  resources: {namespaced: false}
  backend: thanos
  metricsQuery: 'sum(<<.Series>>)'
`), 0o600); err != nil {
		t.Fatal(err)
	}
	backends := func(content string) string {
		p := filepath.Join(t.TempDir(), "backends.yaml")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{{
		name:    "no backends file: a warning",
		wantErr: "warning: " + configPath + ":4:12: externalRules[0].backend: names a backend other than default, not checked (hint: pass the adapter's --backends-config to check-config)\n",
	}, {
		name:     "no backends file, strict: fails",
		args:     []string{"--strict"},
		wantCode: 1,
		wantErr:  "warning: " + configPath + ":4:12: externalRules[0].backend: names a backend other than default, not checked (hint: pass the adapter's --backends-config to check-config)\n",
	}, {
		name: "the backend is defined",
		args: []string{"--backends-config", backends("backends:\n- {name: thanos, url: 'http://thanos:9090'}\n")},
	}, {
		name:     "the backend is not defined",
		args:     []string{"--backends-config", backends("backends:\n- {name: mimir, url: 'http://mimir:8080'}\n")},
		wantCode: 1,
		wantErr:  configPath + `:4:12: externalRules[0].backend: unknown backend "thanos" (defined: default, mimir) (hint: define it in --backends-config, or remove the key to use the --prometheus-* flags' backend)` + "\n",
	}, {
		name:     "a bad backends file",
		args:     []string{"--backends-config", backends("backends:\n- {name: thanos}\n")},
		wantCode: 1,
		wantErr:  "PATH:2: backends[0].url: \"\" must be an http:// or https:// URL with a host\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"check-config", "--config", configPath}, tt.args...), &stdout, &stderr)
			got := stderr.String()
			if len(tt.args) == 2 {
				got = strings.ReplaceAll(got, tt.args[1], "PATH")
			}
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if diff := cmp.Diff(tt.wantErr, got); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckConfigSeriesStrict: with --series, a conflict is a warning that
// --strict turns into exit 1, as for the warnings of the files.
func TestCheckConfigSeriesStrict(t *testing.T) {
	dir := t.TempDir()
	configPath := filepath.Join(dir, "config.yaml")
	seriesPath := filepath.Join(dir, "series.json")
	if err := os.WriteFile(configPath, []byte(`
rules:
- seriesQuery: '{__name__="items",namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__="items",namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seriesPath, []byte(`[{"__name__":"items","namespace":"shop","pod":"p1"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
	}{
		{name: "a conflict is a warning", wantCode: exitOK},
		{name: "strict: a conflict fails", args: []string{"--strict"}, wantCode: exitFail},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"check-config", "--config", configPath, "--series", seriesPath}, tt.args...), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), "warning: custom.metrics.k8s.io metric items for pods is produced by") {
				t.Errorf("stderr does not report the conflict:\n%s", stderr.String())
			}
		})
	}
}
