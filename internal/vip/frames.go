package vip

import (
	"encoding/binary"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

const minFrame = 60 // Ethernet minimum without the frame check sequence

var (
	broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	allNodesMAC  = net.HardwareAddr{0x33, 0x33, 0x00, 0x00, 0x00, 0x01}
	allNodes     = netip.MustParseAddr("ff02::1")
)

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
	ip := a.As4()
	b := make([]byte, 0, minFrame)
	b = append(b, broadcastMAC...)
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_ARP)
	b = binary.BigEndian.AppendUint16(b, 1) // hardware type: Ethernet
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IP)
	b = append(b, 6, 4)                     // address lengths
	b = binary.BigEndian.AppendUint16(b, 1) // operation: request
	b = append(b, mac...)
	b = append(b, ip[:]...)
	b = append(b, make([]byte, 6)...)
	b = append(b, ip[:]...)
	return b[:minFrame] // zero padding
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
	src, dst := a.As16(), allNodes.As16()
	icmp := make([]byte, icmpLen)
	icmp[0] = naType
	icmp[4] = overrideBit
	copy(icmp[8:24], src[:])
	icmp[24], icmp[25] = optTargetLL, 1 // length in units of 8 bytes
	copy(icmp[26:32], mac)
	binary.BigEndian.PutUint16(icmp[2:4], icmpv6Checksum(src, dst, icmp))

	b := make([]byte, 0, 14+40+icmpLen)
	b = append(b, allNodesMAC...)
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IPV6)
	b = append(b, 0x60, 0, 0, 0) // version 6, traffic class 0, flow label 0
	b = binary.BigEndian.AppendUint16(b, icmpLen)
	b = append(b, unix.IPPROTO_ICMPV6, 255) // next header, hop limit (must be 255)
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	return append(b, icmp...)
}

// icmpv6Checksum is the Internet checksum of the IPv6 pseudo-header and msg
// (whose checksum field is zero).
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
