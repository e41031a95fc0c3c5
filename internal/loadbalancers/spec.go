package loadbalancers

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

// KubeProxyHealthPort is where agents probe nodes of Services with
// externalTrafficPolicy Cluster: kube-proxy's /healthz.
const KubeProxyHealthPort = 10256

// AddressFallback gives the addresses of a node that reports none yet, or
// nil.
type AddressFallback func(*v1.Node) []v1.NodeAddress

// DesiredSpec is the LoadBalancer spec for svc with its allocation and the
// nodes it may send traffic to.
func DesiredSpec(svc *v1.Service, nodes []*v1.Node, fallback AddressFallback, alloc ipam.Allocation, sharingKey string) v1alpha1.LoadBalancerSpec {
	spec := v1alpha1.LoadBalancerSpec{
		Pool:                  alloc.Pool,
		SharingKey:            sharingKey,
		Backends:              Backends(nodes, fallback),
		ExternalTrafficPolicy: string(v1.ServiceExternalTrafficPolicyCluster),
		SessionAffinity:       string(v1.ServiceAffinityNone),
		HealthCheck:           &v1alpha1.HealthCheck{Port: KubeProxyHealthPort, Path: "/healthz"},
	}
	for _, a := range alloc.Addresses {
		spec.Addresses = append(spec.Addresses, a.String())
	}
	for _, p := range svc.Spec.Ports {
		spec.Ports = append(spec.Ports, v1alpha1.Port{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port, NodePort: p.NodePort})
	}
	if svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
		spec.ExternalTrafficPolicy = string(v1.ServiceExternalTrafficPolicyLocal)
		spec.HealthCheck = &v1alpha1.HealthCheck{Port: svc.Spec.HealthCheckNodePort, Path: "/healthz"}
	}
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		spec.SessionAffinity = string(v1.ServiceAffinityClientIP)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			t := *c.ClientIP.TimeoutSeconds
			spec.SessionAffinityTimeoutSeconds = &t
		}
	}
	for _, r := range svc.Spec.LoadBalancerSourceRanges {
		if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil {
			spec.SourceRanges = append(spec.SourceRanges, p.Masked().String())
		}
	}
	slices.Sort(spec.SourceRanges)
	spec.SourceRanges = slices.Compact(spec.SourceRanges)
	return spec
}

// Backends are the nodes that may carry traffic, sorted by name: those
// initialised by the cloud-node controller (a providerID, no uninitialized
// taint), not being deleted, not excluded by label, with an address.
//
// A node that reports no address yet takes them from fallback (may be nil):
// the cloud-node controller writes a new node's addresses only after it has
// set its providerID, and the service controller does not call again when
// addresses arrive.
func Backends(nodes []*v1.Node, fallback AddressFallback) []v1alpha1.Backend {
	var out []v1alpha1.Backend
	for _, n := range nodes {
		if !eligible(n) {
			continue
		}
		addrs := nodeAddresses(n.Status.Addresses)
		if len(addrs) == 0 && fallback != nil {
			addrs = nodeAddresses(fallback(n))
		}
		if len(addrs) == 0 {
			continue
		}
		out = append(out, v1alpha1.Backend{NodeName: n.Name, Addresses: addrs})
	}
	slices.SortFunc(out, func(a, b v1alpha1.Backend) int { return strings.Compare(a.NodeName, b.NodeName) })
	return out
}

func eligible(n *v1.Node) bool {
	if n.Spec.ProviderID == "" || n.DeletionTimestamp != nil {
		return false
	}
	if _, excluded := n.Labels[v1.LabelNodeExcludeBalancers]; excluded {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == cloudapi.TaintExternalCloudProvider {
			return false
		}
	}
	return true
}

// nodeAddresses are the InternalIPs of a node's addresses, or its
// ExternalIPs when it has none; at most two, one per family, in order.
func nodeAddresses(addresses []v1.NodeAddress) []string {
	for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		var out []string
		var seen4, seen6 bool
		for _, a := range addresses {
			if a.Type != typ {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				continue
			}
			ip = ip.Unmap()
			if (ip.Is4() && seen4) || (ip.Is6() && seen6) {
				continue
			}
			seen4, seen6 = seen4 || ip.Is4(), seen6 || ip.Is6()
			out = append(out, ip.String())
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// PortsSummary is the value of v1alpha1.AnnotationPorts for spec.
func PortsSummary(spec *v1alpha1.LoadBalancerSpec) string {
	var parts []string
	for _, p := range spec.Ports {
		parts = append(parts, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
	}
	return strings.Join(parts, ",")
}

// ServiceStatus is what the Service's status.loadBalancer shows: each
// address with ipMode Proxy, because agents DNAT (the node does not see the
// VIP as destination).
func ServiceStatus(spec *v1alpha1.LoadBalancerSpec) *v1.LoadBalancerStatus {
	st := &v1.LoadBalancerStatus{}
	proxy := v1.LoadBalancerIPModeProxy
	for _, a := range spec.Addresses {
		st.Ingress = append(st.Ingress, v1.LoadBalancerIngress{IP: a, IPMode: &proxy})
	}
	return st
}

// allocationOf reads the allocation record in a LoadBalancer.
func allocationOf(lb *v1alpha1.LoadBalancer) (ipam.Allocation, []ipam.Port, error) {
	alloc := ipam.Allocation{Pool: lb.Spec.Pool}
	for _, s := range lb.Spec.Addresses {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return ipam.Allocation{}, nil, err
		}
		alloc.Addresses = append(alloc.Addresses, a)
	}
	var ports []ipam.Port
	for _, p := range lb.Spec.Ports {
		ports = append(ports, ipam.Port{Protocol: v1.Protocol(p.Protocol), Port: p.Port})
	}
	return alloc, ports, nil
}

// ownerReference makes the Service own its LoadBalancer, so that garbage
// collection removes the object if the Service goes without us.
func ownerReference(svc *v1.Service) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}
}
