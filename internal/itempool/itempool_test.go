package itempool

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/metrics/pkg/apis/custom_metrics"
)

func TestClass(t *testing.T) {
	tests := []struct {
		n      int
		want   int
		wantOK bool
	}{
		{n: 0}, {n: -1},
		{n: 1, want: 4, wantOK: true},
		{n: 16, want: 4, wantOK: true},
		{n: 17, want: 5, wantOK: true},
		{n: 100, want: 7, wantOK: true},
		{n: 1000, want: 10, wantOK: true},
		{n: 1 << 10, want: 10, wantOK: true},
		{n: 1<<10 + 1},
		{n: 5000},
	}
	for _, tc := range tests {
		got, ok := class(tc.n)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("class(%d) = (%d, %v), want (%d, %v)", tc.n, got, ok, tc.want, tc.wantOK)
		}
	}
}

func fillAll(items []custom_metrics.MetricValue, name string) {
	for i := range items {
		items[i].DescribedObject.Name = name
		items[i].Value = resource.MustParse("7")
		w := int64(60)
		items[i].WindowSeconds = &w
	}
}

// TestScopeReuse: a released slice comes back zeroed to the next scope;
// without a scope, or beyond the largest class, slices are never reused.
func TestScopeReuse(t *testing.T) {
	ctx, release := WithScope(context.Background())
	a := MetricValues(ctx, 100)
	if len(a) != 100 || cap(a) != 128 {
		t.Fatalf("len %d cap %d, want 100 and the class's 128", len(a), cap(a))
	}
	fillAll(a, "first")
	release()
	release() // idempotent

	// Released: the same context no longer hands out pooled slices.
	after := MetricValues(ctx, 100)
	if cap(after) != 100 {
		t.Errorf("after release: cap %d, want a plain allocation", cap(after))
	}

	// sync.Pool may drop an item (a quarter of them under -race): retry
	// with fresh scopes, each releasing its slice for the next.
	released := map[*custom_metrics.MetricValue]bool{&a[:1][0]: true}
	reused := false
	for range 20 {
		ctx2, release2 := WithScope(context.Background())
		b := MetricValues(ctx2, 90)
		if diff := cmp.Diff(make([]custom_metrics.MetricValue, 90), b); diff != "" {
			t.Fatalf("a slice from the pool is not zeroed (-want +got):\n%s", diff)
		}
		if released[&b[:1][0]] {
			reused = true
		}
		released[&b[:1][0]] = true
		// The whole backing array was cleared, beyond this request's length too.
		if full := b[:cap(b)]; full[99].DescribedObject.Name != "" || full[127].WindowSeconds != nil {
			t.Fatal("a slice from the pool keeps old items past its length")
		}
		release2()
		if reused {
			break
		}
	}
	if !reused {
		t.Error("a released slice of the same class was never handed out again")
	}

	plain := MetricValues(context.Background(), 100)
	if cap(plain) != 100 {
		t.Errorf("without a scope: cap %d, want a plain allocation", cap(plain))
	}
	ctx3, release3 := WithScope(context.Background())
	defer release3()
	big := MetricValues(ctx3, 5000)
	if len(big) != 5000 || cap(big) != 5000 {
		t.Errorf("beyond the classes: len %d cap %d, want a plain allocation of 5000", len(big), cap(big))
	}
}

// TestScopesConcurrent: concurrent requests each fill their own slices and
// read back their own values before releasing; run with -race.
func TestScopesConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			name := string(rune('a' + g))
			for i := range 200 {
				ctx, release := WithScope(context.Background())
				items := MetricValues(ctx, 10+i%50)
				fillAll(items, name)
				more := MetricValues(ctx, 3)
				fillAll(more, name)
				for _, it := range append(items, more...) {
					if it.DescribedObject.Name != name {
						t.Errorf("goroutine %s read %q: a slice in use was handed out twice", name, it.DescribedObject.Name)
						return
					}
				}
				release()
			}
		})
	}
	wg.Wait()
}
