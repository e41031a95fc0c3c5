package layer2

import (
	"encoding/binary"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// The Ethernet frames this package sends on packet sockets: ARP requests
// (announcements and probes) and ICMPv6 Neighbor Discovery messages
// (unsolicited advertisements and duplicate address detection probes),
// whose IPv6 source the kernel would not let an ICMPv6 socket choose.

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
	return arpRequest(mac, a, a)
}

// unsolicitedNA is a neighbour advertisement for a to all nodes, from a
// itself, with the override flag (receivers replace the link-layer address
// of an existing entry), neither solicited nor router, and a's link-layer
// address in a target link-layer address option (RFC 4861 section 7.2.6).
func unsolicitedNA(mac net.HardwareAddr, a netip.Addr) []byte {
	const (
		icmpLen     = 32 // header 4, flags 4, target 16, option 8
		overrideBit = 0x20
	)
	src := a.As16()
	icmp := make([]byte, icmpLen)
	icmp[0] = ndpAdvertisement
	icmp[4] = overrideBit
	copy(icmp[8:24], src[:])
	icmp[24], icmp[25] = ndpOptTargetLL, 1 // length in units of 8 bytes
	copy(icmp[26:32], mac)
	return icmpv6Frame(mac, a, allNodes, icmp)
}

// ethMinLen is the Ethernet minimum without the frame check sequence.
const ethMinLen = 60

// ethBroadcast is the Ethernet broadcast address.
var ethBroadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// arpRequest is a broadcast ARP request for IPv4 over Ethernet from mac,
// with sender protocol address spa (0.0.0.0 in an RFC 5227 probe), target
// protocol address tpa and a zero target hardware address, padded to
// ethMinLen.
func arpRequest(mac net.HardwareAddr, spa, tpa netip.Addr) []byte {
	s, t := spa.As4(), tpa.As4()
	b := make([]byte, 0, ethMinLen)
	b = append(b, ethBroadcast...)
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_ARP)
	b = binary.BigEndian.AppendUint16(b, 1) // hardware type: Ethernet
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IP)
	b = append(b, 6, 4)                     // address lengths
	b = binary.BigEndian.AppendUint16(b, 1) // operation: request
	b = append(b, mac...)
	b = append(b, s[:]...)
	b = append(b, make([]byte, 6)...)
	b = append(b, t[:]...)
	return b[:ethMinLen] // zero padding
}

// multicastMAC is the Ethernet address of IPv6 multicast group g
// (RFC 2464: 33:33 and the group's last four bytes).
func multicastMAC(g netip.Addr) net.HardwareAddr {
	b := g.As16()
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// icmpv6Frame is the Ethernet frame from mac to the multicast group dst (its
// multicastMAC) of an IPv6 packet from src with hop limit 255 (what
// Neighbor Discovery requires) carrying msg. It fills msg's checksum field
// (bytes 2-3, zero on entry).
func icmpv6Frame(mac net.HardwareAddr, src, dst netip.Addr, msg []byte) []byte {
	s, d := src.As16(), dst.As16()
	binary.BigEndian.PutUint16(msg[2:4], icmpv6Checksum(s, d, msg))
	b := make([]byte, 0, 14+40+len(msg))
	b = append(b, multicastMAC(dst)...)
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IPV6)
	b = append(b, 0x60, 0, 0, 0) // version 6, traffic class 0, flow label 0
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	b = append(b, unix.IPPROTO_ICMPV6, 255) // next header, hop limit
	b = append(b, s[:]...)
	b = append(b, d[:]...)
	return append(b, msg...)
}

// icmpv6Checksum is the Internet checksum of the IPv6 pseudo-header and
// msg (whose checksum field is zero; over a message with its checksum in
// place it is zero).
func icmpv6Checksum(src, dst [16]byte, msg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	add(binary.BigEndian.AppendUint32(nil, uint32(len(msg))))
	add([]byte{0, 0, 0, unix.IPPROTO_ICMPV6})
	add(msg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
