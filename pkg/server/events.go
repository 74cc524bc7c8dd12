package server

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/promscaler/promscaler/pkg/reload"
)

// eventsComponent is the reporting controller of the adapter's Events.
const eventsComponent = "promscaler-adapter"

// maxEventNote bounds an Event's note (the API refuses more than 1 KiB).
const maxEventNote = 1000

// podEvents records Events on the adapter's own Pod (events.k8s.io), for
// what an operator should see with kubectl describe pod: a configuration
// file rejected on reload.
type podEvents struct {
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorder
	pod         *corev1.ObjectReference
}

// newPodEvents records on pod through client. Events recorded before start
// are dropped.
func newPodEvents(client kubernetes.Interface, pod types.NamespacedName) *podEvents {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	return &podEvents{
		broadcaster: b,
		recorder:    b.NewRecorder(scheme.Scheme, eventsComponent),
		pod:         &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name},
	}
}

// start sends the Events from now until ctx ends; stop flushes them.
func (p *podEvents) start(ctx context.Context) {
	p.broadcaster.StartRecordingToSink(ctx.Done())
}

func (p *podEvents) stop() { p.broadcaster.Shutdown() }

// configRejected records that a configuration file (file, "" for the
// sources) was not put in service on reload: a Warning, reason
// ConfigRejected.
func (p *podEvents) configRejected(file string, err error) {
	note := err.Error()
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	reason := "ConfigRejected"
	if errors.Is(err, reload.ErrRulesEmptied) {
		reason = "RulesEmptied"
	}
	p.recorder.Eventf(p.pod, nil, corev1.EventTypeWarning, reason, "Reload", "%s", note)
}
