//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHarnessSmoke checks the environment itself: the apiserver answers,
// Prometheus scrapes the exporter and answers a query with the value set,
// kubectl from the tools dir works, and pods can be made Running/Ready.
func TestHarnessSmoke(t *testing.T) {
	env, x, prom := startStack(t)
	ctx := ctxFor(t, 3*time.Minute)

	if err := x.FPM("smoke", "pod-a", 3, 12); err != nil {
		t.Fatal(err)
	}
	samples, err := prom.WaitForQuery(ctx, `pm_status{namespace="smoke",state="active processes"}`, 1, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 1 || samples[0].Value != 3 || samples[0].Labels["pod_name"] != "pod-a" {
		t.Fatalf("query result = %+v, want one sample pod_name=pod-a value 3", samples)
	}
	// A change is visible after the next scrape.
	if err := x.FPM("smoke", "pod-a", 7, 12); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := prom.Query(ctx, `pm_status{namespace="smoke",state="active processes"}`)
		if err == nil && len(s) == 1 && s[0].Value == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("value did not change to 7 within 20s: %+v, %v", s, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	out, err := env.Kubectl(ctx, "version", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "gitVersion: v1.37.2") {
		t.Errorf("kubectl version does not report v1.37.2 for both sides:\n%s", out)
	}
	if strings.Count(out, "gitVersion: v1.37.2") != 2 {
		t.Errorf("want client and server at v1.37.2:\n%s", out)
	}

	if err := env.EnsureNamespace(ctx, "smoke"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CreateReadyPods(ctx, "smoke", map[string]string{"app": "smoke"}, time.Minute, 50*time.Second, "pod-a", "pod-b"); err != nil {
		t.Fatal(err)
	}
	pods, err := env.Client.CoreV1().Pods("smoke").List(ctx, metav1.ListOptions{LabelSelector: "app=smoke"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("got %d pods, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.StartTime == nil {
			t.Errorf("pod %s: phase %s startTime %v, want Running with a startTime", p.Name, p.Status.Phase, p.Status.StartTime)
		}
		var ready *corev1.PodCondition
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				ready = &p.Status.Conditions[i]
			}
		}
		if ready == nil || ready.Status != corev1.ConditionTrue {
			t.Errorf("pod %s: no Ready=True condition", p.Name)
			continue
		}
		if age := time.Since(ready.LastTransitionTime.Time); age < 40*time.Second || age > 2*time.Minute {
			t.Errorf("pod %s: Ready since %s ago, want about 50s", p.Name, age)
		}
	}
	// Nothing listens beyond loopback.
	ls, err := env.Listeners()
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) < 4 {
		t.Errorf("found %d listening sockets, want at least etcd's 3 and the apiserver's: %+v", len(ls), ls)
	}
	for _, l := range ls {
		if !l.Addr.IsLoopback() {
			t.Errorf("%s listens on %s:%d, not loopback", l.Process, l.Addr, l.Port)
		}
	}
}
