package routes

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/kubecore"
)

// Resource is the Route resource.
var Resource = v1alpha1.SchemeGroupVersion.WithResource("routes")

// FieldManager is the controller manager's field manager for Route specs.
const FieldManager = "groundcloud-controller-manager"

// Client reads and writes Route objects with the dynamic client.
type Client struct {
	dyn dynamic.Interface
}

// NewClient returns a Client over a dynamic client.
func NewClient(dyn dynamic.Interface) *Client { return &Client{dyn: dyn} }

func (c *Client) res() dynamic.ResourceInterface { return c.dyn.Resource(Resource) }

// List reads every Route from the apiserver.
func (c *Client) List(ctx context.Context) ([]*v1alpha1.Route, error) {
	list, err := c.res().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.Route, 0, len(list.Items))
	for i := range list.Items {
		r, err := FromUnstructured(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Get reads one Route.
func (c *Client) Get(ctx context.Context, name string) (*v1alpha1.Route, error) {
	u, err := c.res().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(u)
}

// Create creates r and returns the stored object.
func (c *Client) Create(ctx context.Context, r *v1alpha1.Route) (*v1alpha1.Route, error) {
	u, err := ToUnstructured(r)
	if err != nil {
		return nil, err
	}
	out, err := c.res().Create(ctx, u, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(out)
}

// Update replaces r's spec (r carries the resourceVersion it was read at).
func (c *Client) Update(ctx context.Context, r *v1alpha1.Route) (*v1alpha1.Route, error) {
	u, err := ToUnstructured(r)
	if err != nil {
		return nil, err
	}
	out, err := c.res().Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(out)
}

// Delete deletes the named Route; NotFound is returned as is.
func (c *Client) Delete(ctx context.Context, name string) error {
	return c.res().Delete(ctx, name, metav1.DeleteOptions{})
}

// ApplyStatus server-side-applies one host's status entry of a Route with
// fieldManager, so that each router owns only its own entry of
// status.hosts.
func (c *Client) ApplyStatus(ctx context.Context, name, fieldManager string, host v1alpha1.RouteHostStatus) error {
	h, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&host)
	if err != nil {
		return fmt.Errorf("convert status of Route %s: %w", name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(),
		"kind":       "Route",
		"metadata":   map[string]any{"name": name},
		"status":     map[string]any{"hosts": []any{h}},
	}}
	_, err = c.res().ApplyStatus(ctx, name, u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	return err
}

// NewInformer returns an informer over every Route whose objects are
// *unstructured.Unstructured; use FromUnstructured.
func NewInformer(dyn dynamic.Interface, resync time.Duration) cache.SharedIndexInformer {
	return kubecore.DynamicInformer(dyn, Resource, resync, nil)
}

// FromUnstructured converts an object of the dynamic client.
func FromUnstructured(obj any) (*v1alpha1.Route, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
	r := &v1alpha1.Route{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, r); err != nil {
		return nil, fmt.Errorf("convert Route %s: %w", u.GetName(), err)
	}
	return r, nil
}

// ToUnstructured converts a typed object for the dynamic client.
func ToUnstructured(r *v1alpha1.Route) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, fmt.Errorf("convert Route %s: %w", r.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	u.SetKind("Route")
	return u, nil
}
