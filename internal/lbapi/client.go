package lbapi

import (
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/crdclient"
)

// Resource is the LoadBalancer resource.
var Resource = v1alpha1.SchemeGroupVersion.WithResource("loadbalancers")

// Type is the LoadBalancer for crdclient.
var Type = crdclient.Namespaced[v1alpha1.LoadBalancer](Resource, "LoadBalancer")

// Client reads and writes LoadBalancer objects.
type Client = crdclient.Client[*v1alpha1.LoadBalancer]

// Lister reads LoadBalancers from an informer's cache (see NewLister).
type Lister = crdclient.Lister[*v1alpha1.LoadBalancer]

// NewClient returns a Client over a dynamic client. Its creates and
// updates name no field manager: the apiserver's default.
func NewClient(dyn dynamic.Interface) *Client { return crdclient.New(dyn, Type, "") }

// NewLister returns a Lister over an informer from NewInformer.
func NewLister(inf cache.SharedIndexInformer) Lister { return crdclient.NewLister(Type, inf) }

// NewInformer returns an informer over LoadBalancers of every namespace.
// Its cache holds *v1alpha1.LoadBalancer objects without managedFields
// (crdclient's Type.Transform); read them with Type.FromUnstructured or a
// Lister and do not modify them. At thousands of LoadBalancers with a
// hundred backends each, caching the dynamic client's maps (with
// managedFields as large as the spec) and converting every object on every
// List made most of the agent's and the controller manager's memory. The
// strings that repeat across objects are shared (see intern).
func NewInformer(dyn dynamic.Interface, resync time.Duration) cache.SharedIndexInformer {
	return crdclient.NewInformer(dyn, Type, resync, intern)
}
