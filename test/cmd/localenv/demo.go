package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

const (
	demoNS       = "demo"
	demoApp      = "php"
	fpmCapacity  = 10 // php-fpm processes per pod
	demoMin      = 1
	demoMax      = 10
	demoDuration = 170 * time.Second
)

// demoLoad is the scenario: busy php-fpm processes over the whole app at
// time t since the start. It rises to 40, holds, then falls to 3.
func demoLoad(t time.Duration) float64 {
	s := t.Seconds()
	switch {
	case s < 10:
		return 3
	case s < 40: // ramp up
		return 3 + (40-3)*(s-10)/30
	case s < 75:
		return 40
	case s < 90: // ramp down
		return 40 - (40-3)*(s-75)/15
	default:
		return 3
	}
}

func runDemo(ctx context.Context, o *options) error {
	cfgFile := filepath.Join(o.dir+"-config", "demo-config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfgFile), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfgFile, demoConfig, 0o644); err != nil {
		return err
	}
	s, err := startStack(ctx, o, cfgFile)
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping every process and removing %s", s.env.Dir)
		s.env.Close()
		_ = os.RemoveAll(s.env.Dir)
		_ = os.RemoveAll(filepath.Dir(cfgFile))
		logf("done; nothing of the demo is left running")
	}()
	if s.adapter == nil {
		return fmt.Errorf("the demo needs the adapter: %w", s.adapterErr)
	}
	if err := s.writeEnvFile(o.envFile); err == nil {
		defer os.Remove(o.envFile)
		logf("while it runs, in another shell: source %s; $KUBECTL get hpa -n %s -w", o.envFile, demoNS)
	}
	env := s.env
	if err := createDemoApp(ctx, env); err != nil {
		return err
	}
	logf("demo: Deployment %s/%s (1 replica), HPA on fpm_active_rate (average 500m, %d..%d replicas)", demoNS, demoApp, demoMin, demoMax)
	logf("demo: each pod runs %d php-fpm processes; the load (busy processes) rises to 40, then falls to 3", fpmCapacity)
	if err := waitForMetric(ctx, s); err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("%6s %6s %8s %8s %9s  %s\n", "t", "load", "replicas", "desired", "hpa avg", "fpm_active_rate per pod (kubectl get --raw .../pods/*/fpm_active_rate)")

	start := time.Now()
	seenEvents := map[string]bool{}
	peak, finalReplicas := int32(0), int32(0)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		el := time.Since(start)
		load := demoLoad(el)
		pods, err := runningPods(ctx, env)
		if err != nil {
			return err
		}
		spreadLoad(s, pods, load)

		replicas, desired, avg := hpaState(ctx, env)
		if replicas > peak {
			peak = replicas
		}
		finalReplicas = replicas
		fmt.Printf("%5.0fs %6.1f %8d %8d %9s  %s\n", el.Seconds(), load, replicas, desired, avg, perPodMetric(ctx, env))
		printNewEvents(ctx, env, seenEvents)

		if el > demoDuration || (el > 100*time.Second && replicas == demoMin && peak > demoMin) {
			break
		}
		select {
		case <-ctx.Done():
			fmt.Println()
			logf("interrupted")
			return nil
		case <-tick.C:
		}
	}
	fmt.Println()
	logf("demo: peak %d replicas, back to %d after %s", peak, finalReplicas, time.Since(start).Round(time.Second))
	if peak <= demoMin || finalReplicas != demoMin {
		return errors.New("demo: the HPA did not scale up and back down; see the logs above")
	}
	return nil
}

func createDemoApp(ctx context.Context, env *framework.Env) error {
	if err := env.EnsureNamespace(ctx, demoNS); err != nil {
		return err
	}
	podLabels := map[string]string{"app": demoApp}
	one := int32(1)
	if err := env.CreateDeployment(ctx, demoNS, demoApp, one, podLabels); err != nil {
		return err
	}
	minR, upWindow, downWindow := int32(demoMin), int32(0), int32(10)
	target := resource.MustParse("500m")
	_, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(demoNS).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: demoApp},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: demoApp},
			MinReplicas:    &minR,
			MaxReplicas:    demoMax,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "fpm_active_rate"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
			}}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &upWindow},
				// 10s instead of the default 5 minutes, for a short demo.
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &downWindow},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the demo HPA: %w", err)
	}
	return nil
}

func runningPods(ctx context.Context, env *framework.Env) ([]string, error) {
	list, err := env.Client.CoreV1().Pods(demoNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + demoApp})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("listing demo pods: %w", err)
	}
	var names []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			names = append(names, p.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// spreadLoad shares the busy processes evenly among the running pods (a
// load balancer), each pod saturating at fpmCapacity.
func spreadLoad(s *stack, pods []string, load float64) {
	s.exporter.Delete("pm_status", map[string]string{"namespace": demoNS})
	if len(pods) == 0 {
		return
	}
	per := math.Min(load/float64(len(pods)), fpmCapacity)
	for _, p := range pods {
		_ = s.exporter.FPM(demoNS, p, math.Round(per*10)/10, fpmCapacity)
	}
}

func hpaState(ctx context.Context, env *framework.Env) (replicas, desired int32, avg string) {
	h, err := env.Client.AutoscalingV2().HorizontalPodAutoscalers(demoNS).Get(ctx, demoApp, metav1.GetOptions{})
	if err != nil {
		return 0, 0, "?"
	}
	avg = "-"
	for _, m := range h.Status.CurrentMetrics {
		if m.Pods != nil && m.Pods.Current.AverageValue != nil {
			avg = m.Pods.Current.AverageValue.String()
		}
	}
	d, err := env.Client.AppsV1().Deployments(demoNS).Get(ctx, demoApp, metav1.GetOptions{})
	if err == nil && d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	return replicas, h.Status.DesiredReplicas, avg
}

func perPodMetric(ctx context.Context, env *framework.Env) string {
	body, err := env.Client.Discovery().RESTClient().Get().
		AbsPath("/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + demoNS + "/pods/*/fpm_active_rate").DoRaw(ctx)
	if err != nil {
		return "(" + firstLine(err.Error()) + ")"
	}
	var list cmv1beta2.MetricValueList
	if err := json.Unmarshal(body, &list); err != nil {
		return "(undecodable answer)"
	}
	parts := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		name := it.DescribedObject.Name
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[i+1:]
		}
		parts = append(parts, fmt.Sprintf("%s=%.2f", name, it.Value.AsApproximateFloat64()))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// printNewEvents prints the HPA's events (its scaling decisions) once each.
func printNewEvents(ctx context.Context, env *framework.Env, seen map[string]bool) {
	evs, err := env.Client.CoreV1().Events(demoNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=HorizontalPodAutoscaler"})
	if err != nil {
		return
	}
	sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
	for _, e := range evs.Items {
		key := fmt.Sprintf("%s/%d", e.Name, e.Count)
		if seen[key] {
			continue
		}
		seen[key] = true
		fmt.Printf("        HPA %s: %s\n", e.Reason, e.Message)
	}
}

// waitForMetric publishes the starting load until the adapter has
// discovered fpm_active_rate and serves it for the first pod, so the
// scenario's clock starts with a working pipeline.
func waitForMetric(ctx context.Context, s *stack) error {
	logf("demo: waiting for the adapter to discover fpm_active_rate")
	deadline := time.Now().Add(90 * time.Second)
	for {
		pods, err := runningPods(ctx, s.env)
		if err != nil {
			return err
		}
		spreadLoad(s, pods, demoLoad(0))
		if len(pods) > 0 && strings.Contains(perPodMetric(ctx, s.env), "=") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: the adapter did not serve fpm_active_rate within 90s; its last log lines:\n%s", s.adapter.Process.Tail(20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
