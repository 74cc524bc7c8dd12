package resourcemetrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/metrics"
	"k8s.io/utils/clock"

	"github.com/promscaler/promscaler/pkg/promclient"
	"github.com/promscaler/promscaler/pkg/rules"
)

// Defaults of SourceConfig.
const (
	// DefaultParallelism is the most namespaces queried at once (each with
	// its CPU and memory query in parallel).
	DefaultParallelism = 8
)

// ErrNotConfigured is returned when the configuration in service has no
// resourceRules.
var ErrNotConfigured = errors.New("the configuration has no resourceRules")

// Resource names used in errors and logs.
const (
	resourceCPU    = "cpu"
	resourceMemory = "memory"
)

// SourceConfig is what NewSource needs. Rules and Backends are required.
type SourceConfig struct {
	// Rules returns the compiled configuration in service (it changes on hot
	// reload); its ResourceRules are used.
	Rules func() *rules.RuleSet
	// Backends look up the querier of the backend the resourceRules name
	// ("" and "default": the default backend): promclient.LookupAs on the
	// adapter's promclient.Backends (its clients coalesce identical
	// queries and enforce the per-query timeout), promclient.Single for
	// one Prometheus.
	Backends func(name string) (promclient.SampleQuerier, bool)
	// Clock stamps the objects' creationTimestamp, as metrics-server does.
	// Nil means the real clock.
	Clock clock.PassiveClock
	// MaxNamesInQuery: see rules.DefaultMaxNamesInQuery; 0 means it.
	MaxNamesInQuery int
	// Parallelism: see DefaultParallelism; 0 means the default.
	Parallelism int
}

// Source answers pod and node metrics from Prometheus. It is safe for
// concurrent use.
type Source struct {
	rules       func() *rules.RuleSet
	backends    func(name string) (promclient.SampleQuerier, bool)
	clock       clock.PassiveClock
	maxNames    int
	parallelism int
}

var (
	_ PodMetricsGetter  = (*Source)(nil)
	_ NodeMetricsGetter = (*Source)(nil)
)

// NewSource returns a Source.
func NewSource(cfg SourceConfig) (*Source, error) {
	var errs []error
	if cfg.Rules == nil {
		errs = append(errs, errors.New("resource metrics source: Rules is required"))
	}
	if cfg.Backends == nil {
		errs = append(errs, errors.New("resource metrics source: Backends is required"))
	}
	if cfg.MaxNamesInQuery < 0 {
		errs = append(errs, fmt.Errorf("resource metrics source: MaxNamesInQuery must not be negative, got %d", cfg.MaxNamesInQuery))
	}
	if cfg.Parallelism < 0 {
		errs = append(errs, fmt.Errorf("resource metrics source: Parallelism must not be negative, got %d", cfg.Parallelism))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &Source{rules: cfg.Rules, backends: cfg.Backends, clock: cfg.Clock, maxNames: cfg.MaxNamesInQuery, parallelism: cfg.Parallelism}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.maxNames == 0 {
		s.maxNames = rules.DefaultMaxNamesInQuery
	}
	if s.parallelism == 0 {
		s.parallelism = DefaultParallelism
	}
	return s, nil
}

// QueryError is a failed resource query: which rule and query, for which
// namespace, and the cause (a *promclient.Error from Prometheus, or a rendering
// error). The API turns it into a 503 when Prometheus could not answer and a
// 500 otherwise.
type QueryError struct {
	// Path is the query's place in the configuration, e.g.
	// "resourceRules.cpu.containerQuery".
	Path string
	// Namespace is the namespace queried; "" for nodes.
	Namespace string
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *QueryError) Error() string {
	if e.Namespace != "" {
		return fmt.Sprintf("%s for namespace %q: %v", e.Path, e.Namespace, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *QueryError) Unwrap() error { return e.Err }

// point is one usable sample: its value and timestamp.
type point struct {
	value float64
	ts    time.Time
}

// containerPoint is one container's sample.
type containerPoint struct {
	container string
	point
}

// containerPoints maps a pod name to its containers' samples (a pod has
// few containers: a slice is cheaper than a map).
type containerPoints map[string][]containerPoint

// find returns the sample of container c.
func find(cs []containerPoint, c string) (point, bool) {
	for i := range cs {
		if cs[i].container == c {
			return cs[i].point, true
		}
	}
	return point{}, false
}

// GetPodMetrics returns the metrics of the given pods that have complete
// samples, sorted by namespace then name. See docs/resource-metrics.md for
// which pods and containers are left out.
func (s *Source) GetPodMetrics(ctx context.Context, pods []*metav1.PartialObjectMetadata) ([]metrics.PodMetrics, error) {
	rr, window, querier, err := s.resourceRules()
	if err != nil {
		return nil, err
	}
	byNS := make(map[string][]string)
	for _, p := range pods {
		byNS[p.Namespace] = append(byNS[p.Namespace], p.Name)
	}
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)

	type nsResult struct{ cpu, mem containerPoints }
	results := make([]nsResult, len(namespaces))
	err = s.forEach(ctx, len(namespaces), func(ctx context.Context, i int) error {
		ns := namespaces[i]
		req := s.request(ns, byNS[ns])
		var cpu, mem containerPoints
		err := both(ctx,
			func(ctx context.Context) (err error) {
				cpu, err = s.queryContainers(ctx, querier, rr.CPU, req)
				return err
			},
			func(ctx context.Context) (err error) {
				mem, err = s.queryContainers(ctx, querier, rr.Memory, req)
				return err
			})
		results[i] = nsResult{cpu: cpu, mem: mem}
		return err
	})
	if err != nil {
		return nil, err
	}
	nsIndex := make(map[string]int, len(namespaces))
	for i, ns := range namespaces {
		nsIndex[ns] = i
	}
	now := metav1.NewTime(s.clock.Now())
	out := make([]metrics.PodMetrics, 0, len(pods))
	for _, p := range pods {
		r := results[nsIndex[p.Namespace]]
		pm, ok := buildPodMetrics(p, r.cpu[p.Name], r.mem[p.Name], window)
		if !ok {
			continue
		}
		pm.CreationTimestamp = now
		out = append(out, pm)
	}
	slices.SortFunc(out, func(a, b metrics.PodMetrics) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// GetNodeMetrics returns the metrics of the given nodes that have both a
// CPU and a memory sample, sorted by name.
func (s *Source) GetNodeMetrics(ctx context.Context, nodes []*metav1.PartialObjectMetadata) ([]metrics.NodeMetrics, error) {
	rr, window, querier, err := s.resourceRules()
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return []metrics.NodeMetrics{}, nil
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	req := s.request("", names)
	var cpu, mem map[string]point
	err = both(ctx,
		func(ctx context.Context) (err error) {
			cpu, err = s.queryNodes(ctx, querier, rr.CPU, req)
			return err
		},
		func(ctx context.Context) (err error) {
			mem, err = s.queryNodes(ctx, querier, rr.Memory, req)
			return err
		})
	if err != nil {
		return nil, err
	}
	now := metav1.NewTime(s.clock.Now())
	out := make([]metrics.NodeMetrics, 0, len(nodes))
	for _, n := range nodes {
		nm, ok := buildNodeMetrics(n, cpu, mem, window)
		if !ok {
			continue
		}
		nm.CreationTimestamp = now
		out = append(out, nm)
	}
	slices.SortFunc(out, func(a, b metrics.NodeMetrics) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// resourceRules returns the rules in service, their window and the
// querier of the backend they name.
func (s *Source) resourceRules() (*rules.ResourceRules, time.Duration, promclient.SampleQuerier, error) {
	rs := s.rules()
	if rs == nil || rs.ResourceRules() == nil {
		return nil, 0, nil, ErrNotConfigured
	}
	rr := rs.ResourceRules()
	if rr.CPU == nil || rr.Memory == nil {
		return nil, 0, nil, ErrNotConfigured
	}
	var window time.Duration
	if w := rr.Window(); w != "" {
		d, err := model.ParseDuration(w)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("resourceRules.window %q: %w", w, err)
		}
		window = time.Duration(d)
	}
	querier, ok := s.backends(rr.Backend())
	if !ok {
		return nil, 0, nil, fmt.Errorf("resourceRules name backend %q, which is not defined", rr.Backend())
	}
	return rr, window, querier, nil
}

// request names the objects when there are few, else asks for all of them.
func (s *Source) request(namespace string, names []string) rules.ResourceRequest {
	if len(names) > s.maxNames {
		return rules.ResourceRequest{Namespace: namespace, AllObjects: true}
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	return rules.ResourceRequest{Namespace: namespace, Names: slices.Compact(sorted)}
}

// answer is the vector an instant query returned. It is shared with
// coalesced callers: read-only. The label values it returns may be kept:
// they are never rewritten (a value keeps its chunk of the answer alive
// while kept; here, the container names until the response is written).
type answer promclient.Samples

// query runs the instant query expr at "now".
func query(ctx context.Context, querier promclient.SampleQuerier, expr string) (answer, error) {
	smps, err := querier.QuerySamples(ctx, expr, time.Time{})
	return answer(smps), err
}

// len returns the number of samples.
func (a answer) len() int { return len(a) }

// label returns the value of label name of sample i; "" when it has none.
func (a answer) label(i int, name string) string {
	v, _ := a[i].Labels.Get(name)
	return v
}

// point returns the value and timestamp of sample i.
func (a answer) point(i int) point {
	return point{value: float64(a[i].Value), ts: a[i].Timestamp.Time()}
}

// queryContainers runs a rule's containerQuery and groups the samples by pod
// and container. Samples without a pod label are ignored; a second sample
// for the same container is ignored (and logged).
func (s *Source) queryContainers(ctx context.Context, querier promclient.SampleQuerier, r *rules.ResourceRule, req rules.ResourceRequest) (containerPoints, error) {
	path := r.Path() + ".containerQuery"
	q, err := r.ContainerQuery(req)
	if err != nil {
		return nil, &QueryError{Path: path, Namespace: req.Namespace, Err: err}
	}
	ans, err := query(ctx, querier, q.Expr)
	if err != nil {
		return nil, &QueryError{Path: path, Namespace: req.Namespace, Err: err}
	}
	containerLabel := r.ContainerLabel()
	out := make(containerPoints, ans.len())
	dups := 0
	for i := range ans.len() {
		pod := ans.label(i, q.ResourceLabel)
		if pod == "" {
			continue
		}
		container := ""
		if containerLabel != "" {
			container = ans.label(i, containerLabel)
		}
		cs := out[pod]
		if _, dup := find(cs, container); dup {
			dups++
			continue
		}
		out[pod] = append(cs, containerPoint{container: container, point: ans.point(i)})
	}
	if dups > 0 {
		klog.V(2).InfoS("Resource query returned several samples for the same container; kept the first of each",
			"rule", path, "namespace", req.Namespace, "ignored", dups)
	}
	return out, nil
}

// queryNodes runs a rule's nodeQuery and maps each node to its sample.
func (s *Source) queryNodes(ctx context.Context, querier promclient.SampleQuerier, r *rules.ResourceRule, req rules.ResourceRequest) (map[string]point, error) {
	path := r.Path() + ".nodeQuery"
	q, err := r.NodeQuery(req)
	if err != nil {
		return nil, &QueryError{Path: path, Err: err}
	}
	ans, err := query(ctx, querier, q.Expr)
	if err != nil {
		return nil, &QueryError{Path: path, Err: err}
	}
	out := make(map[string]point, ans.len())
	dups := 0
	for i := range ans.len() {
		node := ans.label(i, q.ResourceLabel)
		if node == "" {
			continue
		}
		if _, dup := out[node]; dup {
			dups++
			continue
		}
		out[node] = ans.point(i)
	}
	if dups > 0 {
		klog.V(2).InfoS("Resource query returned several samples for the same node; kept the first of each",
			"rule", path, "ignored", dups)
	}
	return out, nil
}

// buildPodMetrics assembles a pod's metrics the way metrics-server does:
// the pod is left out when it has no sample at all or when one of its
// containers has a CPU sample but no memory sample (or the reverse); a
// container whose value is unusable (NaN, infinite, negative) is left out
// of the pod. The timestamp is the earliest of the samples used.
func buildPodMetrics(pod *metav1.PartialObjectMetadata, cpu, mem []containerPoint, window time.Duration) (metrics.PodMetrics, bool) {
	if len(cpu) == 0 && len(mem) == 0 {
		klog.V(4).InfoS("No resource samples for pod", "pod", klog.KObj(pod))
		return metrics.PodMetrics{}, false
	}
	names := make([]string, 0, len(cpu))
	for _, c := range cpu {
		if _, ok := find(mem, c.container); !ok {
			klog.V(4).InfoS("Skipping pod: a container has a CPU sample but no memory sample", "pod", klog.KObj(pod), "container", c.container)
			return metrics.PodMetrics{}, false
		}
		names = append(names, c.container)
	}
	for _, c := range mem {
		if _, ok := find(cpu, c.container); !ok {
			klog.V(4).InfoS("Skipping pod: a container has a memory sample but no CPU sample", "pod", klog.KObj(pod), "container", c.container)
			return metrics.PodMetrics{}, false
		}
	}
	slices.Sort(names)
	var earliest time.Time
	containers := make([]metrics.ContainerMetrics, 0, len(names))
	for _, c := range names {
		cp, _ := find(cpu, c)
		mp, _ := find(mem, c)
		usage, err := usageOf(cp.value, mp.value)
		if err != nil {
			klog.V(2).InfoS("Skipping container usage", "pod", klog.KObj(pod), "container", c, "reason", err.Error())
			continue
		}
		containers = append(containers, metrics.ContainerMetrics{Name: c, Usage: usage})
		for _, ts := range []time.Time{cp.ts, mp.ts} {
			if earliest.IsZero() || ts.Before(earliest) {
				earliest = ts
			}
		}
	}
	if len(containers) == 0 {
		// metrics-server would report such a pod with no containers and a
		// zero timestamp; the HPA treats that as missing anyway.
		return metrics.PodMetrics{}, false
	}
	return metrics.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Labels:    pod.Labels,
		},
		Timestamp:  metav1.NewTime(earliest),
		Window:     metav1.Duration{Duration: window},
		Containers: containers,
	}, true
}

// buildNodeMetrics assembles a node's metrics; the node is left out when
// it lacks a sample or a value is unusable.
func buildNodeMetrics(node *metav1.PartialObjectMetadata, cpu, mem map[string]point, window time.Duration) (metrics.NodeMetrics, bool) {
	cp, okc := cpu[node.Name]
	mp, okm := mem[node.Name]
	if !okc || !okm {
		klog.V(4).InfoS("Skipping node: missing resource sample", "node", klog.KObj(node), "cpu", okc, "memory", okm)
		return metrics.NodeMetrics{}, false
	}
	usage, err := usageOf(cp.value, mp.value)
	if err != nil {
		klog.V(2).InfoS("Skipping node usage", "node", klog.KObj(node), "reason", err.Error())
		return metrics.NodeMetrics{}, false
	}
	ts := cp.ts
	if mp.ts.Before(ts) {
		ts = mp.ts
	}
	return metrics.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels},
		Timestamp:  metav1.NewTime(ts),
		Window:     metav1.Duration{Duration: window},
		Usage:      usage,
	}, true
}

// usageOf converts a CPU (cores) and memory (bytes) sample into a resource
// list.
func usageOf(cpuCores, memBytes float64) (corev1.ResourceList, error) {
	cpu, err := CPUQuantity(cpuCores)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", resourceCPU, err)
	}
	mem, err := MemoryQuantity(memBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", resourceMemory, err)
	}
	return corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}, nil
}

// forEach runs f(i) for i in [0, n) with at most s.parallelism running at
// once. The first error cancels the others' context and is returned.
func (s *Source) forEach(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workers := min(s.parallelism, n)
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() {
						firstErr = err
						cancel(err)
					})
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return context.Cause(ctx)
}

// both runs a and b concurrently and returns the first error (the other is
// canceled).
func both(ctx context.Context, a, b func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var errB error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if errB = b(ctx); errB != nil {
			cancel()
		}
	}()
	errA := a(ctx)
	if errA != nil {
		cancel()
	}
	<-done
	// Report the error that caused the other to be canceled, not the
	// cancellation itself.
	switch {
	case errA != nil && errB != nil:
		if errors.Is(errA, context.Canceled) && !errors.Is(errB, context.Canceled) {
			return errB
		}
		return errA
	case errA != nil:
		return errA
	default:
		return errB
	}
}
