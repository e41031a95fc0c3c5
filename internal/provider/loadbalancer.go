package provider

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/internal/lbclass"
	"github.com/groundcloud/groundcloud/internal/loadbalancers"
)

// loadBalancer adapts loadbalancers.Manager to cloudprovider.LoadBalancer.
type loadBalancer struct{ c *Cloud }

var _ cloudprovider.LoadBalancer = loadBalancer{}

func (l loadBalancer) manager() (*loadbalancers.Manager, error) {
	m := l.c.lbs.Load()
	if m == nil {
		return nil, api.NewRetryError("groundcloud load balancers are starting", time.Second)
	}
	return m, nil
}

// GetLoadBalancer reports whether the Service has a load balancer: addresses
// assigned (even if its object could not be written) or an object.
func (l loadBalancer) GetLoadBalancer(ctx context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	m, err := l.manager()
	if err != nil {
		return nil, false, err
	}
	return m.Get(ctx, svc)
}

// GetLoadBalancerName is the LoadBalancer object's name: namespace/name of the Service.
func (l loadBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return svc.Namespace + "/" + svc.Name
}

// EnsureLoadBalancer assigns addresses and writes the LoadBalancer object.
// Both the upstream service controller (Services without a class) and
// internal/lbclass (groundcloud's class) call it; a Service whose class
// changed waits until the controller that served it before has released
// it (lbclass.Handover).
func (l loadBalancer) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if err := lbclass.Handover(svc); err != nil {
		return nil, err
	}
	m, err := l.manager()
	if err != nil {
		return nil, err
	}
	return m.Ensure(ctx, svc, nodes)
}

// UpdateLoadBalancer is what the service controller calls when the Nodes
// change. It does nothing and says so with cloudprovider.ImplementedElsewhere
// (upstream then records no Event and does not retry): LoadBalancer objects
// do not list nodes, agents choose the backends from the Nodes themselves
// (internal/backends), so a node change costs no write however many
// Services there are.
func (loadBalancer) UpdateLoadBalancer(context.Context, string, *v1.Service, []*v1.Node) error {
	return cloudprovider.ImplementedElsewhere
}

// EnsureLoadBalancerDeleted deletes the object and releases the addresses.
func (l loadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *v1.Service) error {
	m, err := l.manager()
	if err != nil {
		return err
	}
	return m.Delete(ctx, svc)
}
