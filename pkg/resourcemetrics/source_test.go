package resourcemetrics_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/metrics/pkg/apis/metrics"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/resourcemetrics"
)

var (
	sampleTime = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	createTime = time.Date(2026, 11, 30, 10, 0, 7, 0, time.UTC)
)

func pod(ns, name string, lbls map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
}

func node(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
}

// podLines renders pod metrics as one line per container, for cmp.Diff.
func podLines(items []metrics.PodMetrics) []string {
	var out []string
	for _, pm := range items {
		for _, c := range pm.Containers {
			cpu, mem := c.Usage[corev1.ResourceCPU], c.Usage[corev1.ResourceMemory]
			out = append(out, fmt.Sprintf("%s/%s %s cpu=%s memory=%s", pm.Namespace, pm.Name, c.Name, cpu.String(), mem.String()))
		}
	}
	return out
}

func nodeLines(items []metrics.NodeMetrics) []string {
	var out []string
	for _, nm := range items {
		cpu, mem := nm.Usage[corev1.ResourceCPU], nm.Usage[corev1.ResourceMemory]
		out = append(out, fmt.Sprintf("%s cpu=%s memory=%s", nm.Name, cpu.String(), mem.String()))
	}
	return out
}

func newSource(t *testing.T, q promclient.SampleQuerier, maxNames int) *resourcemetrics.Source {
	t.Helper()
	cfg := sourceConfig(t, q)
	cfg.Clock = clocktesting.NewFakePassiveClock(createTime)
	cfg.MaxNamesInQuery = maxNames
	return mustSource(t, cfg)
}

// forEachQuerier runs test over a new fake (fp, whose Queries are the
// queries sent) with the project's client of it.
func forEachQuerier(t *testing.T, newFake func() *fakeProm, test func(t *testing.T, fp *fakeProm, q promclient.SampleQuerier)) {
	fp := newFake()
	test(t, fp, fp.client(t))
}

func TestGetPodMetrics(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name     string
		series   []series
		pods     []*metav1.PartialObjectMetadata
		maxNames int // 0: the default
		want     []string
	}{
		{
			name: "values as metrics-server formats them, sorted by namespace, pod and container",
			series: []series{
				podSeries("cpu", "b", "web-1", "app", 0.487558164),
				podSeries("memory", "b", "web-1", "app", 749785088),
				podSeries("cpu", "a", "db-0", "sidecar", 0.001),
				podSeries("memory", "a", "db-0", "sidecar", 1000),
				podSeries("cpu", "a", "db-0", "db", 2),
				podSeries("memory", "a", "db-0", "db", 1<<30),
			},
			pods: []*metav1.PartialObjectMetadata{pod("b", "web-1", nil), pod("a", "db-0", nil)},
			want: []string{
				"a/db-0 db cpu=2 memory=1Gi",
				"a/db-0 sidecar cpu=1m memory=1k",
				"b/web-1 app cpu=487558164n memory=732212Ki",
			},
		},
		{
			name: "a pod with no samples is left out",
			series: []series{
				podSeries("cpu", "a", "p1", "c", 0.1),
				podSeries("memory", "a", "p1", "c", 1024),
			},
			pods: []*metav1.PartialObjectMetadata{pod("a", "p1", nil), pod("a", "p2", nil)},
			want: []string{"a/p1 c cpu=100m memory=1Ki"},
		},
		{
			name: "a pod with a container missing its CPU sample is left out",
			series: []series{
				podSeries("cpu", "a", "p1", "c1", 0.1),
				podSeries("memory", "a", "p1", "c1", 1024),
				podSeries("memory", "a", "p1", "c2", 2048),
				podSeries("cpu", "a", "p2", "c", 0.2),
				podSeries("memory", "a", "p2", "c", 1024),
			},
			pods: []*metav1.PartialObjectMetadata{pod("a", "p1", nil), pod("a", "p2", nil)},
			want: []string{"a/p2 c cpu=200m memory=1Ki"},
		},
		{
			name: "a pod with a container missing its memory sample is left out",
			series: []series{
				podSeries("cpu", "a", "p1", "c1", 0.1),
				podSeries("cpu", "a", "p1", "c2", 0.1),
				podSeries("memory", "a", "p1", "c1", 1024),
			},
			pods: []*metav1.PartialObjectMetadata{pod("a", "p1", nil)},
			want: nil,
		},
		{
			name: "NaN, infinite and negative values skip their container, not the pod",
			series: []series{
				podSeries("cpu", "a", "p1", "nan", nan),
				podSeries("memory", "a", "p1", "nan", 1024),
				podSeries("cpu", "a", "p1", "inf", math.Inf(1)),
				podSeries("memory", "a", "p1", "inf", 1024),
				podSeries("cpu", "a", "p1", "negative", -0.5),
				podSeries("memory", "a", "p1", "negative", 1024),
				podSeries("cpu", "a", "p1", "negmem", 0.5),
				podSeries("memory", "a", "p1", "negmem", -1),
				podSeries("cpu", "a", "p1", "ok", 0.25),
				podSeries("memory", "a", "p1", "ok", 4096),
			},
			pods: []*metav1.PartialObjectMetadata{pod("a", "p1", nil)},
			want: []string{"a/p1 ok cpu=250m memory=4Ki"},
		},
		{
			name: "a pod all of whose containers are invalid is left out",
			series: []series{
				podSeries("cpu", "a", "p1", "c", nan),
				podSeries("memory", "a", "p1", "c", 1024),
			},
			pods: []*metav1.PartialObjectMetadata{pod("a", "p1", nil)},
			want: nil,
		},
		{
			name: "pods that are not asked for (not Running) are not reported",
			series: []series{
				podSeries("cpu", "a", "done", "c", 0.1),
				podSeries("memory", "a", "done", "c", 1024),
				podSeries("cpu", "a", "run", "c", 0.1),
				podSeries("memory", "a", "run", "c", 1024),
			},
			pods: []*metav1.PartialObjectMetadata{pod("a", "run", nil)},
			want: []string{"a/run c cpu=100m memory=1Ki"},
		},
		{
			name: "same pod name in two namespaces",
			series: []series{
				podSeries("cpu", "a", "p", "c", 0.1),
				podSeries("memory", "a", "p", "c", 1024),
				podSeries("cpu", "b", "p", "c", 0.3),
				podSeries("memory", "b", "p", "c", 3072),
			},
			pods: []*metav1.PartialObjectMetadata{pod("a", "p", nil), pod("b", "p", nil)},
			want: []string{"a/p c cpu=100m memory=1Ki", "b/p c cpu=300m memory=3Ki"},
		},
		{
			name: "a second sample for the same container is ignored: the first is kept",
			series: []series{
				podSeries("cpu", "a", "p1", "c", 0.1),
				withLabel(podSeries("cpu", "a", "p1", "c", 0.9), "id", "other"),
				withLabel(podSeries("memory", "a", "p1", "c", 1024), "id", "first"),
				withLabel(podSeries("memory", "a", "p1", "c", 9999), "id", "second"),
			},
			pods: []*metav1.PartialObjectMetadata{pod("a", "p1", nil)},
			want: []string{"a/p1 c cpu=100m memory=1Ki"},
		},
		{
			name: "a first sample that is NaN is kept: its container is skipped, not replaced by the second",
			series: []series{
				podSeries("cpu", "a", "p1", "c", nan),
				withLabel(podSeries("cpu", "a", "p1", "c", 0.5), "id", "other"),
				podSeries("memory", "a", "p1", "c", 1024),
				podSeries("cpu", "a", "p1", "ok", 0.25),
				podSeries("memory", "a", "p1", "ok", 4096),
			},
			pods: []*metav1.PartialObjectMetadata{pod("a", "p1", nil)},
			want: []string{"a/p1 ok cpu=250m memory=4Ki"},
		},
		{
			name: "samples without a pod label are ignored (a query for every pod of the namespace)",
			series: []series{
				{metric: "cpu", labels: map[string]string{"namespace": "a", "container": "c"}, value: 9},
				{metric: "memory", labels: map[string]string{"namespace": "a", "container": "c"}, value: 9},
				podSeries("cpu", "a", "p1", "c", 0.1),
				podSeries("memory", "a", "p1", "c", 1024),
				podSeries("cpu", "a", "p2", "c", 0.2),
				podSeries("memory", "a", "p2", "c", 2048),
			},
			pods:     []*metav1.PartialObjectMetadata{pod("a", "p1", nil), pod("a", "p2", nil)},
			maxNames: 1,
			want:     []string{"a/p1 c cpu=100m memory=1Ki", "a/p2 c cpu=200m memory=2Ki"},
		},
		{
			name:   "no pods",
			series: []series{podSeries("cpu", "a", "p", "c", 0.1)},
			want:   nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forEachQuerier(t, func() *fakeProm { return &fakeProm{ts: sampleTime, series: tc.series} }, func(t *testing.T, _ *fakeProm, q promclient.SampleQuerier) {
				s := newSource(t, q, tc.maxNames)
				got, err := s.GetPodMetrics(context.Background(), tc.pods)
				if err != nil {
					t.Fatalf("GetPodMetrics: %v", err)
				}
				if diff := cmp.Diff(tc.want, podLines(got)); diff != "" {
					t.Errorf("pod metrics (-want +got):\n%s", diff)
				}
				for _, pm := range got {
					if !pm.Timestamp.Time.Equal(sampleTime) {
						t.Errorf("%s/%s timestamp = %v, want the samples' %v", pm.Namespace, pm.Name, pm.Timestamp, sampleTime)
					}
					if pm.Window.Duration != 5*time.Minute {
						t.Errorf("%s/%s window = %v, want 5m", pm.Namespace, pm.Name, pm.Window.Duration)
					}
					if !pm.CreationTimestamp.Time.Equal(createTime) {
						t.Errorf("%s/%s creationTimestamp = %v, want the clock's %v", pm.Namespace, pm.Name, pm.CreationTimestamp, createTime)
					}
				}
			})
		})
	}
}

// withLabel returns s with one more label (not one the queries group by:
// the group it falls into is the same, so it is a second sample there).
func withLabel(s series, name, value string) series {
	lbls := maps.Clone(s.labels)
	lbls[name] = value
	s.labels = lbls
	return s
}

func TestGetPodMetricsCopiesLabels(t *testing.T) {
	fp := &fakeProm{ts: sampleTime, series: []series{podSeries("cpu", "a", "p", "c", 0.1), podSeries("memory", "a", "p", "c", 1)}}
	s := newSource(t, fp.client(t), 0)
	got, err := s.GetPodMetrics(context.Background(), []*metav1.PartialObjectMetadata{pod("a", "p", map[string]string{"app": "web"})})
	if err != nil {
		t.Fatalf("GetPodMetrics: %v", err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d items, want 1", len(got))
	}
	if diff := cmp.Diff(map[string]string{"app": "web"}, got[0].Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

func TestPodQueries(t *testing.T) {
	var pods []*metav1.PartialObjectMetadata
	var ss []series
	for i := range 5 {
		pods = append(pods, pod("big", fmt.Sprintf("p%d", i), nil))
		ss = append(ss, podSeries("cpu", "big", fmt.Sprintf("p%d", i), "c", 0.1), podSeries("memory", "big", fmt.Sprintf("p%d", i), "c", 1))
	}
	pods = append(pods, pod("small", "a.b", nil), pod("small", "c", nil))
	// Series without a pod label: a query for every pod (no pod matcher)
	// returns them as a group with no pod name, which is ignored.
	ss = append(ss,
		series{metric: "cpu", labels: map[string]string{"namespace": "big", "container": "c"}, value: 9},
		series{metric: "memory", labels: map[string]string{"namespace": "big", "container": "c"}, value: 9})
	tests := []struct {
		name     string
		maxNames int
		want     []string
	}{
		{
			name:     "few names are named, each namespace queried once per resource",
			maxNames: 10,
			want: []string{
				`sum(container_memory_working_set_bytes{namespace="big",pod=~"p0|p1|p2|p3|p4", container!=""}) by (pod,container)`,
				`sum(container_memory_working_set_bytes{namespace="small",pod=~"a\\.b|c", container!=""}) by (pod,container)`,
				`sum(rate(container_cpu_usage_seconds_total{namespace="big",pod=~"p0|p1|p2|p3|p4", container!=""}[5m])) by (pod,container)`,
				`sum(rate(container_cpu_usage_seconds_total{namespace="small",pod=~"a\\.b|c", container!=""}[5m])) by (pod,container)`,
			},
		},
		{
			name:     "more names than the limit ask for every pod of the namespace",
			maxNames: 3,
			want: []string{
				`sum(container_memory_working_set_bytes{namespace="big", container!=""}) by (pod,container)`,
				`sum(container_memory_working_set_bytes{namespace="small",pod=~"a\\.b|c", container!=""}) by (pod,container)`,
				`sum(rate(container_cpu_usage_seconds_total{namespace="big", container!=""}[5m])) by (pod,container)`,
				`sum(rate(container_cpu_usage_seconds_total{namespace="small",pod=~"a\\.b|c", container!=""}[5m])) by (pod,container)`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forEachQuerier(t, func() *fakeProm { return &fakeProm{ts: sampleTime, series: ss} }, func(t *testing.T, fp *fakeProm, q promclient.SampleQuerier) {
				s := newSource(t, q, tc.maxNames)
				got, err := s.GetPodMetrics(context.Background(), pods)
				if err != nil {
					t.Fatalf("GetPodMetrics: %v", err)
				}
				if len(got) != 5 {
					t.Errorf("got %d pods, want the 5 with samples", len(got))
				}
				queries := fp.Queries()
				sortStrings(queries)
				if diff := cmp.Diff(tc.want, queries); diff != "" {
					t.Errorf("queries (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestGetNodeMetrics(t *testing.T) {
	tests := []struct {
		name     string
		series   []series
		nodes    []*metav1.PartialObjectMetadata
		maxNames int // 0: the default
		// unselected: see fakeProm.
		unselected []string
		want       []string
		// wantQueries, when set, are the queries sent, sorted.
		wantQueries []string
	}{
		{
			name: "nodes with both samples, sorted; a missing or NaN sample leaves the node out",
			series: []series{
				nodeSeries("cpu", "n2", 1.5),
				nodeSeries("memory", "n2", 8<<30),
				nodeSeries("cpu", "n1", 0.487558164),
				nodeSeries("memory", "n1", 749785088),
				nodeSeries("cpu", "no-memory", 1),
				nodeSeries("cpu", "nan", math.NaN()),
				nodeSeries("memory", "nan", 1),
				nodeSeries("cpu", "inf", math.Inf(1)),
				nodeSeries("memory", "inf", 1),
				nodeSeries("cpu", "unasked", 1),
				nodeSeries("memory", "unasked", 1),
			},
			nodes: []*metav1.PartialObjectMetadata{node("n2"), node("n1"), node("no-memory"), node("nan"), node("inf"), node("absent")},
			want:  []string{"n1 cpu=487558164n memory=732212Ki", "n2 cpu=1500m memory=8Gi"},
			wantQueries: []string{
				`sum(container_memory_working_set_bytes{node=~"absent|inf|n1|n2|nan|no-memory", id="/"}) by (node)`,
				`sum(rate(container_cpu_usage_seconds_total{node=~"absent|inf|n1|n2|nan|no-memory", id="/"}[5m])) by (node)`,
			},
		},
		{
			name: "a second sample for the same node is ignored: the first is kept",
			series: []series{
				nodeSeries("cpu", "n1", 0.5),
				withLabel(nodeSeries("cpu", "n1", 3), "instance", "other"),
				nodeSeries("memory", "n1", 1<<30),
				withLabel(nodeSeries("memory", "n1", 5<<30), "instance", "other"),
			},
			nodes: []*metav1.PartialObjectMetadata{node("n1")},
			want:  []string{"n1 cpu=500m memory=1Gi"},
		},
		{
			name: "a first sample that is NaN is kept: the node is left out, not answered from the second",
			series: []series{
				nodeSeries("cpu", "n1", math.NaN()),
				withLabel(nodeSeries("cpu", "n1", 3), "instance", "other"),
				nodeSeries("memory", "n1", 1<<30),
				nodeSeries("cpu", "n2", 1),
				nodeSeries("memory", "n2", 1<<30),
			},
			nodes: []*metav1.PartialObjectMetadata{node("n1"), node("n2")},
			want:  []string{"n2 cpu=1 memory=1Gi"},
		},
		{
			// The node!="" matcher of a query for every node keeps them out;
			// a hand-written nodeQuery may not.
			name: "samples without a node label are ignored",
			series: []series{
				{metric: "cpu", labels: map[string]string{"id": "/"}, value: 7},
				{metric: "memory", labels: map[string]string{"id": "/"}, value: 7},
				nodeSeries("cpu", "n1", 1),
				nodeSeries("memory", "n1", 1<<30),
				nodeSeries("cpu", "n2", 2),
				nodeSeries("memory", "n2", 2<<30),
			},
			nodes:      []*metav1.PartialObjectMetadata{node("n1"), node("n2")},
			maxNames:   1,
			unselected: []string{"node"},
			want:       []string{"n1 cpu=1 memory=1Gi", "n2 cpu=2 memory=2Gi"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forEachQuerier(t, func() *fakeProm { return &fakeProm{ts: sampleTime, series: tc.series, unselected: tc.unselected} }, func(t *testing.T, fp *fakeProm, q promclient.SampleQuerier) {
				s := newSource(t, q, tc.maxNames)
				got, err := s.GetNodeMetrics(context.Background(), tc.nodes)
				if err != nil {
					t.Fatalf("GetNodeMetrics: %v", err)
				}
				if diff := cmp.Diff(tc.want, nodeLines(got)); diff != "" {
					t.Errorf("node metrics (-want +got):\n%s", diff)
				}
				for _, nm := range got {
					if !nm.Timestamp.Time.Equal(sampleTime) || nm.Window.Duration != 5*time.Minute {
						t.Errorf("%s: timestamp %v window %v, want %v and 5m", nm.Name, nm.Timestamp, nm.Window, sampleTime)
					}
					if nm.Labels["kubernetes.io/hostname"] != nm.Name {
						t.Errorf("%s: labels %v not copied from the node", nm.Name, nm.Labels)
					}
				}
				if tc.wantQueries != nil {
					queries := fp.Queries()
					sortStrings(queries)
					if diff := cmp.Diff(tc.wantQueries, queries); diff != "" {
						t.Errorf("queries (-want +got):\n%s", diff)
					}
				}
			})
		})
	}
}

func TestSourceErrors(t *testing.T) {
	// isPromErr reports whether err wraps the client's error of the
	// fake's 503.
	isPromErr := func(err error) bool {
		var pe *promclient.Error
		return errors.As(err, &pe) && pe.StatusCode == http.StatusServiceUnavailable && strings.Contains(pe.Error(), "overloaded")
	}
	t.Run("a Prometheus error is an error, never an empty answer", func(t *testing.T) {
		fp := &fakeProm{ts: sampleTime, err: errors.New("overloaded")}
		s := newSource(t, fp.client(t), 0)
		_, err := s.GetPodMetrics(context.Background(), []*metav1.PartialObjectMetadata{pod("a", "p", nil)})
		var qe *resourcemetrics.QueryError
		if !errors.As(err, &qe) || !isPromErr(err) {
			t.Fatalf("GetPodMetrics error = %v, want a QueryError wrapping the Prometheus error", err)
		}
		if qe.Namespace != "a" || !strings.HasPrefix(qe.Path, "resourceRules.") {
			t.Errorf("QueryError = %+v, want namespace a and a resourceRules path", qe)
		}
		if _, err := s.GetNodeMetrics(context.Background(), []*metav1.PartialObjectMetadata{node("n")}); !isPromErr(err) {
			t.Errorf("GetNodeMetrics error = %v, want the Prometheus error", err)
		}
	})
	t.Run("no resourceRules", func(t *testing.T) {
		s := mustSource(t, staticConfig(compileRules(t, "rules: []\n"), (&fakeProm{}).client(t)))
		if _, err := s.GetPodMetrics(context.Background(), nil); !errors.Is(err, resourcemetrics.ErrNotConfigured) {
			t.Errorf("GetPodMetrics error = %v, want ErrNotConfigured", err)
		}
		if _, err := s.GetNodeMetrics(context.Background(), nil); !errors.Is(err, resourcemetrics.ErrNotConfigured) {
			t.Errorf("GetNodeMetrics error = %v, want ErrNotConfigured", err)
		}
	})
	t.Run("canceled request", func(t *testing.T) {
		fp := &fakeProm{ts: sampleTime}
		s := newSource(t, fp.client(t), 0)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var pods []*metav1.PartialObjectMetadata
		for i := range 50 {
			pods = append(pods, pod(fmt.Sprintf("ns%d", i), "p", nil))
		}
		if _, err := s.GetPodMetrics(ctx, pods); !errors.Is(err, context.Canceled) {
			t.Errorf("GetPodMetrics error = %v, want context.Canceled", err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		_, err := resourcemetrics.NewSource(resourcemetrics.SourceConfig{MaxNamesInQuery: -1})
		for _, want := range []string{"Rules is required", "Backends is required", "MaxNamesInQuery"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("NewSource error = %v, want it to mention %q", err, want)
			}
		}
	})
}

// countingQuerier records the most queries in flight at once.
type countingQuerier struct {
	inner                 promclient.SampleQuerier
	mu                    sync.Mutex
	inFlight, maxInFlight int
}

func (c *countingQuerier) QuerySamples(ctx context.Context, q string, ts time.Time) (promclient.Samples, error) {
	c.mu.Lock()
	c.inFlight++
	c.maxInFlight = max(c.maxInFlight, c.inFlight)
	c.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	return c.inner.QuerySamples(ctx, q, ts)
}

func TestParallelismBound(t *testing.T) {
	var pods []*metav1.PartialObjectMetadata
	fp := &fakeProm{ts: sampleTime}
	for i := range 12 {
		ns := fmt.Sprintf("ns-%d", i)
		pods = append(pods, pod(ns, "p", nil))
		fp.series = append(fp.series, podSeries("cpu", ns, "p", "c", 0.1), podSeries("memory", ns, "p", "c", 1))
	}
	for _, parallelism := range []int{1, 3} {
		t.Run(fmt.Sprint(parallelism), func(t *testing.T) {
			cq := &countingQuerier{inner: fp.client(t)}
			cfg := sourceConfig(t, cq)
			cfg.Parallelism = parallelism
			s := mustSource(t, cfg)
			got, err := s.GetPodMetrics(context.Background(), pods)
			if err != nil || len(got) != len(pods) {
				t.Fatalf("GetPodMetrics: %d pods, %v", len(got), err)
			}
			// Each namespace runs its CPU and memory query together.
			if cq.maxInFlight > 2*parallelism {
				t.Errorf("%d queries in flight, want at most %d", cq.maxInFlight, 2*parallelism)
			}
			if n := len(fp.Queries()); n == 0 {
				t.Error("no queries recorded")
			}
		})
	}
}
