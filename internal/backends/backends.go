package backends

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudapi "k8s.io/cloud-provider/api"
)

// ToBeDeletedTaint is set by the cluster autoscaler on a node it is about
// to remove; upstream's service controller leaves such nodes out of load
// balancers (k8s.io/cloud-provider controllers/service ToBeDeletedTaint).
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// Max is the most nodes that are backends: 5,000, the largest cluster
// Kubernetes supports. Beyond it the first Max by name are used.
const Max = 5000

// Backend is a node that may carry load-balanced traffic.
type Backend struct {
	// Name is the Node's name.
	Name string
	// Addrs are the node's InternalIPs (its ExternalIPs when it has none),
	// at most one per family, in the Node's order.
	Addrs []netip.Addr
}

// Equal reports whether b and o are the same node with the same addresses.
func (b Backend) Equal(o Backend) bool {
	return b.Name == o.Name && slices.Equal(b.Addrs, o.Addrs)
}

// ConditionPodRoutes is the Node condition groundcloud-router writes on
// its own Node: True once the routes to the other Nodes' pod CIDRs are in
// its kernel, False (with the reason) while some are not.
const ConditionPodRoutes v1.NodeConditionType = "groundcloud.io/PodRoutes"

// Rules are the cluster's choices Of applies besides its fixed rules.
type Rules struct {
	// WaitForPodRoutes: groundcloud-router runs on every Node, and a Node
	// is a backend only once its router reports its pod routes programmed
	// (ConditionPodRoutes True). A Node that just joined would otherwise
	// get connections as soon as its kube-proxy answers, and kube-proxy
	// sends some of them to pods on other Nodes it has no route to yet.
	WaitForPodRoutes bool
}

// List returns the nodes that are backends (see Of), sorted by name, at
// most Max of them, and how many were left out beyond Max.
func (r Rules) List(nodes []*v1.Node) ([]Backend, int) {
	out := make([]Backend, 0, len(nodes))
	for _, n := range nodes {
		if b, ok := r.Of(n); ok {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b Backend) int { return strings.Compare(a.Name, b.Name) })
	if len(out) > Max {
		return out[:Max], len(out) - Max
	}
	return out, 0
}

// Of returns node n as a backend, or false when it may not carry traffic:
// it must be initialised by the cloud-node controller (a providerID, no
// uninitialized taint), not being deleted, not about to be removed by the
// cluster autoscaler, not excluded by label, and have an address. A node
// initialised before its addresses are written becomes a backend when the
// cloud-node controller writes them (from the inventory, or what kubelet
// reported).
//
// With WaitForPodRoutes, its router must also report its pod routes.
//
// Readiness is not a rule, as upstream since Kubernetes 1.27 (KEP-3458):
// health checks decide which backends get traffic, and a NotReady node
// often still forwards.
func (r Rules) Of(n *v1.Node) (Backend, bool) {
	if !Eligible(n) || r.WaitForPodRoutes && !PodRoutes(n) {
		return Backend{}, false
	}
	addrs := Addresses(n.Status.Addresses)
	if len(addrs) == 0 {
		return Backend{}, false
	}
	return Backend{Name: n.Name, Addrs: addrs}, true
}

// Same reports whether Of gives the same answer for a and b: a Node update
// for which it is true changes no load balancer.
func (r Rules) Same(a, b *v1.Node) bool {
	ba, oka := r.Of(a)
	bb, okb := r.Of(b)
	return oka == okb && ba.Equal(bb)
}

// Eligible reports whether n may be a backend, addresses aside.
func Eligible(n *v1.Node) bool {
	if n.Spec.ProviderID == "" || n.DeletionTimestamp != nil || Excluded(n) {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == cloudapi.TaintExternalCloudProvider || t.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// PodRoutes reports whether n's router says its pod routes are programmed.
func PodRoutes(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == ConditionPodRoutes {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// Excluded applies node.kubernetes.io/exclude-from-external-load-balancers
// as upstream does: present means excluded unless its value parses as
// false.
func Excluded(n *v1.Node) bool {
	v, ok := n.Labels[v1.LabelNodeExcludeBalancers]
	if !ok {
		return false
	}
	include, err := strconv.ParseBool(v)
	return err != nil || include
}

// Addresses are the InternalIPs among a node's addresses, or its
// ExternalIPs when it has none; at most two, one per family, in order.
func Addresses(addresses []v1.NodeAddress) []netip.Addr {
	for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		var out []netip.Addr
		var seen4, seen6 bool
		for _, a := range addresses {
			if a.Type != typ {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				continue
			}
			ip = ip.Unmap().WithZone("")
			if (ip.Is4() && seen4) || (ip.Is6() && seen6) {
				continue
			}
			seen4, seen6 = seen4 || ip.Is4(), seen6 || ip.Is6()
			out = append(out, ip)
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}
