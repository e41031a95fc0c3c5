package loadbalancers

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// Limits of a LoadBalancer object: the maxItems of its CRD
// (api/v1alpha1). limits_test.go checks them against the schema.
const (
	// MaxPorts is the most ports a Service may have.
	MaxPorts = 100
	// MaxSourceRanges is the most source ranges, after merging duplicates.
	MaxSourceRanges = 100
)

// ErrLimit: a Service asks for more than a LoadBalancer holds.
var ErrLimit = errors.New("over a LoadBalancer limit")

// checkPorts refuses what the data plane cannot carry or the object cannot
// hold, with what to change.
func checkPorts(svc *v1.Service) error {
	if len(svc.Spec.Ports) == 0 {
		return fmt.Errorf("service %s/%s has no ports; add at least one", svc.Namespace, svc.Name)
	}
	if n := len(svc.Spec.Ports); n > MaxPorts {
		return fmt.Errorf("%w: service %s/%s has %d ports; a groundcloud load balancer carries at most %d, split the Service",
			ErrLimit, svc.Namespace, svc.Name, n, MaxPorts)
	}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP {
			return fmt.Errorf("service %s/%s port %d: protocol %s is not supported by groundcloud; use TCP or UDP", svc.Namespace, svc.Name, p.Port, p.Protocol)
		}
	}
	return nil
}

// nodePortProblem says which ports of svc cannot be served for having no
// node port (spec.allocateLoadBalancerNodePorts false): proxy forwarding
// sends traffic to node ports; passthrough forwarding hands packets to a
// node unchanged, whose kube-proxy serves the address, and needs none.
func nodePortProblem(svc *v1.Service, forwarding string) error {
	if forwarding == v1alpha1.ForwardingPassthrough {
		return nil
	}
	var errs []error
	for _, p := range svc.Spec.Ports {
		if p.NodePort == 0 {
			errs = append(errs, fmt.Errorf("service %s/%s port %d has no nodePort, and proxy forwarding sends traffic to node ports: it gets none; leave spec.allocateLoadBalancerNodePorts unset or true, or use passthrough forwarding", svc.Namespace, svc.Name, p.Port))
		}
	}
	return errors.Join(errs...)
}
