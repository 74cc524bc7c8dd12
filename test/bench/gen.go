// Package bench holds the load harness of `make bench`: benchmarks that run
// the adapter against a real Prometheus (a TSDB backfilled with generated
// series, plus live scraped gauges) and a real kube-apiserver, and report
// discovery and serving figures with b.ReportMetric. The benchmarks carry
// the build tags e2e and bench; this file (the series generator) has none,
// so it is unit tested by `make unit`.
package bench

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"time"
)

// BulkSpec describes the generated series: Metrics metric names ×
// Namespaces namespaces × Pods pods, one gauge series each, with a sample
// at each of Times.
type BulkSpec struct {
	Metrics, Namespaces, Pods int
	Times                     []time.Time
}

// Series is the number of series the spec generates.
func (s BulkSpec) Series() int { return s.Metrics * s.Namespaces * s.Pods }

// BulkMetric, BulkNamespace and BulkPod name the generated series' metric,
// namespace and pod.
func BulkMetric(i int) string    { return fmt.Sprintf("bench_bulk_%02d", i) }
func BulkNamespace(i int) string { return fmt.Sprintf("bulk-%03d", i) }
func BulkPod(i int) string       { return fmt.Sprintf("pod-%05d", i) }

// WriteOpenMetrics writes the spec's series as OpenMetrics text, the input of
// `promtool tsdb create-blocks-from openmetrics`. Each metric family is
// contiguous and each series' samples come in increasing time order (all
// series of a family at the first time, then at the next, ...). Values are
// small integers.
func WriteOpenMetrics(w io.Writer, spec BulkSpec) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	line := make([]byte, 0, 128)
	namespaces := make([]string, spec.Namespaces)
	for i := range namespaces {
		namespaces[i] = BulkNamespace(i)
	}
	pods := make([]string, spec.Pods)
	for i := range pods {
		pods[i] = BulkPod(i)
	}
	for m := range spec.Metrics {
		name := BulkMetric(m)
		if _, err := fmt.Fprintf(bw, "# TYPE %s gauge\n", name); err != nil {
			return fmt.Errorf("writing openmetrics: %w", err)
		}
		for ti, t := range spec.Times {
			ts := t.Unix()
			for _, ns := range namespaces {
				for p, pod := range pods {
					line = append(line[:0], name...)
					line = append(line, `{namespace="`...)
					line = append(line, ns...)
					line = append(line, `",pod="`...)
					line = append(line, pod...)
					line = append(line, `"} `...)
					line = strconv.AppendInt(line, int64((p+ti)%100), 10)
					line = append(line, ' ')
					line = strconv.AppendInt(line, ts, 10)
					line = append(line, '\n')
					if _, err := bw.Write(line); err != nil {
						return fmt.Errorf("writing openmetrics: %w", err)
					}
				}
			}
		}
	}
	if _, err := bw.WriteString("# EOF\n"); err != nil {
		return fmt.Errorf("writing openmetrics: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing openmetrics: %w", err)
	}
	return nil
}
