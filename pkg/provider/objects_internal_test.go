package provider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestStripObjectMetaKeepsOnlyWhatListingNeeds(t *testing.T) {
	in := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "shop", UID: "u1", ResourceVersion: "42",
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			OwnerReferences: []metav1.OwnerReference{{Name: "web-abc"}},
			Finalizers:      []string{"x"},
		},
	}
	want := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "shop", UID: "u1", ResourceVersion: "42",
			Labels: map[string]string{"app": "web"},
		},
	}
	got, err := stripObjectMeta(in)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stripped (-want +got):\n%s", diff)
	}
	// Tombstones pass through.
	tomb := cache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: in}
	if got, err := stripObjectMeta(tomb); err != nil || !cmp.Equal(got, tomb) {
		t.Errorf("tombstone: got %v, %v", got, err)
	}
}
