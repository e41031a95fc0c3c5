package crdclient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Client reads and writes the objects of one Type with the dynamic client.
// Its methods return the apiserver's errors as they come (NotFound,
// AlreadyExists, Conflict) and wrap only conversion errors. For a
// cluster-scoped type the namespace arguments are ignored (pass "").
type Client[T Object] struct {
	dyn          dynamic.Interface
	typ          Type[T]
	fieldManager string
}

// New returns a Client over a dynamic client. fieldManager names the
// writer of Create and Update in managedFields ("": the apiserver's
// default).
func New[T Object](dyn dynamic.Interface, typ Type[T], fieldManager string) *Client[T] {
	return &Client[T]{dyn: dyn, typ: typ, fieldManager: fieldManager}
}

func (c *Client[T]) res(namespace string) dynamic.ResourceInterface {
	r := c.dyn.Resource(c.typ.Resource)
	if c.typ.Namespaced {
		return r.Namespace(namespace)
	}
	return r
}

// Get reads one object from the apiserver.
func (c *Client[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	u, err := c.res(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		var zero T
		return zero, err
	}
	return c.typ.FromUnstructured(u)
}

// List reads every object (of every namespace) from the apiserver.
func (c *Client[T]) List(ctx context.Context) ([]T, error) {
	list, err := c.dyn.Resource(c.typ.Resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(list.Items))
	for i := range list.Items {
		obj, err := c.typ.FromUnstructured(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// Create creates obj and returns the stored object.
func (c *Client[T]) Create(ctx context.Context, obj T) (T, error) {
	return c.write(obj, func(res dynamic.ResourceInterface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return res.Create(ctx, u, metav1.CreateOptions{FieldManager: c.fieldManager})
	})
}

// Update replaces obj (not its status; obj carries the resourceVersion it
// was read at) and returns the stored object.
func (c *Client[T]) Update(ctx context.Context, obj T) (T, error) {
	return c.write(obj, func(res dynamic.ResourceInterface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return res.Update(ctx, u, metav1.UpdateOptions{FieldManager: c.fieldManager})
	})
}

// write converts obj, sends it with call and converts what was stored.
func (c *Client[T]) write(obj T, call func(dynamic.ResourceInterface, *unstructured.Unstructured) (*unstructured.Unstructured, error)) (T, error) {
	var zero T
	u, err := c.typ.ToUnstructured(obj)
	if err != nil {
		return zero, err
	}
	out, err := call(c.res(obj.GetNamespace()), u)
	if err != nil {
		return zero, err
	}
	return c.typ.FromUnstructured(out)
}

// Delete deletes the named object; NotFound is returned as is.
func (c *Client[T]) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.res(namespace).Delete(ctx, name, opts)
}

// ApplyStatus server-side-applies the status fields in status with the
// given field manager (forcing conflicts): each writer owns only the
// fields it sets.
func (c *Client[T]) ApplyStatus(ctx context.Context, namespace, name, fieldManager string, status map[string]any) error {
	metadata := map[string]any{"name": name}
	if c.typ.Namespaced {
		metadata["namespace"] = namespace
	}
	gvk := c.typ.gvk()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvk.GroupVersion().String(),
		"kind":       gvk.Kind,
		"metadata":   metadata,
		"status":     status,
	}}
	_, err := c.res(namespace).ApplyStatus(ctx, name, u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	return err
}
