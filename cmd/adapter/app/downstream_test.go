package app

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// check-config --downstream-config checks the file and, with the
// downstream's saved discovery document, lists the overlaps with who
// answers each.
func TestCheckConfigDownstream(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rulesFile := write("rules.yaml", "externalQueries:\n- name: queue_depth\n  query: sum(rabbitmq_queue_messages_ready)\n- name: lag\n  query: sum(kafka_lag)\n")
	dsFile := write("downstream.yaml", "downstreams:\n- name: keda\n  url: https://keda:6443\n  apis: [external]\n  routes: {external: [lag]}\n")
	disc := write("keda.json", `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"external.metrics.k8s.io/v1beta1","resources":[
		{"name":"queue_depth","namespaced":true,"kind":"ExternalMetricValueList","verbs":["get"]},
		{"name":"lag","namespaced":true,"kind":"ExternalMetricValueList","verbs":["get"]},
		{"name":"s0-prometheus","namespaced":true,"kind":"ExternalMetricValueList","verbs":["get"]}]}`)
	var stdout, stderr bytes.Buffer
	code := run([]string{"check-config", "--config", rulesFile, "--downstream-config", dsFile, "--downstream-discovery", "keda=" + disc}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	var got []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "overlap: ") {
			got = append(got, l)
		}
	}
	want := []string{
		`overlap: external metric lag is served by promscaler and listed by downstream "keda": answered by keda`,
		`overlap: external metric queue_depth is served by promscaler and listed by downstream "keda": answered by promscaler`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("overlaps (-want +got):\n%s\nstderr:\n%s", diff, stderr.String())
	}

	bad := write("bad.yaml", "downstreams:\n- name: keda\n  timeout: 5\n")
	stderr.Reset()
	if code := run([]string{"check-config", "--config", rulesFile, "--downstream-config", bad}, &stdout, &stderr); code != exitFail {
		t.Errorf("bad file: exit %d, want %d", code, exitFail)
	}
	for _, want := range []string{"bad.yaml:3: downstreams[0].timeout: must be a duration", "bad.yaml:2: downstreams[0]: exactly one of url, service and apiService"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
