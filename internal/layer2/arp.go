package layer2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

const (
	arpFrameLen  = 42 // Ethernet header 14 + ARP for IPv4 over Ethernet 28
	arpOpRequest = 1
	arpOpReply   = 2
	packetOutgng = unix.PACKET_OUTGOING
)

// arpProbe is an RFC 5227 ARP probe for a: a broadcast request from mac
// with sender protocol address 0.0.0.0, so that no receiver learns anything
// from it, and every host holding a answers to mac.
func arpProbe(mac net.HardwareAddr, a netip.Addr) []byte {
	return arpRequest(mac, netip.IPv4Unspecified(), a)
}

// arpPacket is the part of an ARP frame a Guard reads.
type arpPacket struct {
	op       uint16
	sha      net.HardwareAddr
	spa, tpa netip.Addr
}

// parseARP decodes an Ethernet frame holding ARP for IPv4 over Ethernet.
func parseARP(frame []byte) (arpPacket, bool) {
	if len(frame) < arpFrameLen || binary.BigEndian.Uint16(frame[12:14]) != unix.ETH_P_ARP {
		return arpPacket{}, false
	}
	a := frame[14:]
	if binary.BigEndian.Uint16(a[0:2]) != 1 || binary.BigEndian.Uint16(a[2:4]) != unix.ETH_P_IP || a[4] != 6 || a[5] != 4 {
		return arpPacket{}, false
	}
	return arpPacket{
		op:  binary.BigEndian.Uint16(a[6:8]),
		sha: net.HardwareAddr(append([]byte(nil), a[8:14]...)),
		spa: netip.AddrFrom4([4]byte(a[14:18])),
		tpa: netip.AddrFrom4([4]byte(a[24:28])),
	}, true
}

// claimARP tells which address an ARP packet from another station claims:
// a probe or an announcement claims its target actively (an agent claims
// it), a reply or any other request passively for its sender address (a
// kernel holds it). ok is false for this host's own frames and for other
// operations. A client asking for a virtual IP claims its own address: the
// caller drops claims of addresses that are not its virtual IPs.
func claimARP(p arpPacket, self net.HardwareAddr) (Claim, bool) {
	if p.sha.String() == self.String() {
		return Claim{}, false
	}
	c := Claim{MAC: p.sha.String()}
	switch {
	case p.op == arpOpRequest && p.spa.IsUnspecified():
		c.Addr, c.Active = p.tpa, true // probe
	case p.op == arpOpRequest && p.spa == p.tpa:
		c.Addr, c.Active = p.spa, true // announcement
	case p.op == arpOpRequest || p.op == arpOpReply:
		c.Addr = p.spa // a kernel's reply, or its request from the address
	default:
		return Claim{}, false
	}
	return c, true
}

// arpSocket sends and receives ARP frames on one interface.
type arpSocket struct {
	fd      int
	ifindex int
}

func openARPSocket(ifindex int) (*arpSocket, error) {
	proto := int(htons(unix.ETH_P_ARP))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, fmt.Errorf("open ARP socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind ARP socket: %w", err)
	}
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("set ARP socket timeout: %w", err)
	}
	return &arpSocket{fd: fd, ifindex: ifindex}, nil
}

func (s *arpSocket) send(frame []byte) error {
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: s.ifindex, Halen: 6}
	copy(to.Addr[:], frame[:6])
	return unix.Sendto(s.fd, frame, unix.MSG_DONTWAIT, to)
}

// receive returns the next frame that arrived (not one this host sent),
// or ok false after the socket's timeout.
func (s *arpSocket) receive(buf []byte) (frame []byte, ok bool, err error) {
	n, from, err := unix.Recvfrom(s.fd, buf, 0)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if ll, isLL := from.(*unix.SockaddrLinklayer); isLL && ll.Pkttype == packetOutgng {
		return nil, false, nil
	}
	return buf[:n], true, nil
}

func (s *arpSocket) close() error { return unix.Close(s.fd) }

func htons(v uint16) uint16 { return v<<8 | v>>8 }
