package controller

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
)

// podLabelIndex indexes pods by "namespace/key=value" for each of their
// labels. A target's selector almost always has an equality requirement
// (a Deployment's matchLabels), so its pods are found among the few pods
// carrying that label instead of by matching every pod of the namespace.
const podLabelIndex = "promscaler.io/pod-label"

func podLabelIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, fmt.Errorf("pod label index: unexpected object %T", obj)
	}
	out := make([]string, 0, len(pod.Labels))
	for k, v := range pod.Labels {
		out = append(out, labelIndexKey(pod.Namespace, k, v))
	}
	return out, nil
}

func labelIndexKey(namespace, key, value string) string {
	return namespace + "/" + key + "=" + value
}

// listPods returns the pods of namespace that sel matches, through the
// label index when sel has a single-valued equality requirement.
func (c *Controller) listPods(namespace string, sel labels.Selector) ([]*v1.Pod, error) {
	if c.podIndexer != nil {
		if key, value, ok := equalityRequirement(sel); ok {
			objs, err := c.podIndexer.ByIndex(podLabelIndex, labelIndexKey(namespace, key, value))
			if err != nil {
				return nil, err
			}
			pods := make([]*v1.Pod, 0, len(objs))
			for _, o := range objs {
				if p, ok := o.(*v1.Pod); ok && sel.Matches(labels.Set(p.Labels)) {
					pods = append(pods, p)
				}
			}
			return pods, nil
		}
	}
	return c.podLister.Pods(namespace).List(sel)
}

// equalityRequirement returns a key=value every object sel matches must
// carry.
func equalityRequirement(sel labels.Selector) (key, value string, ok bool) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return "", "", false
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if vals := r.Values(); vals.Len() == 1 {
				return r.Key(), vals.UnsortedList()[0], true
			}
		}
	}
	return "", "", false
}

// addPodIndex installs the label index on the pod informer; it fails once
// the informer has started, and the controller then lists without it.
func addPodIndex(inf cache.SharedIndexInformer) (cache.Indexer, error) {
	if err := inf.AddIndexers(cache.Indexers{podLabelIndex: podLabelIndexFunc}); err != nil {
		return nil, err
	}
	return inf.GetIndexer(), nil
}
