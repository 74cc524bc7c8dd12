package objectcache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func fullMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "7",
		Labels:        map[string]string{"app": "x"},
		Annotations:   map[string]string{"big": "annotation"},
		Finalizers:    []string{"f"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
}

func TestStrip(t *testing.T) {
	kept := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "7",
		Labels: map[string]string{"app": "x"},
	}}
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: &metav1.PartialObjectMetadata{ObjectMeta: fullMeta()}}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{
			name: "partial object metadata keeps identity and labels only",
			in: &metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
				ObjectMeta: fullMeta(),
			},
			want: &Object{PartialObjectMetadata: kept},
		},
		{
			name: "a pod keeps its identity, labels and phase, not its spec and status",
			in: &corev1.Pod{
				ObjectMeta: fullMeta(),
				Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app", Image: "img"}}},
				Status:     corev1.PodStatus{Phase: corev1.PodPending, PodIP: "10.0.0.1"},
			},
			want: &Object{PartialObjectMetadata: kept, Phase: corev1.PodPending},
		},
		{name: "tombstone passes through", in: tombstone, want: tombstone},
		{name: "other types pass through", in: "x", want: "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Strip(tt.in)
			if err != nil {
				t.Fatalf("Strip: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Strip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObjectDeepCopyKeepsPhase(t *testing.T) {
	o := &Object{PartialObjectMetadata: metav1.PartialObjectMetadata{ObjectMeta: fullMeta()}, Phase: corev1.PodRunning}
	c := o.DeepCopyObject().(*Object)
	if diff := cmp.Diff(o, c); diff != "" {
		t.Errorf("DeepCopyObject (-want +got):\n%s", diff)
	}
	c.Labels["app"] = "changed"
	if o.Labels["app"] != "x" {
		t.Error("the copy shares its labels with the original")
	}
}
