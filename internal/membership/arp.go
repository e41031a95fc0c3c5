package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/groundcloud/groundcloud/internal/frames"
)

const (
	arpFrameLen  = 42 // Ethernet header 14 + ARP for IPv4 over Ethernet 28
	arpRequest   = 1
	arpReply     = 2
	packetOutgng = unix.PACKET_OUTGOING
)

// arpProbe is an RFC 5227 ARP probe for a: a broadcast request from mac
// with sender protocol address 0.0.0.0, so that no receiver learns anything
// from it, and every host holding a answers to mac.
func arpProbe(mac net.HardwareAddr, a netip.Addr) []byte {
	return frames.ARPRequest(mac, netip.IPv4Unspecified(), a)
}

// arpPacket is the part of an ARP frame the guard reads.
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

// classify turns an ARP packet from another station into a sighting of
// one of vips: a probe or announcement for it (active: an agent claims
// it), a reply from it or a request sent from it (passive: a kernel holds
// it). ok is false for anything else, such as a client asking for it.
func classify(p arpPacket, self net.HardwareAddr, vips map[netip.Addr]bool, at time.Time) (sighting, bool) {
	if p.sha.String() == self.String() {
		return sighting{}, false
	}
	s := sighting{MAC: p.sha.String(), At: at}
	switch {
	case p.op == arpRequest && p.spa.IsUnspecified() && vips[p.tpa]:
		s.VIP, s.Active = p.tpa, true // probe
	case p.op == arpRequest && vips[p.spa] && p.spa == p.tpa:
		s.VIP, s.Active = p.spa, true // announcement
	case vips[p.spa] && (p.op == arpRequest || p.op == arpReply):
		s.VIP = p.spa // a kernel's reply, or its request from the address
	default:
		return sighting{}, false
	}
	return s, true
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
