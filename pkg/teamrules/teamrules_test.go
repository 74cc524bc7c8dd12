package teamrules

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/promscaler/promscaler/internal/kubemapper"
	"github.com/promscaler/promscaler/internal/metrics"
	"github.com/promscaler/promscaler/pkg/config"
	"github.com/promscaler/promscaler/pkg/rules"
)

const goodRules = `rules:
- seriesQuery: '{__name__=~"^http_requests_total$"}'
  resources: {template: <<.Resource>>}
  name:
    matches: ^(.*)_total$
    as: ${1}_per_second
  metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)
`

const otherNamespaceRules = `rules:
- seriesQuery: '{__name__=~"^http_requests_total$"}'
  resources: {template: <<.Resource>>}
  metricsQuery: sum(secret_total{namespace="b"}) by (<<.GroupBy>>)
`

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{Label: "true"}},
		Data:       data,
	}
}

// published records what the combiner publishes.
type published struct {
	mu   sync.Mutex
	sets []*rules.RuleSet
}

func (p *published) publish(rs *rules.RuleSet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sets = append(p.sets, rs)
}

// last returns, for the last published set, each custom rule's path and
// tenant.
func (p *published) last() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sets) == 0 {
		return nil
	}
	var out []string
	for _, r := range p.sets[len(p.sets)-1].CustomRules() {
		out = append(out, r.Path()+" tenant="+r.Tenant())
	}
	return out
}

func baseRules(t *testing.T) *rules.RuleSet {
	t.Helper()
	cfg, err := config.Parse([]byte(goodRules), "/etc/adapter/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rules.Compile(cfg, kubemapper.New())
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func newTestWatcher(t *testing.T, opts Options, backends ...string) (*Watcher, *published, *record.FakeRecorder, *metrics.Metrics) {
	t.Helper()
	pub := &published{}
	rec := record.NewFakeRecorder(100)
	m := metrics.New()
	w, err := New(Config{Options: opts, Client: fake.NewClientset(), Mapper: kubemapper.New(), Backends: backends,
		Sink: NewCombiner(baseRules(t), pub.publish), Metrics: m, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	return w, pub, rec, m
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A bad ConfigMap gets a Warning event naming the place and keeps its last
// good rules; the other sources are unaffected; the same bad content is
// reported once.
func TestApplyKeepsLastGoodRules(t *testing.T) {
	w, pub, rec, m := newTestWatcher(t, Options{})
	const base = "/etc/adapter/config.yaml:rules[0] tenant="
	const teamA = "configmap/a/rules/rules.yaml:rules[0] tenant=a"
	const teamB = "configmap/b/rules/rules.yaml:rules[0] tenant=b"

	w.Apply(configMap("a", "rules", map[string]string{"rules.yaml": goodRules}))
	if diff := cmp.Diff([]string{teamA, base}, pub.last()); diff != "" {
		t.Fatalf("after a's rules (-want +got):\n%s", diff)
	}
	if ev := events(rec); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal RulesLoaded 1 custom and 0 external rules serve namespace a") {
		t.Errorf("events %q", ev)
	}

	n := len(pub.sets)
	for range 2 {
		w.Apply(configMap("a", "rules", map[string]string{"rules.yaml": otherNamespaceRules}))
	}
	if len(pub.sets) != n {
		t.Errorf("a rejected ConfigMap published rules")
	}
	ev := events(rec)
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning RulesRejected team rules ConfigMap a/rules rejected, its previous version stays in service: configmap/a/rules/rules.yaml: rules[0].metricsQuery") ||
		!strings.Contains(ev[0], "query cannot be confined") {
		t.Errorf("events after the bad version %q", ev)
	}
	if got := testutil.ToFloat64(w.rejected.WithLabelValues("configmap/a/rules")); got != 1 {
		t.Errorf("config_file_rejected = %v, want 1", got)
	}

	w.Apply(configMap("b", "rules", map[string]string{"rules.yaml": goodRules}))
	if diff := cmp.Diff([]string{teamA, teamB, base}, pub.last()); diff != "" {
		t.Errorf("after b's rules, a's last good kept (-want +got):\n%s", diff)
	}
	w.Apply(configMap("c", "broken", map[string]string{"x.yaml": "rules:\n- seriesQuery: [\n", "notes.txt": "ignored"}))
	if ev := events(rec); len(ev) != 2 || !strings.Contains(ev[1], "no previous version is in service: configmap/c/broken/x.yaml:2") {
		t.Errorf("events after the broken ConfigMap %q", ev)
	}
	w.Apply(configMap("c", "empty", map[string]string{"notes.txt": "rules: []"}))
	if ev := events(rec); len(ev) != 1 || !strings.Contains(ev[0], "no data key ending in .yaml or .yml") {
		t.Errorf("events after the ConfigMap without rules %q", ev)
	}

	w.Remove("a/rules")
	if diff := cmp.Diff([]string{teamB, base}, pub.last()); diff != "" {
		t.Errorf("after a's removal (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(m.ConfigReloads.WithLabelValues(metrics.OutcomeFailure)); got != 3 {
		t.Errorf("failed reloads = %v, want 3", got)
	}
}

// A team rule naming a backend the adapter does not have is refused at its
// place, not left for discovery to fail on; one the adapter has is refused
// too unless --team-rules-backends allows it for that namespace (issue 32:
// a team could read another tenant's backend); an allowed one loads.
func TestApplyBackends(t *testing.T) {
	withBackend := func(name string) string {
		return strings.Replace(goodRules, "- seriesQuery:", "- backend: "+name+"\n  seriesQuery:", 1)
	}
	tests := []struct {
		name, backend string
		allowed       map[string][]string
		wantEvent     string // prefix; "" loads
	}{
		{name: "unknown", backend: "mimir", allowed: map[string][]string{"a": {"thanos"}},
			wantEvent: `Warning RulesRejected team rules ConfigMap a/rules rejected, no previous version is in service: configmap/a/rules/rules.yaml:2:12: rules[0].backend: unknown backend "mimir" (defined: default, thanos)`},
		{name: "known, not allowed by default", backend: "thanos",
			wantEvent: `Warning RulesRejected team rules ConfigMap a/rules rejected, no previous version is in service: configmap/a/rules/rules.yaml:2:12: rules[0].backend: unknown backend "thanos" (defined: default)`},
		{name: "allowed for another namespace only", backend: "thanos", allowed: map[string][]string{"b": {"thanos"}},
			wantEvent: `Warning RulesRejected team rules ConfigMap a/rules rejected`},
		{name: "allowed", backend: "thanos", allowed: map[string][]string{"a": {"thanos"}}},
		{name: "default", backend: "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, pub, rec, _ := newTestWatcher(t, Options{NamespaceBackends: tt.allowed}, "thanos")
			w.Apply(configMap("a", "rules", map[string]string{"rules.yaml": withBackend(tt.backend)}))
			ev := events(rec)
			if tt.wantEvent == "" {
				if diff := cmp.Diff([]string{"configmap/a/rules/rules.yaml:rules[0] tenant=a", "/etc/adapter/config.yaml:rules[0] tenant="}, pub.last()); diff != "" {
					t.Errorf("rules served (-want +got):\n%s\nevents %q", diff, ev)
				}
				return
			}
			if len(pub.sets) != 0 {
				t.Errorf("published rules: %q", pub.last())
			}
			if len(ev) != 1 || !strings.HasPrefix(ev[0], tt.wantEvent) {
				t.Errorf("events %q, want one starting %q", ev, tt.wantEvent)
			}
			if tt.backend == "thanos" && (len(ev) != 1 || !strings.Contains(ev[0], "namespace a's team rules may use the backends default")) {
				t.Errorf("events %q do not say which backends namespace a may use", ev)
			}
		})
	}
}

// Limits: rules per ConfigMap and ConfigMaps in service, each refused with
// a RulesRejected event naming the limit; a ConfigMap in service may
// change within them.
func TestApplyLimits(t *testing.T) {
	w, pub, rec, _ := newTestWatcher(t, Options{MaxRulesPerConfigMap: 2, MaxConfigMaps: 2})
	rule := strings.TrimPrefix(goodRules, "rules:\n")
	three := "rules:\n" + rule + rule + rule
	w.Apply(configMap("a", "big", map[string]string{"rules.yaml": three}))
	if ev := events(rec); len(ev) != 1 || !strings.Contains(ev[0], "RulesRejected") || !strings.Contains(ev[0], "3 rules, more than the limit of 2 rules per team ConfigMap (--team-rules-max-rules-per-configmap)") {
		t.Errorf("events after 3 rules %q", ev)
	}
	w.Apply(configMap("a", "one", map[string]string{"rules.yaml": goodRules}))
	w.Apply(configMap("b", "one", map[string]string{"rules.yaml": goodRules}))
	_ = events(rec)
	w.Apply(configMap("c", "one", map[string]string{"rules.yaml": goodRules}))
	if ev := events(rec); len(ev) != 1 || !strings.Contains(ev[0], "RulesRejected") || !strings.Contains(ev[0], "2 team ConfigMaps are in service, the limit (--team-rules-max-configmaps)") {
		t.Errorf("events after a third ConfigMap %q", ev)
	}
	w.Apply(configMap("a", "one", map[string]string{"rules.yaml": "rules:\n" + rule + rule}))
	if ev := events(rec); len(ev) != 1 || !strings.Contains(ev[0], "RulesLoaded 2 custom") {
		t.Errorf("a ConfigMap in service changing within the limits: events %q", ev)
	}
	if got := len(pub.last()); got != 4 {
		t.Errorf("rules served %q, want a's 2, b's 1 and the file's", pub.last())
	}
}

// Run watches labelled ConfigMaps only, in the listed namespaces only.
func TestRunWatchesLabelledConfigMaps(t *testing.T) {
	pub := &published{}
	client := fake.NewClientset(
		configMap("a", "rules", map[string]string{"rules.yaml": goodRules}),
		configMap("b", "rules", map[string]string{"rules.yaml": goodRules}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "plain"}, Data: map[string]string{"rules.yaml": goodRules}},
	)
	w, err := New(Config{Options: Options{Namespaces: []string{"a"}}, Client: client, Mapper: kubemapper.New(),
		Sink: NewCombiner(baseRules(t), pub.publish), Metrics: metrics.New(), Recorder: record.NewFakeRecorder(100)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	want := []string{"configmap/a/rules/rules.yaml:rules[0] tenant=a", "/etc/adapter/config.yaml:rules[0] tenant="}
	deadline := time.Now().Add(10 * time.Second)
	for !cmp.Equal(want, pub.last()) {
		if time.Now().After(deadline) {
			t.Fatalf("published %v, want %v", pub.last(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := client.CoreV1().ConfigMaps("a").Delete(ctx, "rules", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for !cmp.Equal([]string{"rules[0] tenant="}, pub.last()) {
		if time.Now().After(deadline) {
			t.Fatalf("after the deletion published %v", pub.last())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// One ConfigMap's load never holds up another's (issue 32: a team's
// template bomb blocked the watcher, other teams' new ConfigMaps never
// loaded): with a's load stuck, b's new ConfigMap is served.
func TestSlowLoadDoesNotBlockOthers(t *testing.T) {
	pub := &published{}
	client := fake.NewClientset(configMap("a", "rules", map[string]string{"rules.yaml": goodRules}))
	w, err := New(Config{Client: client, Mapper: kubemapper.New(),
		Sink: NewCombiner(baseRules(t), pub.publish), Metrics: metrics.New(), Recorder: record.NewFakeRecorder(100)})
	if err != nil {
		t.Fatal(err)
	}
	stuck, release := make(chan struct{}), make(chan struct{})
	load := w.load
	w.load = func(cm *corev1.ConfigMap) (*rules.RuleSet, []string, error) {
		if cm.Namespace == "a" {
			close(stuck)
			<-release
		}
		return load(cm)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	defer close(release)
	<-stuck
	if _, err := client.CoreV1().ConfigMaps("b").Create(ctx, configMap("b", "rules", map[string]string{"rules.yaml": goodRules}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"configmap/b/rules/rules.yaml:rules[0] tenant=b", "/etc/adapter/config.yaml:rules[0] tenant="}
	deadline := time.Now().Add(30 * time.Second)
	for !cmp.Equal(want, pub.last()) {
		if time.Now().After(deadline) {
			t.Fatalf("with a's load stuck, published %v, want b's rules served", pub.last())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A team ConfigMap whose metricsQuery is a define-template bomb (issue 32:
// 2^depth calls, hours to load) is refused at once with a RulesRejected
// event naming the place.
func TestTemplateBombRejected(t *testing.T) {
	w, pub, rec, _ := newTestWatcher(t, Options{})
	var bomb strings.Builder
	bomb.WriteString(`<<define "t0">><<end>>`)
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&bomb, `<<define "t%d">><<template "t%d">><<template "t%d">><<end>>`, i, i-1, i-1)
	}
	bomb.WriteString(`sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)<<if eq .Series "x">><<template "t60">><<end>>`)
	data := strings.Replace(goodRules, "metricsQuery: sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)", "metricsQuery: '"+bomb.String()+"'", 1)
	w.Apply(configMap("a", "bomb", map[string]string{"rules.yaml": data}))
	if len(pub.sets) != 0 {
		t.Errorf("the bomb published rules")
	}
	ev := events(rec)
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning RulesRejected team rules ConfigMap a/bomb rejected, no previous version is in service: configmap/a/bomb/rules.yaml:7:") ||
		!strings.Contains(ev[0], "more than 1000 template calls") {
		t.Errorf("events %q, want one RulesRejected naming configmap/a/bomb/rules.yaml:7 and the bound", ev)
	}
}

// A team rule in service that discovery refuses (too many metrics) gets a
// RulesRejected event on its ConfigMap naming the limit, once per message
// for each version in service; a file of no ConfigMap in service gets none.
func TestRuleRefused(t *testing.T) {
	w, _, rec, _ := newTestWatcher(t, Options{})
	w.Apply(configMap("a", "rules", map[string]string{"rules.yaml": goodRules}))
	_ = events(rec)
	refusal := errors.New("team rule configmap/a/rules/rules.yaml:rules[0] produces 150 metrics, more than the limit of 100 metrics per team rule: it serves none")
	for range 3 { // every discovery pass reports it
		w.RuleRefused("configmap/a/rules/rules.yaml", refusal)
	}
	w.RuleRefused("configmap/b/rules/rules.yaml", refusal)
	ev := events(rec)
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning RulesRejected ") || !strings.Contains(ev[0], "more than the limit of 100 metrics per team rule") {
		t.Errorf("events %q, want one RulesRejected naming the limit", ev)
	}
	// A new version in service is reported again.
	rule := strings.TrimPrefix(goodRules, "rules:\n")
	w.Apply(configMap("a", "rules", map[string]string{"rules.yaml": "rules:\n" + rule + rule}))
	_ = events(rec)
	w.RuleRefused("configmap/a/rules/rules.yaml", refusal)
	if ev := events(rec); len(ev) != 1 {
		t.Errorf("events after a new version %q, want one", ev)
	}
}
