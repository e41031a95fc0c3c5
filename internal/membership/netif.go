package membership

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// netInterface is the client-facing interface as membership uses it.
type netInterface struct {
	index int
	mac   net.HardwareAddr // nil unless Ethernet
	bind  netip.Addr       // the gossip address
}

// resolveInterface finds the interface and the gossip address: bindHost
// when set, else the first IPv4 (then IPv6) global unicast address of the
// interface that is not a host address (/32, /128), which virtual IPs are.
func resolveInterface(name, bindHost string) (netInterface, error) {
	l, out, err := resolveLink(name)
	if err != nil {
		return netInterface{}, err
	}
	if bindHost != "" {
		a, err := netip.ParseAddr(bindHost)
		if err != nil {
			return netInterface{}, fmt.Errorf("--gossip-address: host must be an IP address: %w", err)
		}
		out.bind = a.Unmap()
		return out, nil
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return netInterface{}, fmt.Errorf("addresses of %s: %w", name, err)
	}
	var v6 netip.Addr
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		ones, bits := a.Mask.Size()
		if !ok || !ip.Unmap().IsGlobalUnicast() || ones == bits {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() {
			out.bind = ip
			return out, nil
		}
		if !v6.IsValid() {
			v6 = ip
		}
	}
	if !v6.IsValid() {
		return netInterface{}, fmt.Errorf("interface %s has no address to gossip on; set --gossip-address", name)
	}
	out.bind = v6
	return out, nil
}

// resolveLink finds the interface, its index and its Ethernet address;
// bind stays unset.
func resolveLink(name string) (netlink.Link, netInterface, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, netInterface{}, fmt.Errorf("interface %s: %w", name, err)
	}
	attrs := l.Attrs()
	out := netInterface{index: attrs.Index}
	if attrs.EncapType == "ether" && len(attrs.HardwareAddr) == 6 {
		out.mac = attrs.HardwareAddr
	}
	return l, out, nil
}

// linkIsUp reports whether the interface is administratively up and has a
// carrier (operational state up, or unknown for drivers that do not say).
func linkIsUp(name string) (bool, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return false, err
	}
	attrs := l.Attrs()
	return attrs.Flags&net.FlagUp != 0 && (attrs.OperState == netlink.OperUp || attrs.OperState == netlink.OperUnknown), nil
}
