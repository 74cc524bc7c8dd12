package resourcemetrics

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/metrics/pkg/apis/metrics"
)

// tableColumns are the columns of `kubectl get podmetrics/nodemetrics`:
// the name, the CPU and memory usage (a pod's summed over its containers)
// and the window, as metrics-server shows them.
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the resource"},
	{Name: "CPU", Type: "string", Format: "quantity", Description: "CPU usage, in cores"},
	{Name: "Memory", Type: "string", Format: "quantity", Description: "Memory usage (working set), in bytes"},
	{Name: "Window", Type: "string", Format: "duration", Description: "Window the CPU usage rate is computed over"},
}

// table is the table of items, a row each.
func table[T any](resourceVersion, cont string, items []T, row func(*T) metav1.TableRow) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: tableColumns, Rows: make([]metav1.TableRow, 0, len(items))}
	t.ResourceVersion, t.Continue = resourceVersion, cont
	for i := range items {
		t.Rows = append(t.Rows, row(&items[i]))
	}
	return t
}

// podRow is a pod's row: its usage summed over its containers.
func podRow(pm *metrics.PodMetrics) metav1.TableRow {
	var cpu, mem resource.Quantity
	for _, c := range pm.Containers {
		if q, ok := c.Usage[corev1.ResourceCPU]; ok {
			cpu.Add(q)
		}
		if q, ok := c.Usage[corev1.ResourceMemory]; ok {
			mem.Add(q)
		}
	}
	return tableRow(pm.Name, cpu, mem, pm.Window.Duration.String(), pm)
}

func nodeRow(nm *metrics.NodeMetrics) metav1.TableRow {
	return tableRow(nm.Name, nm.Usage[corev1.ResourceCPU], nm.Usage[corev1.ResourceMemory], nm.Window.Duration.String(), nm)
}

func tableRow(name string, cpu, mem resource.Quantity, window string, obj runtime.Object) metav1.TableRow {
	return metav1.TableRow{
		Cells:  []any{name, cpu.String(), mem.String(), window},
		Object: runtime.RawExtension{Object: obj},
	}
}
