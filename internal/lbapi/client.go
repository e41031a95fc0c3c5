package lbapi

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/kubecore"
)

// Resource is the LoadBalancer resource.
var Resource = v1alpha1.SchemeGroupVersion.WithResource("loadbalancers")

// Client reads and writes LoadBalancer objects.
type Client struct {
	dyn dynamic.Interface
}

// NewClient returns a Client over a dynamic client.
func NewClient(dyn dynamic.Interface) *Client { return &Client{dyn: dyn} }

func (c *Client) res(ns string) dynamic.ResourceInterface {
	return c.dyn.Resource(Resource).Namespace(ns)
}

// Create creates lb and returns the stored object.
func (c *Client) Create(ctx context.Context, lb *v1alpha1.LoadBalancer) (*v1alpha1.LoadBalancer, error) {
	u, err := ToUnstructured(lb)
	if err != nil {
		return nil, err
	}
	out, err := c.res(lb.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(out)
}

// Update replaces lb (not its status) and returns the stored object.
func (c *Client) Update(ctx context.Context, lb *v1alpha1.LoadBalancer) (*v1alpha1.LoadBalancer, error) {
	u, err := ToUnstructured(lb)
	if err != nil {
		return nil, err
	}
	out, err := c.res(lb.Namespace).Update(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(out)
}

// Delete deletes the object; NotFound is returned as is.
func (c *Client) Delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.res(namespace).Delete(ctx, name, opts)
}

// Get reads one object from the API.
func (c *Client) Get(ctx context.Context, namespace, name string) (*v1alpha1.LoadBalancer, error) {
	u, err := c.res(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(u)
}

// ApplyStatus server-side-applies the status fields in obj with the given
// field manager: each writer owns only the fields it sets.
func (c *Client) ApplyStatus(ctx context.Context, namespace, name, fieldManager string, status map[string]any) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(),
		"kind":       "LoadBalancer",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"status":     status,
	}}
	_, err := c.res(namespace).ApplyStatus(ctx, name, u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	return err
}

// NewInformer returns an informer over LoadBalancers of every namespace.
// Its cache holds *v1alpha1.LoadBalancer objects without managedFields
// (see Transform); read them with FromUnstructured or a Lister and do not
// modify them.
func NewInformer(dyn dynamic.Interface, resync time.Duration) cache.SharedIndexInformer {
	return kubecore.DynamicInformer(dyn, Resource, resync, Transform)
}

// Transform is the informer's cache.TransformFunc: it converts each
// LoadBalancer once, when it arrives, to the typed object and drops its
// managedFields. At thousands of LoadBalancers with a hundred backends each,
// caching the dynamic client's maps (with managedFields as large as the
// spec) and converting every object on every List made most of the agent's
// and the controller manager's memory. The strings that repeat across
// objects are shared (see intern). An object that does not convert is
// kept as it came, without managedFields, and FromUnstructured reports it.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		o.SetManagedFields(nil)
		lb := &v1alpha1.LoadBalancer{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, lb); err != nil {
			return o, nil
		}
		lb.APIVersion, lb.Kind = v1alpha1.SchemeGroupVersion.String(), "LoadBalancer"
		intern(lb)
		return lb, nil
	case *v1alpha1.LoadBalancer:
		o.ManagedFields = nil
		intern(o)
		return o, nil
	}
	return obj, nil
}

// FromUnstructured returns the LoadBalancer in an object of the dynamic
// client or of an informer from NewInformer. An informer's object is
// returned as is (shared with its cache: do not modify it).
func FromUnstructured(obj any) (*v1alpha1.LoadBalancer, error) {
	if lb, ok := obj.(*v1alpha1.LoadBalancer); ok {
		return lb, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	lb := &v1alpha1.LoadBalancer{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, lb); err != nil {
		return nil, fmt.Errorf("convert LoadBalancer %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return lb, nil
}

// ToUnstructured converts a typed object for the dynamic client.
func ToUnstructured(lb *v1alpha1.LoadBalancer) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(lb)
	if err != nil {
		return nil, fmt.Errorf("convert LoadBalancer %s/%s: %w", lb.Namespace, lb.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	u.SetKind("LoadBalancer")
	return u, nil
}

// Lister reads LoadBalancers from an informer's cache. The objects it
// returns are the cache's: callers must not modify them (DeepCopy first).
type Lister struct{ indexer cache.Indexer }

// NewLister returns a Lister over an informer from NewInformer.
func NewLister(inf cache.SharedIndexInformer) Lister { return Lister{indexer: inf.GetIndexer()} }

// Get returns the cached object, or nil when there is none.
func (l Lister) Get(namespace, name string) (*v1alpha1.LoadBalancer, error) {
	obj, exists, err := l.indexer.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, err
	}
	return FromUnstructured(obj)
}

// List returns every cached object.
func (l Lister) List() ([]*v1alpha1.LoadBalancer, error) {
	objs := l.indexer.List()
	out := make([]*v1alpha1.LoadBalancer, 0, len(objs))
	for _, obj := range objs {
		lb, err := FromUnstructured(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, lb)
	}
	return out, nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
