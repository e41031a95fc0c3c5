package vip

import (
	"net"
	"net/netip"

	"github.com/groundcloud/groundcloud/internal/frames"
)

var allNodes = netip.MustParseAddr("ff02::1")

// announcement is the Ethernet frame that announces a held by mac: an ARP
// announcement for IPv4, an unsolicited neighbour advertisement for IPv6.
func announcement(mac net.HardwareAddr, a netip.Addr) []byte {
	if a.Is4() {
		return arpAnnouncement(mac, a)
	}
	return unsolicitedNA(mac, a)
}

// arpAnnouncement is a broadcast ARP request whose sender and target
// protocol addresses are both a and whose target hardware address is zero
// (RFC 5227 section 2.3, what Linux itself sends). Receivers update an
// existing neighbour entry for a at once: Linux treats it as gratuitous and
// overrides even within the entry's locktime.
func arpAnnouncement(mac net.HardwareAddr, a netip.Addr) []byte {
	return frames.ARPRequest(mac, a, a)
}

// unsolicitedNA is a neighbour advertisement for a to all nodes, from a
// itself, with the override flag (receivers replace the link-layer address
// of an existing entry), neither solicited nor router, and a's link-layer
// address in a target link-layer address option (RFC 4861 section 7.2.6).
func unsolicitedNA(mac net.HardwareAddr, a netip.Addr) []byte {
	const (
		icmpLen     = 32 // header 4, flags 4, target 16, option 8
		naType      = 136
		overrideBit = 0x20
		optTargetLL = 2
	)
	src := a.As16()
	icmp := make([]byte, icmpLen)
	icmp[0] = naType
	icmp[4] = overrideBit
	copy(icmp[8:24], src[:])
	icmp[24], icmp[25] = optTargetLL, 1 // length in units of 8 bytes
	copy(icmp[26:32], mac)
	return frames.ICMPv6(mac, a, allNodes, icmp)
}
