package routeapi

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/crdclient"
	"github.com/groundcloud/groundcloud/internal/kubecore"
)

// Resource is the Route resource.
var Resource = v1alpha1.SchemeGroupVersion.WithResource("routes")

// Type is the Route for crdclient.
var Type = crdclient.ClusterScoped[v1alpha1.Route](Resource, "Route")

// FieldManager is the controller manager's field manager for Route specs.
const FieldManager = "groundcloud-controller-manager"

// Client reads and writes Route objects: crdclient's verbs (a Route is
// cluster-scoped: pass "" for their namespace), creating and updating with
// FieldManager, and a router's own status entry (ApplyHostStatus).
type Client struct {
	*crdclient.Client[*v1alpha1.Route]
}

// NewClient returns a Client over a dynamic client.
func NewClient(dyn dynamic.Interface) *Client {
	return &Client{crdclient.New(dyn, Type, FieldManager)}
}

// ApplyHostStatus server-side-applies one host's status entry of a Route
// with fieldManager, so that each router owns only its own entry of
// status.hosts.
func (c *Client) ApplyHostStatus(ctx context.Context, name, fieldManager string, host v1alpha1.RouteHostStatus) error {
	h, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&host)
	if err != nil {
		return fmt.Errorf("convert status of Route %s: %w", name, err)
	}
	return c.ApplyStatus(ctx, "", name, fieldManager, map[string]any{"hosts": []any{h}})
}

// NewInformer returns an informer over every Route whose objects are
// *unstructured.Unstructured; read them with Type.FromUnstructured.
func NewInformer(dyn dynamic.Interface, resync time.Duration) cache.SharedIndexInformer {
	return kubecore.DynamicInformer(dyn, Resource, resync, nil)
}
