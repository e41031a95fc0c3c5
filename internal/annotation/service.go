package annotation

// Annotations on a Service of type LoadBalancer. Each has a section in
// docs/annotations.md.
const (
	// Pool names the pool of the cloud-config to take addresses from.
	// Absent or empty: an auto-assign pool, or the pool holding the
	// requested addresses. Read by internal/ipam.
	Pool = "groundcloud.io/pool"
	// LoadBalancerIPs requests addresses: comma-separated, at most one IPv4
	// and one IPv6. It replaces the deprecated spec.loadBalancerIP. Read by
	// internal/ipam.
	LoadBalancerIPs = "groundcloud.io/load-balancer-ips"
	// AllowSharedIP is a sharing key: Services with the same key may hold
	// the same address if their ports do not overlap. Read by
	// internal/ipam, and recorded in a LoadBalancer's spec.sharingKey.
	AllowSharedIP = "groundcloud.io/allow-shared-ip"
	// Forwarding chooses the Service's forwarding, "passthrough" or
	// "proxy" (in any case), over its pool's. Read by
	// internal/loadbalancers.
	Forwarding = "groundcloud.io/forwarding"
)

// ServiceAnnotations returns every annotation groundcloud reads on a
// Service, in a new slice: the constants above, which docs/annotations.md
// documents.
func ServiceAnnotations() []string {
	return []string{Pool, LoadBalancerIPs, AllowSharedIP, Forwarding}
}
