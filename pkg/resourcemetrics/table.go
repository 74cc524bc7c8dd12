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

func podTable(resourceVersion, cont string, items []metrics.PodMetrics) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: tableColumns}
	t.ResourceVersion, t.Continue = resourceVersion, cont
	t.Rows = make([]metav1.TableRow, 0, len(items))
	for i := range items {
		pm := &items[i]
		var cpu, mem resource.Quantity
		for _, c := range pm.Containers {
			if q, ok := c.Usage[corev1.ResourceCPU]; ok {
				cpu.Add(q)
			}
			if q, ok := c.Usage[corev1.ResourceMemory]; ok {
				mem.Add(q)
			}
		}
		t.Rows = append(t.Rows, tableRow(pm.Name, cpu, mem, pm.Window.Duration.String(), pm))
	}
	return t
}

func nodeTable(resourceVersion, cont string, items []metrics.NodeMetrics) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: tableColumns}
	t.ResourceVersion, t.Continue = resourceVersion, cont
	t.Rows = make([]metav1.TableRow, 0, len(items))
	for i := range items {
		nm := &items[i]
		t.Rows = append(t.Rows, tableRow(nm.Name, nm.Usage[corev1.ResourceCPU], nm.Usage[corev1.ResourceMemory], nm.Window.Duration.String(), nm))
	}
	return t
}

func tableRow(name string, cpu, mem resource.Quantity, window string, obj runtime.Object) metav1.TableRow {
	return metav1.TableRow{
		Cells:  []any{name, cpu.String(), mem.String(), window},
		Object: runtime.RawExtension{Object: obj},
	}
}
