package loadbalancers

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudapi "k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// toBeDeletedTaint is set by the cluster autoscaler on a node it is about
// to remove; upstream's service controller leaves such nodes out of load
// balancers (k8s.io/cloud-provider controllers/service ToBeDeletedTaint).
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// AddressFallback gives the addresses of a node that reports none yet, or
// nil.
type AddressFallback func(*v1.Node) []v1.NodeAddress

// Backends are the nodes that may carry traffic, sorted by name: each node
// for which Backend says so. It is the one rule for every load balancer
// (the set does not depend on the Service) and depends on nothing but its
// arguments, so anything holding a Node lister can apply it.
func Backends(nodes []*v1.Node, fallback AddressFallback) []v1alpha1.Backend {
	var out []v1alpha1.Backend
	for _, n := range nodes {
		if b, ok := Backend(n, fallback); ok {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b v1alpha1.Backend) int { return strings.Compare(a.NodeName, b.NodeName) })
	return out
}

// Backend returns node n as a backend, or false when it may not carry
// traffic: it must be initialised by the cloud-node controller (a
// providerID, no uninitialized taint), not being deleted, not about to be
// removed by the cluster autoscaler, not excluded by label, and have an
// address.
//
// A node that reports no address yet takes them from fallback (may be nil):
// the cloud-node controller writes a new node's addresses only after it has
// removed the taint.
//
// Readiness is not a rule, as upstream since Kubernetes 1.27 (KEP-3458):
// the agents' health checks decide which backends get traffic, and a
// NotReady node often still forwards.
func Backend(n *v1.Node, fallback AddressFallback) (v1alpha1.Backend, bool) {
	if !Eligible(n) {
		return v1alpha1.Backend{}, false
	}
	addrs := nodeAddresses(n.Status.Addresses)
	if len(addrs) == 0 && fallback != nil {
		addrs = nodeAddresses(fallback(n))
	}
	if len(addrs) == 0 {
		return v1alpha1.Backend{}, false
	}
	return v1alpha1.Backend{NodeName: n.Name, Addresses: addrs}, true
}

// Eligible reports whether n may be a backend, addresses aside.
func Eligible(n *v1.Node) bool {
	if n.Spec.ProviderID == "" || n.DeletionTimestamp != nil || excluded(n) {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == cloudapi.TaintExternalCloudProvider || t.Key == toBeDeletedTaint {
			return false
		}
	}
	return true
}

// excluded applies node.kubernetes.io/exclude-from-external-load-balancers
// as upstream does: present means excluded unless its value parses as
// false.
func excluded(n *v1.Node) bool {
	v, ok := n.Labels[v1.LabelNodeExcludeBalancers]
	if !ok {
		return false
	}
	include, err := strconv.ParseBool(v)
	return err != nil || include
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
