package routeapi

import (
	"errors"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
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
