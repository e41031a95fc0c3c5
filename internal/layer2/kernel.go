package layer2

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// AddrProtocol is the address protocol (IFA_PROTO) that marks the addresses a
// Manager added. The kernel defines 0-3 (unspec, kernel_lo, kernel_ra,
// kernel_ll); 0x67 is 'g'.
const AddrProtocol uint8 = 0x67

const (
	ifaProto           = 11 // IFA_PROTO; golang.org/x/sys/unix lacks it
	lifetimeInfinity   = 0xffffffff
	dumpRetries        = 3
	netlinkRecvTimeout = 10 // seconds
)

// link is the interface as the Manager needs it.
type link struct {
	index int
	mac   net.HardwareAddr // nil unless the link is Ethernet
}

// rtnl is a route netlink connection in the Manager's namespace, opened per
// operation. The vishvananda/netlink handle serves link lookups; address
// requests are built here because the library neither sets nor reports
// IFA_PROTO.
type rtnl struct {
	handle *netlink.Handle
	sock   *nl.SocketHandle
}

func dialRTNL(ns netns.NsHandle) (*rtnl, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink handle: %w", err)
	}
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	if err := s.SetReceiveTimeout(&unix.Timeval{Sec: netlinkRecvTimeout}); err != nil {
		s.Close()
		h.Close()
		return nil, fmt.Errorf("set netlink timeout: %w", err)
	}
	return &rtnl{handle: h, sock: &nl.SocketHandle{Socket: s}}, nil
}

func (r *rtnl) close() {
	r.sock.Close()
	r.handle.Close()
}

// errNoLink is returned when the interface does not exist.
var errNoLink = errors.New("interface not found")

func (r *rtnl) link(name string) (link, error) {
	l, err := r.handle.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return link{}, fmt.Errorf("%w: %s", errNoLink, name)
	}
	if err != nil {
		return link{}, fmt.Errorf("find interface %s: %w", name, err)
	}
	attrs := l.Attrs()
	res := link{index: attrs.Index}
	if attrs.EncapType == "ether" && len(attrs.HardwareAddr) == 6 && attrs.RawFlags&unix.IFF_NOARP == 0 {
		res.mac = attrs.HardwareAddr
	}
	return res, nil
}

func (r *rtnl) request(kind, flags int) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(kind, flags)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: r.sock}
	return req
}

// addrs lists the addresses of the interface with the given index.
func (r *rtnl) addrs(index int) ([]kernelAddr, error) {
	var msgs [][]byte
	var err error
	for range dumpRetries {
		req := r.request(unix.RTM_GETADDR, unix.NLM_F_DUMP)
		req.AddData(nl.NewIfAddrmsg(unix.AF_UNSPEC))
		msgs, err = req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWADDR)
		if !errors.Is(err, nl.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	var res []kernelAddr
	for _, m := range msgs {
		a, ok, err := parseAddr(m, index)
		if err != nil {
			return nil, fmt.Errorf("list addresses: %w", err)
		}
		if ok {
			res = append(res, a)
		}
	}
	return res, nil
}

// parseAddr decodes one RTM_NEWADDR payload; ok is false for another
// interface's address.
func parseAddr(m []byte, index int) (kernelAddr, bool, error) {
	if len(m) < unix.SizeofIfAddrmsg {
		return kernelAddr{}, false, errors.New("short address message")
	}
	msg := nl.DeserializeIfAddrmsg(m)
	if int(msg.Index) != index {
		return kernelAddr{}, false, nil
	}
	attrs, err := nl.ParseRouteAttr(m[msg.Len():])
	if err != nil {
		return kernelAddr{}, false, err
	}
	res := kernelAddr{Flags: uint32(msg.Flags)}
	var local, address []byte
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.IFA_LOCAL:
			local = a.Value
		case unix.IFA_ADDRESS:
			address = a.Value
		case unix.IFA_FLAGS:
			if len(a.Value) == 4 {
				res.Flags = nl.NativeEndian().Uint32(a.Value)
			}
		case ifaProto:
			if len(a.Value) >= 1 {
				res.Proto = a.Value[0]
			}
		}
	}
	if local == nil { // IPv6 without a peer reports IFA_ADDRESS only
		local = address
	}
	ip, ok := netip.AddrFromSlice(local)
	if !ok {
		return kernelAddr{}, false, fmt.Errorf("address message without a valid address (%d bytes)", len(local))
	}
	res.Prefix = netip.PrefixFrom(ip.Unmap(), int(msg.Prefixlen))
	return res, true, nil
}

// addAddr adds a as a host address marked with AddrProtocol.
func (r *rtnl) addAddr(index int, a netip.Addr) error {
	req := r.request(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	r.addrMessage(req, index, hostPrefix(a))
	req.AddData(nl.NewRtAttr(ifaProto, nl.Uint8Attr(AddrProtocol)))
	if a.Is6() {
		req.AddData(nl.NewRtAttr(unix.IFA_FLAGS, nl.Uint32Attr(unix.IFA_F_NODAD)))
		// Preferred lifetime 0 (deprecated): still accepted as a destination,
		// never chosen as the source of the host's own connections.
		cache := nl.IfaCacheInfo{IfaCacheinfo: unix.IfaCacheinfo{Prefered: 0, Valid: lifetimeInfinity}}
		req.AddData(nl.NewRtAttr(unix.IFA_CACHEINFO, cache.Serialize()))
	}
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("add address %s: %w", a, err)
	}
	return nil
}

// delAddr deletes p; an address already gone is not an error.
func (r *rtnl) delAddr(index int, p netip.Prefix) error {
	req := r.request(unix.RTM_DELADDR, unix.NLM_F_ACK)
	r.addrMessage(req, index, p)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	if err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete address %s: %w", p, err)
	}
	return nil
}

func (r *rtnl) addrMessage(req *nl.NetlinkRequest, index int, p netip.Prefix) {
	family := unix.AF_INET
	if p.Addr().Is6() {
		family = unix.AF_INET6
	}
	msg := nl.NewIfAddrmsg(family)
	msg.Index = uint32(index)
	msg.Prefixlen = uint8(p.Bits())
	msg.Scope = unix.RT_SCOPE_UNIVERSE
	req.AddData(msg)
	ip := p.Addr().AsSlice()
	req.AddData(nl.NewRtAttr(unix.IFA_LOCAL, ip))
	req.AddData(nl.NewRtAttr(unix.IFA_ADDRESS, ip))
}
