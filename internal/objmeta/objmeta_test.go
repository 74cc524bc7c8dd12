package objmeta

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func fullPod() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "7",
			Labels:        map[string]string{"app": "x"},
			Annotations:   map[string]string{"big": "annotation"},
			Finalizers:    []string{"f"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
	}
}

func TestStrip(t *testing.T) {
	full := fullPod()
	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: full}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{
			name: "partial object metadata keeps identity and labels only",
			in:   full,
			want: &metav1.PartialObjectMetadata{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{
					Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "7",
					Labels: map[string]string{"app": "x"},
				},
			},
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

func TestIdentity(t *testing.T) {
	got, err := Identity(fullPod())
	if err != nil {
		t.Fatalf("Identity: %v", err)
	}
	want := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "7"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Identity mismatch (-want +got):\n%s", diff)
	}
}
