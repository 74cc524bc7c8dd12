package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// TestPodEventOnRejectedConfig: a configuration file rejected on reload is
// a Warning Event on the adapter's own Pod.
func TestPodEventOnRejectedConfig(t *testing.T) {
	client := fake.NewClientset()
	ev := newPodEvents(client, types.NamespacedName{Namespace: "monitoring", Name: "promscaler-adapter-7d9f"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev.start(ctx)
	defer ev.stop()

	ev.configRejected("/etc/adapter/config.yaml", errors.New("new version of configuration file /etc/adapter/config.yaml rejected, its previous version stays in service: "+strings.Repeat("x", 2000)))
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := client.EventsV1().Events("monitoring").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 {
			e := list.Items[0]
			if e.Regarding.Kind != "Pod" || e.Regarding.Name != "promscaler-adapter-7d9f" || e.Regarding.Namespace != "monitoring" ||
				e.Type != "Warning" || e.Reason != "ConfigRejected" || e.ReportingController != eventsComponent ||
				!strings.Contains(e.Note, "/etc/adapter/config.yaml rejected, its previous version stays in service") || len(e.Note) > 1024 {
				t.Errorf("event = regarding %+v, type %s, reason %s, controller %s, note (%d bytes) %.120q",
					e.Regarding, e.Type, e.Reason, e.ReportingController, len(e.Note), e.Note)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event recorded (%d events)", len(list.Items))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
