package routes

import (
	"errors"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// ErrNoNextHop is returned when a Node has no address of its pod CIDR's
// family to route to.
var ErrNoNextHop = errors.New("node has no address of the pod CIDR's family")

// ParseCIDR parses a pod CIDR and returns it in canonical form. Host bits
// are refused: node-ipam never sets them, and a route for 10.244.1.5/24
// would silently become one for 10.244.1.0/24.
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("pod CIDR %q: %w", s, err)
	}
	if p.Addr().Zone() != "" || p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("pod CIDR %q has host bits set (want %s)", s, p.Masked())
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("pod CIDR %q is IPv4-mapped IPv6; write it as IPv4", s)
	}
	return p, nil
}

// NextHop is the address a route to a pod CIDR of the given family goes
// to: the node's first InternalIP of that family, else its first
// ExternalIP of that family, in the order the Node lists them.
func NextHop(addrs []v1.NodeAddress, ipv4 bool) (netip.Addr, error) {
	for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range addrs {
			if a.Type != typ {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil || ip.Zone() != "" {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() == ipv4 {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, ErrNoNextHop
}

// Build returns the Route object the controller manager writes for an
// upstream route (from CreateRoute).
func Build(r *cloudprovider.Route) (*v1alpha1.Route, error) {
	if r.TargetNode == "" {
		return nil, errors.New("route has no target node")
	}
	dst, err := ParseCIDR(r.DestinationCIDR)
	if err != nil {
		return nil, err
	}
	hop, err := NextHop(r.TargetNodeAddresses, dst.Addr().Is4())
	if err != nil {
		return nil, fmt.Errorf("route %s to node %s: %w", dst, r.TargetNode, err)
	}
	obj := &v1alpha1.Route{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Route"},
		ObjectMeta: metav1.ObjectMeta{Name: ObjectName(string(r.TargetNode), dst)},
		Spec: v1alpha1.RouteSpec{
			NodeName:        string(r.TargetNode),
			DestinationCIDR: dst.String(),
			NextHop:         hop.String(),
		},
	}
	for _, a := range r.TargetNodeAddresses {
		obj.Spec.NodeAddresses = append(obj.Spec.NodeAddresses, v1alpha1.NodeAddress{Type: string(a.Type), Address: a.Address})
	}
	return obj, nil
}

// ToCloud is what ListRoutes reports for a Route object. A route whose
// machine is gone is a blackhole, as a cloud reports a route whose target
// instance no longer exists: no target node, Blackhole set, so that the
// route controller deletes it. Node addresses are reported
// (EnableNodeAddresses) so that the route controller replaces a route
// when its Node's addresses change.
func ToCloud(obj *v1alpha1.Route, machineGone bool) *cloudprovider.Route {
	r := &cloudprovider.Route{
		Name:                obj.Name,
		TargetNode:          types.NodeName(obj.Spec.NodeName),
		DestinationCIDR:     obj.Spec.DestinationCIDR,
		EnableNodeAddresses: true,
		TargetNodeAddresses: []v1.NodeAddress{},
	}
	for _, a := range obj.Spec.NodeAddresses {
		r.TargetNodeAddresses = append(r.TargetNodeAddresses, v1.NodeAddress{Type: v1.NodeAddressType(a.Type), Address: a.Address})
	}
	if machineGone {
		r.TargetNode, r.Blackhole = "", true
	}
	return r
}
