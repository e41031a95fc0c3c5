package loadbalancers

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

// The allocator decides a Service's forwarding (ipam.Terms.Served): its
// groundcloud.io/forwarding annotation, else its pool's forwarding key
// (passthrough by default), else, for an orphan kept outside its pool, the
// forwarding it was served with. Services that share an address must
// forward it alike, so the allocator checks it with the sharing rules.

// apiForwarding is spec.forwarding for f ("": passthrough, the default).
func apiForwarding(f config.Forwarding) string {
	if f == config.ForwardingProxy {
		return v1alpha1.ForwardingProxy
	}
	return v1alpha1.ForwardingPassthrough
}

// recordForwarding reads a LoadBalancer's spec.forwarding back: absent is
// Proxy, what objects written before the field existed were.
func recordForwarding(spec *v1alpha1.LoadBalancerSpec) config.Forwarding {
	if spec.Forwarding == v1alpha1.ForwardingPassthrough {
		return config.ForwardingPassthrough
	}
	return config.ForwardingProxy
}

// forwardingProblem reports a groundcloud.io/forwarding annotation of svc
// that cannot be used; served is the forwarding its addresses keep.
func forwardingProblem(svc *v1.Service, served config.Forwarding) error {
	if _, err := ipam.ServiceForwarding(svc); err != nil {
		return fmt.Errorf("%w (using %s)", err, served)
	}
	return nil
}

// ipMode is the Service status ipMode of a LoadBalancer's forwarding: VIP
// when nodes receive packets addressed to the VIP (passthrough), Proxy when
// agents DNAT them (absent forwarding is Proxy).
func ipMode(forwarding string) v1.LoadBalancerIPMode {
	if forwarding == v1alpha1.ForwardingPassthrough {
		return v1.LoadBalancerIPModeVIP
	}
	return v1.LoadBalancerIPModeProxy
}
