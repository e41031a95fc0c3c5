package loadbalancers

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
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
		if p.NodePort == 0 {
			return fmt.Errorf("service %s/%s port %d has no nodePort; groundcloud sends traffic to node ports, so leave spec.allocateLoadBalancerNodePorts unset or true", svc.Namespace, svc.Name, p.Port)
		}
	}
	return nil
}
