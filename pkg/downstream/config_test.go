package downstream

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestLoadFileExample(t *testing.T) {
	got, err := LoadFile("testdata/downstream.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &File{
		Path:            "testdata/downstream.yaml",
		RefreshInterval: 20 * time.Second,
		Downstreams: []Server{{
			Name: "keda", Line: 4, APIService: "v1beta1.external.metrics.k8s.io", APIs: []API{External},
			Timeout: 3 * time.Second, Credentials: Credentials{TokenFile: DefaultTokenFile},
			Routes: map[API][]string{External: {"s0-prometheus-http_requests"}},
		}, {
			Name: "sample", Line: 10,
			Service:         &ServiceRef{Namespace: "custom-metrics", Name: "custom-metrics-apiserver", Port: 443},
			TLS:             TLS{CAFile: "/etc/promscaler/downstream/sample-ca.crt"},
			Credentials:     Credentials{ClientCert: "/etc/promscaler/downstream/client.crt", ClientKey: "/etc/promscaler/downstream/client.key"},
			APIs:            []API{Custom, External},
			Timeout:         DefaultTimeout,
			MaxInFlight:     20,
			BreakerFailures: 3, BreakerOpen: 2 * time.Second,
		}, {
			Name: "local", Line: 23, URL: "https://127.0.0.1:6443", TLS: TLS{InsecureSkipVerify: true},
			Credentials: Credentials{None: true}, APIs: []API{Custom}, Timeout: DefaultTimeout,
		}},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("LoadFile (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // every error, in order
	}{{
		name: "not yaml",
		yaml: "downstreams: [",
		want: []string{"f.yaml: yaml: line 1: did not find expected node content"},
	}, {
		name: "unknown and repeated fields",
		yaml: "refreshInterval: 1m\nrefreshInterval: 2m\nextra: 1\n",
		want: []string{"f.yaml:2: refreshInterval: repeated field", "f.yaml:3: extra: unknown field"},
	}, {
		name: "bad scalars",
		yaml: "refreshInterval: soon\ndownstreams:\n- name: a\n  url: https://x\n  timeout: -1s\n  maxInFlight: many\n  tls: {insecureSkipVerify: maybe}\n",
		want: []string{
			"f.yaml:1: refreshInterval: must be a duration such as 5s, not \"soon\"",
			"f.yaml:6: downstreams[0].maxInFlight: must be an integer, not \"many\"",
			"f.yaml:7: downstreams[0].tls.insecureSkipVerify: must be true or false, not \"maybe\"",
			"f.yaml:3: downstreams[0].timeout: must be positive",
			"f.yaml:1: refreshInterval: must be positive",
		},
	}, {
		name: "where",
		yaml: "downstreams:\n- name: a\n- name: b\n  url: http://x/path\n  apiService: v1beta1.external.metrics.k8s.io\n",
		want: []string{
			"f.yaml:2: downstreams[0]: exactly one of url, service and apiService is required",
			"f.yaml:3: downstreams[1]: exactly one of url, service and apiService is required",
			"f.yaml:3: downstreams[1].url: \"http://x/path\" must be https://host[:port]",
		},
	}, {
		name: "names",
		yaml: "downstreams:\n- url: https://a\n- name: Bad_Name\n  url: https://a\n- name: a\n  url: https://a\n- name: a\n  url: https://b\n",
		want: []string{
			"f.yaml:2: downstreams[0].name: is required",
			"f.yaml:3: downstreams[1].name: \"Bad_Name\" must be a DNS label (lowercase letters, digits and '-')",
			"f.yaml:7: downstream \"a\" is also defined at line 5",
		},
	}, {
		name: "apis and routes",
		yaml: "downstreams:\n- name: a\n  url: https://a\n  apis: [custom, custom, resource]\n  routes:\n    external: [x]\n    custom: [\"pods/x\"]\n",
		want: []string{
			"f.yaml:4: downstreams[0].apis[1]: \"custom\" is listed twice",
			"f.yaml:4: downstreams[0].apis[2]: \"resource\" is neither custom nor external",
			"f.yaml:7: downstreams[0].routes.custom[0]: \"pods/x\" is not a metric name",
			"f.yaml:2: downstreams[0].routes.external: routes names of an API the downstream is not asked for (apis)",
		},
	}, {
		name: "route given twice",
		yaml: "downstreams:\n- name: a\n  url: https://a\n  routes: {external: [x]}\n- name: b\n  url: https://b\n  routes: {external: [x]}\n",
		want: []string{"f.yaml:5: external metric \"x\" is routed to both \"a\" and \"b\""},
	}, {
		name: "service and credentials",
		yaml: "downstreams:\n- name: a\n  service: {namespace: keda, port: 0}\n  credentials: {clientCertFile: c, none: true}\n  tls: {caFile: ca, insecureSkipVerify: true}\n",
		want: []string{
			"f.yaml:3: downstreams[0].service: namespace and name are required Kubernetes names",
			"f.yaml:3: downstreams[0].service.port: must be 1-65535",
			"f.yaml:5: downstreams[0].tls: caFile and insecureSkipVerify exclude each other",
			"f.yaml:2: downstreams[0].credentials: clientCertFile and clientKeyFile go together",
			"f.yaml:2: downstreams[0].credentials: none: true excludes tokenFile and the client certificate",
		},
	}, {
		name: "wrong kinds",
		yaml: "downstreams: {name: a}\n",
		want: []string{"f.yaml:1: downstreams: must be a list"},
	}, {
		name: "entry not a mapping",
		yaml: "downstreams:\n- a\n",
		want: []string{"f.yaml:2: downstreams[0]: must be a mapping"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	f, err := Parse("f.yaml", []byte("downstreams:\n- name: a\n  service: {namespace: keda, name: keda-metrics}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Server{Name: "a", Line: 2, Service: &ServiceRef{Namespace: "keda", Name: "keda-metrics", Port: 443},
		APIs: []API{Custom, External}, Timeout: DefaultTimeout, Credentials: Credentials{TokenFile: DefaultTokenFile}}
	if diff := cmp.Diff(want, f.Downstreams[0]); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if f.RefreshInterval != DefaultRefreshInterval {
		t.Errorf("refreshInterval = %v, want %v", f.RefreshInterval, DefaultRefreshInterval)
	}
}

func TestLoadFileMissing(t *testing.T) {
	_, err := LoadFile(filepath.Join(t.TempDir(), "absent.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadFile of a missing file = %v, want os.ErrNotExist", err)
	}
}

// FuzzParse: any input parses or fails with errors naming the file, and a
// parsed file satisfies what the server relies on.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/downstream.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("downstreams:\n- name: a\n  url: https://a\n  routes: {custom: [x]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("f.yaml", data)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml") {
					t.Fatalf("error line %q does not name the file", line)
				}
			}
			return
		}
		if file.RefreshInterval <= 0 {
			t.Fatalf("refreshInterval %v accepted", file.RefreshInterval)
		}
		names := map[string]bool{}
		for _, s := range file.Downstreams {
			n := 0
			for _, set := range []bool{s.URL != "", s.Service != nil, s.APIService != ""} {
				if set {
					n++
				}
			}
			if n != 1 || !dnsLabel.MatchString(s.Name) || names[s.Name] || s.Timeout <= 0 || len(s.APIs) == 0 {
				t.Fatalf("invalid server accepted: %+v", s)
			}
			names[s.Name] = true
		}
	})
}
