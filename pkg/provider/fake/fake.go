// Package fake provides hand-written fakes of the provider's dependencies
// for tests: an in-memory ObjectLister that counts its calls.
package fake

import (
	"github.com/promscaler/promscaler/pkg/provider"

	"context"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var _ provider.ObjectLister = (*Objects)(nil)

// Object is one object known to Objects.
type Object struct {
	Namespace string // "" for cluster-scoped objects
	Name      string
	Labels    map[string]string
}

// Objects is an in-memory provider.ObjectLister: objects per
// group-resource. It is safe for concurrent use.
type Objects struct {
	mu    sync.RWMutex
	objs  map[schema.GroupResource][]Object
	err   error
	calls atomic.Int64
}

// NewObjects returns an empty Objects.
func NewObjects() *Objects {
	return &Objects{objs: map[schema.GroupResource][]Object{}}
}

// Add adds objects of gr.
func (o *Objects) Add(gr schema.GroupResource, objs ...Object) *Objects {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.objs[gr] = append(o.objs[gr], objs...)
	return o
}

// SetError makes every later ListObjects call fail with err (nil clears).
func (o *Objects) SetError(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.err = err
}

// Calls returns how many times ListObjects was called.
func (o *Objects) Calls() int64 { return o.calls.Load() }

// ListObjects implements provider.ObjectLister: the names of the objects
// of gvr's group-resource in namespace ("" lists every object) matching
// selector (nil matches everything).
func (o *Objects) ListObjects(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]string, error) {
	o.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.err != nil {
		return nil, o.err
	}
	if selector == nil {
		selector = labels.Everything()
	}
	var names []string
	for _, obj := range o.objs[gvr.GroupResource()] {
		if namespace != "" && obj.Namespace != namespace {
			continue
		}
		if selector.Matches(labels.Set(obj.Labels)) {
			names = append(names, obj.Name)
		}
	}
	return names, nil
}
