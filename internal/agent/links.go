package agent

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// LinkPrefixes returns the prefixes of iface's addresses: the subnets
// passthrough forwarding reaches nodes on. Host prefixes (/32, /128), such
// as the virtual IPs themselves, are left out: no node is reached through
// them.
func LinkPrefixes(iface string) ([]netip.Prefix, error) {
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", iface, err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", iface, err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || a.IPNet == nil {
			continue
		}
		ones, bits := a.Mask.Size()
		if ones == bits {
			continue
		}
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones).Masked())
	}
	return out, nil
}
