package crdclient

import (
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/groundcloud/groundcloud/internal/kubecore"
)

// NewInformer returns an informer over the objects of typ in every
// namespace whose cache holds typed objects without managedFields, each
// passed to prepare when it arrives (see Type.Transform; prepare may be
// nil). Read them with a Lister or Type.FromUnstructured and do not modify
// them.
func NewInformer[T Object](dyn dynamic.Interface, typ Type[T], resync time.Duration, prepare func(T)) cache.SharedIndexInformer {
	return kubecore.DynamicInformer(dyn, typ.Resource, resync, typ.Transform(prepare))
}

// Lister reads the objects of one Type from an informer's cache. The
// objects it returns are the cache's: callers must not modify them
// (DeepCopy first).
type Lister[T Object] struct {
	typ     Type[T]
	indexer cache.Indexer
}

// NewLister returns a Lister over an informer of typ (from NewInformer, or
// any informer of its objects).
func NewLister[T Object](typ Type[T], inf cache.SharedIndexInformer) Lister[T] {
	return Lister[T]{typ: typ, indexer: inf.GetIndexer()}
}

// Get returns the cached object, or nil when there is none. For a
// cluster-scoped type the namespace is ignored.
func (l Lister[T]) Get(namespace, name string) (T, error) {
	obj, exists, err := l.indexer.GetByKey(l.typ.key(namespace, name))
	if err != nil || !exists {
		var zero T
		return zero, err
	}
	return l.typ.FromUnstructured(obj)
}

// List returns every cached object.
func (l Lister[T]) List() ([]T, error) {
	objs := l.indexer.List()
	out := make([]T, 0, len(objs))
	for _, obj := range objs {
		typed, err := l.typ.FromUnstructured(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, typed)
	}
	return out, nil
}
