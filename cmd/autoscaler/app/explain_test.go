package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	core "k8s.io/client-go/testing"
	externalapi "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	cmfake "k8s.io/metrics/pkg/client/custom_metrics/fake"
	emfake "k8s.io/metrics/pkg/client/external_metrics/fake"

	"github.com/promscaler/promscaler/pkg/controller"
	"github.com/promscaler/promscaler/pkg/hpaexplain"
	"github.com/promscaler/promscaler/test/kubefake"
)

// fakeExplainClients serves HPA jobs/worker (External metric queue_depth,
// Value target 100, 2 ready pods) with the queue at queue milli-units.
func fakeExplainClients(queue int64) explainClients {
	return func(*rest.Config, time.Duration) (kubernetes.Interface, clients, error) {
		target := resource.MustParse("100")
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "jobs"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "worker"},
				MaxReplicas:    10,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &target}}}},
			},
		}
		objs := []runtime.Object{hpa}
		for _, name := range []string{"worker-a", "worker-b"} {
			objs = append(objs, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "jobs", Labels: map[string]string{"app": "worker"}},
				Status:     v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
			})
		}
		external := &emfake.FakeExternalMetricsClient{}
		external.AddReactor("list", "queue_depth", func(core.Action) (bool, runtime.Object, error) {
			return true, &externalapi.ExternalMetricValueList{Items: []externalapi.ExternalMetricValue{
				{MetricName: "queue_depth", Value: *resource.NewMilliQuantity(queue, resource.DecimalSI)}}}, nil
		})
		return k8sfake.NewClientset(objs...), clients{
			mapper: kubefake.Mapper(),
			scales: kubefake.NewScales(kubefake.DeploymentScale("jobs", "worker", 2, "app=worker")),
			metrics: &controller.APIMetricsClient{Resource: metricsfake.NewSimpleClientset().MetricsV1beta1(),
				Custom: &cmfake.FakeCustomMetricsClient{}, External: external},
		}, nil
	}
}

func TestExplainCommand(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, namespace: jobs}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := "--kubeconfig=" + kubeconfig
	cases := []struct {
		name      string
		args      []string
		queue     int64
		code      int
		stdoutHas []string
		stderrHas []string
		json      func(t *testing.T, x *hpaexplain.Explanation)
	}{
		{name: "scaling, namespace from the context", args: []string{kc, "worker"}, queue: 350_000, code: 0,
			stdoutHas: []string{"HPA jobs/worker", "usage ratio (current/target): 3.500", "Decision: scale Deployment worker from 2 to 4 replicas"}},
		{name: "held by the tolerance, json", args: []string{kc, "jobs/worker", "-o", "json"}, queue: 105_000, code: 0,
			json: func(t *testing.T, x *hpaexplain.Explanation) {
				if x.Rescale || x.DesiredReplicas != 2 || x.Metrics[0].WithinTolerance == nil || !*x.Metrics[0].WithinTolerance {
					t.Errorf("want 2 replicas kept within the tolerance, got %+v", x)
				}
			}},
		{name: "a wider tolerance flag keeps the count", args: []string{kc, "worker", "--horizontal-pod-autoscaler-tolerance=3"}, queue: 350_000, code: 0,
			stdoutHas: []string{"within [-2.000, 4.000]", "Decision: keep 2 replicas"}},
		{name: "missing HPA", args: []string{kc, "jobs/nope"}, code: 1, stderrHas: []string{"reading HPA jobs/nope"}},
		{name: "no HPA", args: []string{kc}, code: 2, stderrHas: []string{"an HPA to explain is required"}},
		{name: "bad name and output together", args: []string{kc, "a/b/c", "-o", "yaml"}, code: 2,
			stderrHas: []string{`"a/b/c": want HPA or NAMESPACE/HPA`, `-o: must be text or json, got "yaml"`}},
		{name: "namespace conflict", args: []string{kc, "jobs/worker", "-n", "other"}, code: 2, stderrHas: []string{`conflicts with -n "other"`}},
		{name: "bad algorithm flag", args: []string{kc, "worker", "--horizontal-pod-autoscaler-tolerance=-1"}, code: 2,
			stderrHas: []string{"--horizontal-pod-autoscaler-tolerance -1: must not be negative"}},
		{name: "help names the docs", args: []string{"-h"}, code: 0, stdoutHas: []string{"usage: autoscaler explain [NAMESPACE/]HPA", "docs/explain.md"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runExplain("autoscaler explain", tc.args, &stdout, &stderr, fakeExplainClients(tc.queue))
			if code != tc.code {
				t.Fatalf("exit code = %d, want %d (stderr: %s)", code, tc.code, stderr.String())
			}
			for _, s := range tc.stdoutHas {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout does not contain %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range tc.stderrHas {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr %q does not contain %q", stderr.String(), s)
				}
			}
			if tc.json != nil {
				var x hpaexplain.Explanation
				if err := json.Unmarshal(stdout.Bytes(), &x); err != nil {
					t.Fatalf("output is not JSON: %v\n%s", err, stdout.String())
				}
				tc.json(t, &x)
			}
		})
	}
}

func TestRunDispatchesExplain(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"explain", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "usage: autoscaler explain") {
		t.Errorf("autoscaler explain -h: code %d, stdout %q", code, stdout.String())
	}
}
