package app

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/promscaler/promscaler/pkg/autoscaler"
	"github.com/promscaler/promscaler/pkg/controller"
	"github.com/promscaler/promscaler/test/kubefake"
)

func testLeaderElection(identity string) *LeaderElectionConfig {
	return &LeaderElectionConfig{
		Name: "promscaler-autoscaler", Namespace: "kube-system", Identity: identity,
		LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
		FenceMargin: 200 * time.Millisecond,
	}
}

func TestLeaderElectionLease(t *testing.T) {
	kube := k8sfake.NewClientset()
	started := make(chan struct{})
	lc := testLeaderElection("a")
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, lc.Namespace, lc.Name,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: lc.Identity})
	if err != nil {
		t.Fatal(err)
	}
	lec := leaderElectionConfig(lc, lock, leaderelection.NewLeaderHealthzAdaptor(time.Second), leaderelection.LeaderCallbacks{
		OnStartedLeading: func(context.Context) { close(started) },
		OnStoppedLeading: func() {},
	})
	le, err := leaderelection.NewLeaderElector(lec)
	if err != nil {
		t.Fatalf("client-go rejected the configuration: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { le.Run(ctx); close(done) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("never became leader")
	}
	lease, err := kube.CoordinationV1().Leases("kube-system").Get(ctx, "promscaler-autoscaler", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	if got := ptrString(lease.Spec.HolderIdentity); got != "a" {
		t.Errorf("lease holder = %q, want a", got)
	}
	cancel()
	<-done
	// ReleaseOnCancel: a stopping leader hands the lease over at once.
	lease, err = kube.CoordinationV1().Leases("kube-system").Get(context.Background(), "promscaler-autoscaler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptrString(lease.Spec.HolderIdentity); got != "" {
		t.Errorf("lease holder after stop = %q, want released", got)
	}
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestRun runs the completed controller against fake clients, with and
// without leader election: an HPA whose target is missing gets a
// FailedGetScale event through the events.k8s.io API, and the endpoints
// report it.
func TestRun(t *testing.T) {
	for _, leaderElect := range []bool{false, true} {
		name := "single"
		if leaderElect {
			name = "leader election"
		}
		t.Run(name, func(t *testing.T) {
			hpa := &autoscalingv2.HorizontalPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
					MaxReplicas:    5,
				},
			}
			kube := k8sfake.NewClientset(hpa)
			cfg := &Config{
				Mode:       controller.ModeFull,
				Autoscaler: autoscaler.DefaultConfig(), SyncPeriod: time.Hour, Workers: 1, RequestTimeout: time.Second,
			}
			if leaderElect {
				cfg.LeaderElection = testLeaderElection("test")
			}
			cc, err := complete(cfg, kube, clients{mapper: kubefake.Mapper(), scales: kubefake.NewScales(), metrics: &controller.APIMetricsClient{}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(cc.handler())
			defer srv.Close()

			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- cc.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-errc; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()

			var ev *eventsv1.Event
			err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
				list, err := kube.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				for i := range list.Items {
					if list.Items[i].Reason == "FailedGetScale" {
						ev = &list.Items[i]
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				t.Fatalf("no FailedGetScale event recorded: %v", err)
			}
			if ev.ReportingController != componentName || ev.Action != "GetScale" || ev.Type != "Warning" ||
				ev.Regarding.Kind != "HorizontalPodAutoscaler" || ev.Regarding.Name != "web" || ev.Note != `deployments.apps "web" not found` {
				t.Errorf("event = %+v", ev)
			}

			for path, want := range map[string]string{
				"/healthz": "ok",
				"/readyz":  "ok",
				"/metrics": `promscaler_autoscaler_decisions_total{decision="error",reason="FailedGetScale"} 1`,
			} {
				body := get(t, srv.URL+path)
				if !strings.Contains(body, want) {
					t.Errorf("GET %s = %q, want it to contain %q", path, body, want)
				}
			}
			if body := get(t, srv.URL+"/metrics"); !strings.Contains(body, "promscaler_autoscaler_leader 1") {
				t.Errorf("/metrics does not report leadership:\n%s", body)
			}
			if leaderElect {
				if _, err := kube.CoordinationV1().Leases("kube-system").Get(ctx, "promscaler-autoscaler", metav1.GetOptions{}); err != nil {
					t.Errorf("lease: %v", err)
				}
			}
		})
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}
