// Package frames builds the Ethernet frames the agent sends on a packet
// socket: ARP requests (announcements and probes) and ICMPv6 Neighbor
// Discovery messages (unsolicited advertisements and duplicate address
// detection probes), whose IPv6 source the kernel would not let an ICMPv6
// socket choose.
package frames

import (
	"encoding/binary"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// MinLen is the Ethernet minimum without the frame check sequence.
const MinLen = 60

// Broadcast is the Ethernet broadcast address.
var Broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ARPRequest is a broadcast ARP request for IPv4 over Ethernet from mac,
// with sender protocol address spa (0.0.0.0 in an RFC 5227 probe), target
// protocol address tpa and a zero target hardware address, padded to
// MinLen.
func ARPRequest(mac net.HardwareAddr, spa, tpa netip.Addr) []byte {
	s, t := spa.As4(), tpa.As4()
	b := make([]byte, 0, MinLen)
	b = append(b, Broadcast...)
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
	return b[:MinLen] // zero padding
}

// MulticastMAC is the Ethernet address of IPv6 multicast group g
// (RFC 2464: 33:33 and the group's last four bytes).
func MulticastMAC(g netip.Addr) net.HardwareAddr {
	b := g.As16()
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// ICMPv6 is the Ethernet frame from mac to the multicast group dst (its
// MulticastMAC) of an IPv6 packet from src with hop limit 255 (what
// Neighbor Discovery requires) carrying msg. It fills msg's checksum field
// (bytes 2-3, zero on entry).
func ICMPv6(mac net.HardwareAddr, src, dst netip.Addr, msg []byte) []byte {
	s, d := src.As16(), dst.As16()
	binary.BigEndian.PutUint16(msg[2:4], ICMPv6Checksum(s, d, msg))
	b := make([]byte, 0, 14+40+len(msg))
	b = append(b, MulticastMAC(dst)...)
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IPV6)
	b = append(b, 0x60, 0, 0, 0) // version 6, traffic class 0, flow label 0
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	b = append(b, unix.IPPROTO_ICMPV6, 255) // next header, hop limit
	b = append(b, s[:]...)
	b = append(b, d[:]...)
	return append(b, msg...)
}

// ICMPv6Checksum is the Internet checksum of the IPv6 pseudo-header and
// msg (whose checksum field is zero; over a message with its checksum in
// place it is zero).
func ICMPv6Checksum(src, dst [16]byte, msg []byte) uint16 {
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
