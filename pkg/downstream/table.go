package downstream

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/klog/v2"
	cmprovider "sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// table is the routing table of one refresh, read by requests.
type table struct {
	// file is the configuration in service; pending the downstreams it
	// lists that have no client, with the reason.
	file    *File
	pending map[string]string
	// members in the file's order.
	members []*member
	// custom metrics ("resource/metric", the discovery name) and external
	// metrics each downstream lists, in the file's order.
	custom   map[string][]*member
	external map[string][]*member
	// catchAll are the downstreams asked for any metric of an API that
	// promscaler does not serve (Discovered.CatchAll), in the file's order.
	catchAll map[API][]*member
	// routes are the names the file gives to a downstream.
	routes map[API]map[string]*member
	// overlaps are the names both serve.
	overlaps []Overlap
}

// Overlap is a metric name promscaler and a downstream both serve.
type Overlap struct {
	API API
	// Name is the metric (custom: resource/metric).
	Name string
	// Downstream is the one that lists it; ServedBy is who answers:
	// "promscaler", or the downstream when the file routes it there.
	Downstream, ServedBy string
}

// customKey is a custom metric's discovery name.
func customKey(info cmprovider.CustomMetricInfo) string {
	return info.GroupResource.String() + "/" + info.Metric
}

// buildTable indexes the members' last discoveries.
func buildTable(f *File, members map[string]*member) *table {
	t := &table{file: f, custom: map[string][]*member{}, external: map[string][]*member{},
		routes: map[API]map[string]*member{Custom: {}, External: {}}, catchAll: map[API][]*member{}}
	for _, cfg := range f.Downstreams {
		m, ok := members[cfg.Name]
		if !ok {
			continue
		}
		t.members = append(t.members, m)
		for api, names := range cfg.Routes {
			for _, n := range names {
				t.routes[api][n] = m
			}
		}
		d := m.discovered()
		if d == nil {
			continue
		}
		for _, api := range d.CatchAll {
			t.catchAll[api] = append(t.catchAll[api], m)
		}
		for _, info := range d.Custom {
			k := customKey(info)
			if !slices.Contains(t.custom[k], m) {
				t.custom[k] = append(t.custom[k], m)
			}
		}
		for _, info := range d.External {
			if !slices.Contains(t.external[info.Metric], m) {
				t.external[info.Metric] = append(t.external[info.Metric], m)
			}
		}
	}
	return t
}

// member returns the member named name, nil if none.
func (t *table) member(name string) *member {
	for _, m := range t.members {
		if m.cfg.Name == name {
			return m
		}
	}
	return nil
}

// pick chooses the downstream of a metric: the one the file routes its
// name to (if it lists the name or takes any), else none when promscaler
// serves it, else the first that lists it, else the first that takes any.
func pick(listed, any []*member, routed *member, ours func() bool) *member {
	if len(listed) == 0 && len(any) == 0 {
		return nil
	}
	if routed != nil && (slices.Contains(listed, routed) || slices.Contains(any, routed)) {
		return routed
	}
	if ours() {
		return nil
	}
	if len(listed) > 0 {
		return listed[0]
	}
	return any[0]
}

// customRoute is the downstream serving a custom metric request, nil for
// promscaler.
func (t *table) customRoute(info cmprovider.CustomMetricInfo, namespace string, o Ours) *member {
	return pick(t.custom[customKey(info)], t.catchAll[Custom], t.routes[Custom][info.Metric], func() bool { return o.ServesCustom(info, namespace) })
}

// externalRoute is the downstream serving an external metric request, nil
// for promscaler.
func (t *table) externalRoute(namespace, metric string, o Ours) *member {
	return pick(t.external[metric], t.catchAll[External], t.routes[External][metric], func() bool { return o.ServesExternal(namespace, metric) })
}

// findOverlaps lists the names both promscaler and a downstream serve.
func findOverlaps(t *table, custom []cmprovider.CustomMetricInfo, external []cmprovider.ExternalMetricInfo) []Overlap {
	var out []Overlap
	add := func(api API, name, metric string, listed []*member) {
		for _, m := range listed {
			by := "promscaler"
			if t.routes[api][metric] == m {
				by = m.cfg.Name
			}
			out = append(out, Overlap{API: api, Name: name, Downstream: m.cfg.Name, ServedBy: by})
		}
	}
	for _, info := range custom {
		add(Custom, customKey(info), info.Metric, withRouted(t.custom[customKey(info)], t.catchAll[Custom], t.routes[Custom][info.Metric]))
	}
	for _, info := range external {
		add(External, info.Metric, info.Metric, withRouted(t.external[info.Metric], t.catchAll[External], t.routes[External][info.Metric]))
	}
	slices.SortFunc(out, func(a, b Overlap) int {
		return cmp.Or(cmp.Compare(a.API, b.API), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Downstream, b.Downstream))
	})
	return slices.Compact(out)
}

// withRouted is listed, plus the downstream the name is routed to when it
// takes any name (it does not list it, but answers it).
func withRouted(listed, any []*member, routed *member) []*member {
	if routed != nil && !slices.Contains(listed, routed) && slices.Contains(any, routed) {
		return append(slices.Clone(listed), routed)
	}
	return listed
}

// logNewOverlaps logs the overlaps that were not in before.
func logNewOverlaps(before, now []Overlap) {
	for _, o := range now {
		if !slices.Contains(before, o) {
			klog.InfoS("Metric served by both promscaler and a downstream", "api", o.API, "metric", o.Name,
				"downstream", o.Downstream, "servedBy", o.ServedBy)
		}
	}
}

// unionCustom is ours followed by the downstreams' custom metrics that are
// not ours.
func (t *table) unionCustom(ours []cmprovider.CustomMetricInfo) []cmprovider.CustomMetricInfo {
	out := slices.Clone(ours)
	seen := make(map[cmprovider.CustomMetricInfo]bool, len(ours))
	for _, i := range ours {
		seen[i] = true
	}
	for _, m := range t.members {
		if d := m.discovered(); d != nil {
			for _, i := range d.Custom {
				if !seen[i] {
					seen[i] = true
					out = append(out, i)
				}
			}
		}
	}
	return out
}

// unionExternal is ours followed by the downstreams' external metrics that
// are not ours.
func (t *table) unionExternal(ours []cmprovider.ExternalMetricInfo) []cmprovider.ExternalMetricInfo {
	out := slices.Clone(ours)
	seen := make(map[string]bool, len(ours))
	for _, i := range ours {
		seen[i.Metric] = true
	}
	for _, m := range t.members {
		if d := m.discovered(); d != nil {
			for _, i := range d.External {
				if !seen[i.Metric] {
					seen[i.Metric] = true
					out = append(out, i)
				}
			}
		}
	}
	return out
}

// ParseDiscovery reads a saved discovery document of a downstream (the
// output of kubectl get --raw /apis/GROUP/VERSION against it).
func ParseDiscovery(data []byte) (*Discovered, error) {
	var list metav1.APIResourceList
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("not a discovery document (APIResourceList): %w", err)
	}
	group, version, _ := strings.Cut(list.GroupVersion, "/")
	switch group {
	case Custom.Group():
		return &Discovered{CustomVersion: version, Custom: customInfos(&list)}, nil
	case External.Group():
		return &Discovered{External: externalInfos(&list)}, nil
	}
	return nil, fmt.Errorf("groupVersion %q is neither %s nor %s", list.GroupVersion, Custom.Group(), External.Group())
}

// OverlapsOf lists the overlaps between promscaler's metrics and what the
// downstreams of f list (by name), as Set.Overlaps would: for check-config.
func OverlapsOf(f *File, listed map[string][]*Discovered, custom []cmprovider.CustomMetricInfo, external []cmprovider.ExternalMetricInfo) []Overlap {
	members := map[string]*member{}
	for _, s := range f.Downstreams {
		d := &Discovered{}
		for _, l := range listed[s.Name] {
			d.Custom = append(d.Custom, l.Custom...)
			d.External = append(d.External, l.External...)
			d.CatchAll = append(d.CatchAll, l.CatchAll...)
		}
		members[s.Name] = &member{cfg: s, found: d}
	}
	return findOverlaps(buildTable(f, members), custom, external)
}
