package crdclient

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// Object is a pointer to a custom resource's Go type, such as
// *v1alpha1.LoadBalancer.
type Object interface {
	runtime.Object
	metav1.Object
}

// Type describes one custom resource for the dynamic client. Build it
// with Namespaced or ClusterScoped.
type Type[T Object] struct {
	Resource   schema.GroupVersionResource
	Kind       string
	Namespaced bool
	new        func() T // an empty object to convert into
}

// Namespaced is the Type of a namespaced resource whose Go type is O
// (its objects are *O).
func Namespaced[O any, T interface {
	*O
	Object
}](resource schema.GroupVersionResource, kind string) Type[T] {
	return Type[T]{Resource: resource, Kind: kind, Namespaced: true, new: func() T { return new(O) }}
}

// ClusterScoped is the Type of a cluster-scoped resource whose Go type is
// O (its objects are *O).
func ClusterScoped[O any, T interface {
	*O
	Object
}](resource schema.GroupVersionResource, kind string) Type[T] {
	return Type[T]{Resource: resource, Kind: kind, new: func() T { return new(O) }}
}

// gvk is the apiVersion and kind written on every object.
func (t Type[T]) gvk() schema.GroupVersionKind { return t.Resource.GroupVersion().WithKind(t.Kind) }

// key names an object in errors and in an informer's cache: namespace/name,
// or name alone for a cluster-scoped type.
func (t Type[T]) key(namespace, name string) string {
	if t.Namespaced {
		return namespace + "/" + name
	}
	return name
}

// FromUnstructured returns the typed object in an object of the dynamic
// client or of an informer. A typed object (an informer's from NewInformer)
// is returned as is, shared with its cache: do not modify it.
func (t Type[T]) FromUnstructured(obj any) (T, error) {
	var zero T
	if typed, ok := obj.(T); ok {
		return typed, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return zero, fmt.Errorf("unexpected object %T", obj)
	}
	typed := t.new()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		return zero, fmt.Errorf("convert %s %s: %w", t.Kind, t.key(u.GetNamespace(), u.GetName()), err)
	}
	return typed, nil
}

// ToUnstructured converts a typed object for the dynamic client, with its
// apiVersion and kind set.
func (t Type[T]) ToUnstructured(obj T) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s %s: %w", t.Kind, t.key(obj.GetNamespace(), obj.GetName()), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(t.gvk())
	return u, nil
}

// Transform returns an informer's cache.TransformFunc: it converts each
// object once, when it arrives, to the typed object, drops its
// managedFields and passes it to prepare (nil: nothing more), so that the
// cache holds typed objects without managedFields and nobody converts them
// again. An object that does not convert is kept as it came, without
// managedFields, and FromUnstructured reports it.
func (t Type[T]) Transform(prepare func(T)) cache.TransformFunc {
	if prepare == nil {
		prepare = func(T) {}
	}
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *unstructured.Unstructured:
			o.SetManagedFields(nil)
			typed := t.new()
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, typed); err != nil {
				return o, nil
			}
			typed.GetObjectKind().SetGroupVersionKind(t.gvk())
			prepare(typed)
			return typed, nil
		case T:
			o.SetManagedFields(nil)
			prepare(o)
			return o, nil
		}
		return obj, nil
	}
}
