//go:build unix

package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/internal/cputime"
	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/test/kubefake"
)

// benchMetrics answers resource metrics from a map keyed by
// namespace/selector, as fast as a metrics API can be.
type benchMetrics struct {
	pods map[string][]metricsapi.PodMetrics
}

var errBenchUnsupported = errors.New("not served by the benchmark")

func (m *benchMetrics) PodResourceMetrics(_ context.Context, ns string, sel labels.Selector) ([]metricsapi.PodMetrics, error) {
	return m.pods[ns+"/"+sel.String()], nil
}

func (m *benchMetrics) PodsCustomMetric(context.Context, string, string, labels.Selector, labels.Selector) ([]customapi.MetricValue, error) {
	return nil, errBenchUnsupported
}

func (m *benchMetrics) ObjectCustomMetric(context.Context, string, string, autoscalingv2.CrossVersionObjectReference, labels.Selector) (*customapi.MetricValue, error) {
	return nil, errBenchUnsupported
}

func (m *benchMetrics) ExternalMetric(context.Context, string, string, labels.Selector) ([]externalapi.ExternalMetricValue, error) {
	return nil, errBenchUnsupported
}

// BenchmarkSync10kHPAs measures one sync of 10,000 HPAs (100 namespaces ×
// 100 HPAs, 10 ready pods each, a CPU utilization target; one HPA in five
// above target) through the workqueue with the default 5 workers: per HPA
// a /scale read, a pod list from the informer cache, a resource metrics
// read, the decision and a status write. The fakes never feed the status
// writes back into the informer, so every sync writes all 10,000 statuses:
// the worst case. Run with -cpu 2 for the 2-core figure.
func BenchmarkSync10kHPAs(b *testing.B) {
	const (
		namespaces   = 100
		hpasPerNS    = 100
		podsPerHPA   = 10
		total        = namespaces * hpasPerNS
		cpuRequest   = 100 // milli
		targetPct    = 50
		scalingEvery = 5
	)
	start := time.Now()
	var (
		hpaList = &autoscalingv2.HorizontalPodAutoscalerList{}
		podList = &v1.PodList{}
		metrics = &benchMetrics{pods: map[string][]metricsapi.PodMetrics{}}
		scales  = kubefake.NewScales()
		keys    = make([]string, 0, total)
	)
	started := metav1.NewTime(start.Add(-time.Hour))
	for n := range namespaces {
		ns := fmt.Sprintf("ns-%03d", n)
		for i := range hpasPerNS {
			name := fmt.Sprintf("app-%03d", i)
			hpa := cpuHPA(name, 1, 100, targetPct)
			hpa.Namespace = ns
			hpaList.Items = append(hpaList.Items, *hpa)
			keys = append(keys, ns+"/"+name)
			sel := "app=" + name
			scales.Set(kubefake.DeploymentScale(ns, name, podsPerHPA, sel))
			usage := int64(cpuRequest * targetPct / 100)
			if i%scalingEvery == 0 {
				usage = usage * 3 / 2
			}
			for p := range podsPerHPA {
				pod := readyPod(fmt.Sprintf("%s-%d", name, p), name, cpuRequest)
				pod.Namespace = ns
				pod.Status.StartTime = &started
				pod.Status.Conditions[0].LastTransitionTime = started
				podList.Items = append(podList.Items, *pod)
				metrics.pods[ns+"/"+sel] = append(metrics.pods[ns+"/"+sel], metricsapi.PodMetrics{
					ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns},
					Timestamp:  metav1.NewTime(start),
					Window:     metav1.Duration{Duration: 30 * time.Second},
					Containers: []metricsapi.ContainerMetrics{{Name: "app", Usage: v1.ResourceList{
						v1.ResourceCPU: *resource.NewMilliQuantity(usage, resource.DecimalSI)}}},
				})
			}
		}
	}

	// client-go's fake clientset, with the object tracker bypassed: lists
	// answer the prepared objects, watches stay silent, status writes are
	// counted.
	kube := k8sfake.NewClientset()
	kube.PrependReactor("list", "horizontalpodautoscalers", func(core.Action) (bool, runtime.Object, error) {
		return true, hpaList.DeepCopy(), nil
	})
	kube.PrependReactor("list", "pods", func(core.Action) (bool, runtime.Object, error) {
		return true, podList.DeepCopy(), nil
	})
	kube.PrependWatchReactor("*", func(core.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	var statusWrites atomic.Int64
	kube.PrependReactor("update", "horizontalpodautoscalers", func(a core.Action) (bool, runtime.Object, error) {
		statusWrites.Add(1)
		return true, a.(core.UpdateAction).GetObject(), nil
	})
	kube.ClearActions()

	decider, err := autoscaler.New(autoscaler.DefaultConfig(), clock.RealClock{})
	if err != nil {
		b.Fatal(err)
	}
	tel, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	c, err := New(Config{
		Mode:        ModeFull,
		Autoscaler:  decider,
		HPAs:        kube.AutoscalingV2(),
		Scales:      scales,
		Mapper:      kubefake.Mapper(),
		Metrics:     metrics,
		HPAInformer: factory.Autoscaling().V2().HorizontalPodAutoscalers(),
		PodInformer: factory.Core().V1().Pods(),
		Recorder:    events.NewFakeRecorder(total * 4),
		Telemetry:   tel,
		SyncPeriod:  time.Hour, // no periodic re-adds while measuring
		Workers:     5,
	})
	if err != nil {
		b.Fatal(err)
	}
	recorder := c.cfg.Recorder.(*events.FakeRecorder)
	var (
		done     atomic.Int64
		syncDone = make(chan struct{}, 1)
	)
	c.reconciled = func(string) {
		if done.Add(1) == total {
			syncDone <- struct{}{}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.HasSynced) {
		b.Fatal("caches did not sync")
	}
	go func() { // drain events so the fake recorder never blocks
		for range recorder.Events {
		}
	}()
	// The handler's initial adds queued every HPA: that is the first sync
	// (not measured; it also rescales one target in five).
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	<-syncDone

	b.ReportAllocs()
	cpuStart := cputime.Process()
	b.ResetTimer()
	for range b.N {
		done.Store(0)
		for _, k := range keys {
			c.queue.Add(k)
		}
		<-syncDone
		// The fakes record every call; keep that history (not the
		// controller's) from growing the heap the GC scans.
		b.StopTimer()
		kube.ClearActions()
		scales.ClearActions()
		b.StartTimer()
	}
	b.StopTimer()
	cpu := cputime.Process() - cpuStart
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*total), "ns/hpa")
	// On a shared machine wall time mostly measures waiting for a core;
	// the process CPU time per sync is the capacity figure.
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	cancel()
	if err := <-runErr; err != nil {
		b.Fatal(err)
	}
	if got := statusWrites.Load(); got < int64(total*(b.N+1)) {
		b.Fatalf("%d status writes over %d syncs, want %d", got, b.N+1, total*(b.N+1))
	}
	scaled := 0
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		if scales.Get(ns, name).Spec.Replicas != podsPerHPA {
			scaled++
		}
	}
	if scaled != total/scalingEvery {
		b.Fatalf("%d targets rescaled, want %d", scaled, total/scalingEvery)
	}
}
