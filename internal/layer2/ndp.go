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

// IPv6 has no ARP: a Guard watches IPv6 addresses with Neighbor Discovery
// (RFC 4861) instead, with the same semantics.
//
// Probe: RFC 4862 duplicate address detection. Each round the Guard sends,
// for each IPv6 address its caller holds, a Neighbor Solicitation from ::
// to the address's solicited-node group with the address as target and no
// source link-layer option (RFC 4861 forbids one from ::). Like an ARP
// probe it teaches receivers nothing, and every host holding the address
// answers with a Neighbor Advertisement to all nodes (ff02::1) carrying its
// MAC in a target link-layer address option. It is sent on an AF_PACKET
// socket as a whole frame, because an ICMPv6 socket cannot send from ::,
// and frames sent so never loop back to this host's own stack.
//
// Listen: an ICMPv6 socket bound to the interface whose ICMP6_FILTER passes
// Neighbor Solicitations and Advertisements only: the Guard does not see
// the data plane's traffic. It joins (Follow) the solicited-node group of
// every IPv6 address this host wants: the kernel joined those of the
// addresses it holds, but one this host yields it no longer holds, and it
// must keep hearing the winner's probes to keep yielding.
//
// What is a claim (claimNDP), and how the MAC is learnt:
//
//   - A Neighbor Advertisement for the address from another MAC (its
//     target link-layer option) is passive. A kernel's answer to a DAD probe
//     and an agent's announcement (a Manager's: an unsolicited NA from the
//     address to ff02::1 with the override flag) are the same packet (both
//     override, not solicited; only the router flag may differ): the Guard
//     cannot tell an agent from a kernel, and all count as a kernel's.
//   - A Neighbor Solicitation sent from the address (a kernel resolving a
//     neighbour, with its MAC in the source link-layer option) is passive.
//   - A DAD probe for the address (source ::) is active: an agent's guard
//     probes, and only addresses it holds (a host configuring the address
//     with DAD would too: a stranger, defended against). It carries no MAC,
//     and an ICMPv6 socket does not tell the sender's: the claim has an
//     empty MAC, and internal/membership attributes it to the one station
//     already seen answering for the address (its conflicts.observe). The
//     probing host holds the address, so its kernel answers this host's own
//     probes and its MAC is known after one round. The loser of a split
//     brain, once it yielded, keeps hearing the winner's probes each round
//     (it stays in the solicited-node group) and keeps yielding, as with
//     ARP. Announcements cannot stand in: an agent sends them only at
//     takeover, when defending and every --announce-interval, and they look
//     like a kernel's answers.
//   - A Neighbor Solicitation asking for the address (a client resolving
//     it) claims the client's address, not this one.

const (
	ndpSolicitation  = 135
	ndpAdvertisement = 136
	ndpOptSourceLL   = 1
	ndpOptTargetLL   = 2
	ndpHopLimit      = 255
	nsLen            = 24 // type, code, checksum, reserved, target
)

// ndpPacket is the part of a Neighbor Solicitation or Advertisement a
// Guard reads.
type ndpPacket struct {
	op          uint8 // ndpSolicitation or ndpAdvertisement
	src, target netip.Addr
	// mac: the source (solicitation) or target (advertisement) link-layer
	// address option; nil without.
	mac net.HardwareAddr
}

// solicitedNode is the solicited-node multicast group of a (RFC 4291).
func solicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 10: 0, 11: 1, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

// dadProbe is the Ethernet frame of a duplicate address detection probe
// for a, from mac: a Neighbor Solicitation from :: to a's solicited-node
// group with target a and no option.
func dadProbe(mac net.HardwareAddr, a netip.Addr) []byte {
	target := a.As16()
	icmp := make([]byte, nsLen)
	icmp[0] = ndpSolicitation
	copy(icmp[8:], target[:])
	return icmpv6Frame(mac, netip.IPv6Unspecified(), solicitedNode(a), icmp)
}

// parseNDP decodes an ICMPv6 message (as an ICMPv6 socket returns it,
// without the IPv6 header) from src holding a Neighbor Solicitation or
// Advertisement. The kernel has checked the checksum.
func parseNDP(src netip.Addr, msg []byte) (ndpPacket, bool) {
	if len(msg) < nsLen || msg[1] != 0 || msg[0] != ndpSolicitation && msg[0] != ndpAdvertisement {
		return ndpPacket{}, false
	}
	p := ndpPacket{op: msg[0], src: src.Unmap(), target: netip.AddrFrom16([16]byte(msg[8:24]))}
	want := byte(ndpOptSourceLL)
	if p.op == ndpAdvertisement {
		want = ndpOptTargetLL
	}
	for opts := msg[nsLen:]; len(opts) >= 8; {
		n := int(opts[1]) * 8
		if n == 0 || n > len(opts) {
			return ndpPacket{}, false // malformed: RFC 4861 says drop
		}
		if opts[0] == want && n == 8 {
			p.mac = net.HardwareAddr(append([]byte(nil), opts[2:8]...))
		}
		opts = opts[n:]
	}
	return p, true
}

// claimNDP tells which address a Neighbor Discovery packet from another
// station claims (see the top of this file): a DAD probe its target
// actively (MAC from its option, normally none), an advertisement its
// target and a solicitation its source passively. ok is false for this
// host's own packets and for those without a MAC that are no DAD probe.
func claimNDP(p ndpPacket, self net.HardwareAddr) (Claim, bool) {
	if p.mac != nil && p.mac.String() == self.String() {
		return Claim{}, false
	}
	c := Claim{MAC: p.mac.String()}
	switch {
	case p.op == ndpSolicitation && p.src.IsUnspecified():
		c.Addr, c.Active = p.target, true // DAD probe
	case p.mac == nil:
		return Claim{}, false // a kernel's packet without a MAC tells nothing
	case p.op == ndpAdvertisement:
		c.Addr = p.target // a kernel's answer, or an agent's announcement
	default: // a solicitation
		c.Addr = p.src // a kernel resolving a neighbour from the address
	}
	return c, true
}

// ndpSocket sends DAD probes and receives Neighbor Solicitations and
// Advertisements on one interface.
type ndpSocket struct {
	fd      int // ICMPv6, receives
	out     int // AF_PACKET without protocol: sends, receives nothing
	ifindex int
	joined  map[netip.Addr]bool // solicited-node groups, by address
}

func openNDPSocket(ifname string, ifindex int) (_ *ndpSocket, err error) {
	s := &ndpSocket{fd: -1, out: -1, ifindex: ifindex, joined: map[netip.Addr]bool{}}
	defer func() {
		if err != nil {
			_ = s.close()
		}
	}()
	if s.fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6); err != nil {
		return nil, fmt.Errorf("open ICMPv6 socket: %w", err)
	}
	var filter unix.ICMPv6Filter // a set bit blocks the type
	for i := range filter.Data {
		filter.Data[i] = ^uint32(0)
	}
	for _, typ := range []int{ndpSolicitation, ndpAdvertisement} {
		filter.Data[typ>>5] &^= 1 << (typ & 31)
	}
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	for _, step := range []struct {
		what string
		err  func() error
	}{
		{"filter ICMPv6", func() error { return unix.SetsockoptICMPv6Filter(s.fd, unix.SOL_ICMPV6, unix.ICMPV6_FILTER, &filter) }},
		{"bind ICMPv6 socket", func() error { return unix.BindToDevice(s.fd, ifname) }},
		{"ask for hop limits", func() error { return unix.SetsockoptInt(s.fd, unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1) }},
		{"set ICMPv6 socket timeout", func() error { return unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv) }},
	} {
		if err := step.err(); err != nil {
			return nil, fmt.Errorf("%s: %w", step.what, err)
		}
	}
	if s.out, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("open packet socket: %w", err)
	}
	return s, nil
}

// follow joins the solicited-node groups of vips and leaves the others.
func (s *ndpSocket) follow(vips []netip.Addr) error {
	want := map[netip.Addr]bool{}
	for _, v := range vips {
		want[solicitedNode(v)] = true
	}
	var errs []error
	for g := range s.joined {
		if !want[g] {
			delete(s.joined, g)
			errs = append(errs, s.membership(unix.IPV6_LEAVE_GROUP, g))
		}
	}
	for g := range want {
		if !s.joined[g] {
			if err := s.membership(unix.IPV6_JOIN_GROUP, g); err != nil {
				errs = append(errs, err)
				continue
			}
			s.joined[g] = true
		}
	}
	return errors.Join(errs...)
}

func (s *ndpSocket) membership(op int, group netip.Addr) error {
	mreq := &unix.IPv6Mreq{Multiaddr: group.As16(), Interface: uint32(s.ifindex)}
	if err := unix.SetsockoptIPv6Mreq(s.fd, unix.IPPROTO_IPV6, op, mreq); err != nil {
		return fmt.Errorf("group %s: %w", group, err)
	}
	return nil
}

func (s *ndpSocket) send(frame []byte) error {
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: s.ifindex, Halen: 6}
	copy(to.Addr[:], frame[:6])
	return unix.Sendto(s.out, frame, unix.MSG_DONTWAIT, to)
}

// receive returns the next Neighbor Discovery message and its source, or
// ok false after the socket's timeout or for a message that did not come
// with hop limit 255 (from off the link: RFC 4861 says drop).
func (s *ndpSocket) receive(buf, oob []byte) (msg []byte, src netip.Addr, ok bool, err error) {
	n, oobn, _, from, err := unix.Recvmsg(s.fd, buf, oob, 0)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return nil, netip.Addr{}, false, nil
	}
	if err != nil {
		return nil, netip.Addr{}, false, err
	}
	sa, isIn6 := from.(*unix.SockaddrInet6)
	if !isIn6 || hopLimit(oob[:oobn]) != ndpHopLimit {
		return nil, netip.Addr{}, false, nil
	}
	return buf[:n], netip.AddrFrom16(sa.Addr), true, nil
}

func hopLimit(oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_HOPLIMIT && len(m.Data) >= 4 {
			return int(binary.NativeEndian.Uint32(m.Data))
		}
	}
	return -1
}

func (s *ndpSocket) close() error {
	var errs []error
	for _, fd := range []int{s.fd, s.out} {
		if fd >= 0 {
			errs = append(errs, unix.Close(fd))
		}
	}
	return errors.Join(errs...)
}
