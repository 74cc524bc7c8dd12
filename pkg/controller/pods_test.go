package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func TestListPodsIndexMatchesLister(t *testing.T) {
	pod := func(ns, name string, l map[string]string) runtime.Object {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}}
	}
	h := newHarness(t, world{objects: []runtime.Object{
		pod("default", "a", map[string]string{"app": "web", "tier": "front"}),
		pod("default", "b", map[string]string{"app": "web", "tier": "back"}),
		pod("default", "c", map[string]string{"app": "db"}),
		pod("default", "d", nil),
		pod("other", "e", map[string]string{"app": "web", "tier": "front"}),
	}})
	if h.c.podIndexer == nil {
		t.Fatal("the pod label index was not installed")
	}
	tests := []struct {
		selector string
		want     []string
	}{
		{"app=web", []string{"a", "b"}},
		{"app==web,tier=front", []string{"a"}},
		{"app in (web),tier!=front", []string{"b"}},
		{"app in (web,db)", []string{"a", "b", "c"}},
		{"tier", []string{"a", "b"}},
		{"!app", []string{"d"}},
		{"", []string{"a", "b", "c", "d"}},
		{"app=none", nil},
	}
	for _, tt := range tests {
		t.Run(tt.selector, func(t *testing.T) {
			sel, err := labels.Parse(tt.selector)
			if err != nil {
				t.Fatal(err)
			}
			pods, err := h.c.listPods("default", sel)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pods {
				got = append(got, p.Name)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("listPods(%q) (-want +got):\n%s", tt.selector, diff)
			}
		})
	}
}

func TestUpdateHandlerGeneration(t *testing.T) {
	tests := []struct {
		name    string
		newGen  int64
		wantNow int // queue length right after the update
	}{
		{"spec change reconciles now", 2, 1},
		{"status-only change waits for the period", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, world{})
			old := cpuHPA("web", 1, 10, 50)
			cur := old.DeepCopy()
			cur.Generation = tt.newGen
			h.c.updateHPA(old, cur)
			if got := h.c.queue.Len(); got != tt.wantNow {
				t.Errorf("queue length = %d, want %d", got, tt.wantNow)
			}
		})
	}
}

func TestScaleEventsCarryOver(t *testing.T) {
	// behavior: scale up by at most 1 pod per minute. The second reconcile,
	// 15s later and still above target, must count the first rescale.
	hpa := cpuHPA("web", 1, 10, 50)
	hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: new(int32),
			Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}},
		},
	}
	h := newHarness(t, world{
		hpas:    []*autoscalingv2.HorizontalPodAutoscaler{hpa},
		targets: []target{{name: "web", replicas: 2, cpuRequest: 100, cpuUsage: []int64{150, 150}}},
	})
	steps := []struct {
		after time.Duration
		want  int32
	}{
		{0, 3},                // +1 (policy)
		{15 * time.Second, 3}, // within the period: no room
		{50 * time.Second, 4}, // 65s after the first rescale
	}
	for i, s := range steps {
		h.clock.Step(s.after)
		if err := h.reconcile("web"); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		h.waitForCache("web")
		if got := h.replicas("web"); got != s.want {
			t.Errorf("step %d: replicas = %d, want %d", i, got, s.want)
		}
	}
	st := h.hpa("web").Status
	c := st.Conditions
	if len(c) < 3 || c[2].Type != autoscalingv2.ScalingLimited || c[2].Reason != "ScaleUpLimit" {
		t.Errorf("conditions = %v, want ScalingLimited ScaleUpLimit", condSummary(st))
	}
}

func TestEnsureFresh(t *testing.T) {
	hpa := cpuHPA("web", 1, 10, 50)
	hpa.UID = "uid-1"
	tests := []struct {
		name      string
		entry     hpaEntry
		readRV    string
		wantErr   bool
		wantClear bool
	}{
		{name: "nothing written", entry: hpaEntry{}, readRV: "5"},
		{name: "cache behind our write", entry: hpaEntry{uid: "uid-1", wroteRV: "10"}, readRV: "9", wantErr: true},
		{name: "cache caught up", entry: hpaEntry{uid: "uid-1", wroteRV: "10"}, readRV: "10", wantClear: true},
		{name: "cache ahead", entry: hpaEntry{uid: "uid-1", wroteRV: "10"}, readRV: "12", wantClear: true},
		{name: "HPA recreated", entry: hpaEntry{uid: "uid-0", wroteRV: "10"}, readRV: "9", wantClear: true},
		{name: "cache version unknown", entry: hpaEntry{uid: "uid-1", wroteRV: "10"}, readRV: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{hpaStore: &cache.FakeCustomStore{LastStoreSyncResourceVersionFunc: func() string { return tt.readRV }}}
			e := tt.entry
			err := c.ensureFresh(&e, hpa)
			if (err != nil) != tt.wantErr {
				t.Errorf("ensureFresh error = %v, want error: %v", err, tt.wantErr)
			}
			if cleared := e.wroteRV == "" && tt.entry.wroteRV != ""; cleared != tt.wantClear {
				t.Errorf("written version cleared = %v, want %v", cleared, tt.wantClear)
			}
		})
	}
}

func TestStatusWriteRecordsVersion(t *testing.T) {
	for _, check := range []bool{false, true} {
		h := newHarness(t, world{
			hpas:    []*autoscalingv2.HorizontalPodAutoscaler{cpuHPA("web", 1, 10, 50)},
			targets: []target{{name: "web", replicas: 2, cpuRequest: 100, cpuUsage: []int64{52, 53}}},
		}, func(_ *harness, c *Config) { c.StaleReadCheck = check })
		h.kube.PrependReactor("update", "horizontalpodautoscalers", func(a core.Action) (bool, runtime.Object, error) {
			obj := a.(core.UpdateAction).GetObject().(*autoscalingv2.HorizontalPodAutoscaler).DeepCopy()
			obj.ResourceVersion = "42"
			return true, obj, nil
		})
		if err := h.reconcile("web"); err != nil {
			t.Fatal(err)
		}
		want := ""
		if check {
			want = "42"
		}
		if got := h.c.entryFor("default/web").wroteRV; got != want {
			t.Errorf("StaleReadCheck=%v: recorded written version %q, want %q", check, got, want)
		}
	}
}
