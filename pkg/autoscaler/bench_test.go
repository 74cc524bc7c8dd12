package autoscaler

import (
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/promscaler/promscaler/internal/cputime"
)

// BenchmarkDecideSync decides one sync period's worth of HPAs: 10,000 HPAs
// of 10 pods each (a CPU utilization metric, plus a Pods metric on every
// other HPA, half with behavior), each with its own State. One op is one
// whole sync; ns/hpa is the per-HPA wall time, cpu-ns/op the CPU time of a
// whole sync (GC included).
func BenchmarkDecideSync(b *testing.B) {
	const hpas, podsPer = 10000, 10
	clk := clocktesting.NewFakePassiveClock(testNow)
	a, err := New(DefaultConfig(), clk)
	if err != nil {
		b.Fatal(err)
	}
	type item struct {
		in    Input
		state *State
	}
	items := make([]item, hpas)
	for i := range items {
		var hpa *autoscalingv2.HorizontalPodAutoscaler
		vals := make([]int64, podsPer)
		qps := make([]int64, podsPer)
		for j := range vals {
			vals[j] = int64(300 + (i+j)%7*100)
			qps[j] = int64(9000 + (i*j)%5*1000)
		}
		metrics := []MetricValues{perPod(vals...)}
		if i%2 == 0 {
			hpa = testHPA(nil, 20, cpuMetric(50), podsMetric("qps", "10"))
			metrics = append(metrics, perPod(qps...))
		} else {
			hpa = testHPA(nil, 20, cpuMetric(50))
		}
		hpa.Name = fmt.Sprintf("hpa-%d", i)
		if i%4 < 2 {
			hpa.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
		}
		items[i] = item{
			in:    Input{HPA: hpa, SpecReplicas: podsPer, StatusReplicas: podsPer, Selector: "app=test", Pods: readyPods(podsPer, 1000), Metrics: metrics},
			state: &State{},
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpuStart := cputime.Process()
	now := testNow
	for b.Loop() {
		now = now.Add(15 * time.Second)
		clk.SetTime(now)
		for i := range items {
			it := &items[i]
			d := a.Decide(it.state, it.in)
			if d.Rescale {
				a.FinishRescale(it.state, &d, nil)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/hpas, "ns/hpa")
	if cpu := cputime.Process() - cpuStart; cpu > 0 {
		// CPU time (all threads, GC included) per sync: the cost on a
		// machine shared with other work, where wall time overstates it
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
