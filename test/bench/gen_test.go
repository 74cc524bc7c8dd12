package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriteOpenMetrics(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	tests := []struct {
		name string
		spec BulkSpec
		want string
	}{
		{
			name: "empty",
			spec: BulkSpec{},
			want: "# EOF\n",
		},
		{
			name: "families contiguous, samples in time order",
			spec: BulkSpec{Metrics: 2, Namespaces: 1, Pods: 2, Times: []time.Time{t0, t0.Add(time.Minute)}},
			want: `# TYPE bench_bulk_00 gauge
bench_bulk_00{namespace="bulk-000",pod="pod-00000"} 0 1700000000
bench_bulk_00{namespace="bulk-000",pod="pod-00001"} 1 1700000000
bench_bulk_00{namespace="bulk-000",pod="pod-00000"} 1 1700000060
bench_bulk_00{namespace="bulk-000",pod="pod-00001"} 2 1700000060
# TYPE bench_bulk_01 gauge
bench_bulk_01{namespace="bulk-000",pod="pod-00000"} 0 1700000000
bench_bulk_01{namespace="bulk-000",pod="pod-00001"} 1 1700000000
bench_bulk_01{namespace="bulk-000",pod="pod-00000"} 1 1700000060
bench_bulk_01{namespace="bulk-000",pod="pod-00001"} 2 1700000060
# EOF
`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteOpenMetrics(&b, tc.spec); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("WriteOpenMetrics (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBulkSpecSeries(t *testing.T) {
	if got := (BulkSpec{Metrics: 10, Namespaces: 100, Pods: 1000}).Series(); got != 1_000_000 {
		t.Errorf("Series() = %d, want 1000000", got)
	}
}
