package controller

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// selectorStore tracks the pod selector of every known HPA, per namespace,
// so a reconcile can tell whether the pods of its target are also selected
// by another HPA (upstream's hpaSelectorStore: an HPA is registered with a
// selector matching nothing when it is added, its real selector is set
// during reconciliation, and it is removed when the HPA is deleted).
type selectorStore struct {
	mu         sync.RWMutex
	namespaces map[string]map[string]labels.Selector // namespace -> HPA name -> selector
}

func newSelectorStore() *selectorStore {
	return &selectorStore{namespaces: map[string]map[string]labels.Selector{}}
}

// putIfAbsent registers the HPA with sel unless it is known; it reports
// whether it was added.
func (s *selectorStore) putIfAbsent(namespace, name string, sel labels.Selector) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.namespaces[namespace]
	if ns == nil {
		ns = map[string]labels.Selector{}
		s.namespaces[namespace] = ns
	}
	if _, ok := ns[name]; ok {
		return false
	}
	ns[name] = sel
	return true
}

// putIfPresent replaces the selector of a known HPA; it reports false (and
// changes nothing) when the HPA is not registered, i.e. it was deleted.
func (s *selectorStore) putIfPresent(namespace, name string, sel labels.Selector) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.namespaces[namespace]
	if _, ok := ns[name]; !ok {
		return false
	}
	ns[name] = sel
	return true
}

// delete forgets the HPA.
func (s *selectorStore) delete(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.namespaces[namespace]
	delete(ns, name)
	if len(ns) == 0 {
		delete(s.namespaces, namespace)
	}
}

// matching returns, sorted, the "namespace/name" keys of up to limit HPAs
// whose selector matches at least one of pods (limit <= 0: all). Pods with
// identical labels are matched once.
func (s *selectorStore) matching(namespace string, pods []*v1.Pod, limit int) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ns := s.namespaces[namespace]
	if len(ns) == 0 || len(pods) == 0 {
		return nil
	}
	seen := make(map[string]struct{}, 1)
	found := make(map[string]struct{}, 2)
	for _, p := range pods {
		set := labels.Set(p.Labels)
		k := set.String()
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		for name, sel := range ns {
			if _, ok := found[name]; ok || !sel.Matches(set) {
				continue
			}
			found[name] = struct{}{}
			if limit > 0 && len(found) >= limit {
				return sortedKeys(namespace, found)
			}
		}
	}
	return sortedKeys(namespace, found)
}

func sortedKeys(namespace string, names map[string]struct{}) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, namespace+"/"+n)
	}
	slices.Sort(out)
	return out
}
