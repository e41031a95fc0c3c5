package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Conntrack entries are found by filters the kernel applies (see the
// package doc, "Conntrack clean-up"): ctnetlink's CTA_FILTER, which
// selects entries of a dump by fields of their original and reply tuples
// (except IPv6 addresses, which the kernel compares the wrong way round).

// ctnetlink attributes and flags that vishvananda/netlink/nl does not name
// (include/uapi/linux/netfilter/nfnetlink_conntrack.h).
const (
	ctaFilter           = 25 // CTA_FILTER
	ctaFilterOrigFlags  = 1  // CTA_FILTER_ORIG_FLAGS
	ctaFilterReplyFlags = 2  // CTA_FILTER_REPLY_FLAGS

	ctFilterIPSrc   = 1 << 0 // CTA_FILTER_F_CTA_IP_SRC
	ctFilterIPDst   = 1 << 1 // CTA_FILTER_F_CTA_IP_DST
	ctFilterProto   = 1 << 3 // CTA_FILTER_F_CTA_PROTO_NUM
	ctFilterSrcPort = 1 << 4 // CTA_FILTER_F_CTA_PROTO_SRC_PORT
	ctFilterDstPort = 1 << 5 // CTA_FILTER_F_CTA_PROTO_DST_PORT

	nlaTypeMask = 0x3fff // NLA_TYPE_MASK: without NLA_F_NESTED and NLA_F_NET_BYTEORDER

	nfnlSubsysCTNetlink = 1 // NFNL_SUBSYS_CTNETLINK
)

// ctTuple is one direction of a conntrack filter: a field left zero
// matches anything. Ports need Proto.
type ctTuple struct {
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16
}

// ctFilter selects conntrack entries by their original tuple (client to
// VIP) and reply tuple (backend to this host).
type ctFilter struct {
	Orig, Reply ctTuple
}

// family is the address family of the filter's addresses.
func (f ctFilter) family() uint8 {
	for _, a := range []netip.Addr{f.Orig.Src, f.Orig.Dst, f.Reply.Src, f.Reply.Dst} {
		if a.IsValid() && a.Is6() {
			return unix.AF_INET6
		}
	}
	return unix.AF_INET
}

// flags are the CTA_FILTER flags of the fields t sets.
func (t ctTuple) flags() uint32 {
	var f uint32
	if t.Src.IsValid() {
		f |= ctFilterIPSrc
	}
	if t.Dst.IsValid() {
		f |= ctFilterIPDst
	}
	if t.Proto != 0 {
		f |= ctFilterProto
		if t.SrcPort != 0 {
			f |= ctFilterSrcPort
		}
		if t.DstPort != 0 {
			f |= ctFilterDstPort
		}
	}
	return f
}

// attr encodes the fields t sets as a CTA_TUPLE_ORIG or CTA_TUPLE_REPLY.
func (t ctTuple) attr(typ int, v6 bool) *nl.RtAttr {
	src, dst := nl.CTA_IP_V4_SRC, nl.CTA_IP_V4_DST
	if v6 {
		src, dst = nl.CTA_IP_V6_SRC, nl.CTA_IP_V6_DST
	}
	tuple := nl.NewRtAttr(unix.NLA_F_NESTED|typ, nil)
	ip := nl.NewRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil)
	if t.Src.IsValid() {
		ip.AddRtAttr(src, t.Src.AsSlice())
	}
	if t.Dst.IsValid() {
		ip.AddRtAttr(dst, t.Dst.AsSlice())
	}
	tuple.AddChild(ip)
	if t.Proto != 0 {
		proto := nl.NewRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_PROTO, nil)
		proto.AddRtAttr(nl.CTA_PROTO_NUM, []byte{t.Proto})
		if t.SrcPort != 0 {
			proto.AddRtAttr(nl.CTA_PROTO_SRC_PORT, nl.BEUint16Attr(t.SrcPort))
		}
		if t.DstPort != 0 {
			proto.AddRtAttr(nl.CTA_PROTO_DST_PORT, nl.BEUint16Attr(t.DstPort))
		}
		tuple.AddChild(proto)
	}
	return tuple
}

// inKernel is the part of f the kernel can apply: f without its IPv6
// addresses. Linux compares an IPv6 address of a CTA_FILTER the wrong way
// round (ctnetlink_filter_match_tuple skips an entry when
// !ipv6_addr_cmp(filter, entry), i.e. when the addresses are equal; seen
// up to 6.18): a filter on an IPv6 address selects every other address.
func (f ctFilter) inKernel() ctFilter {
	if f.family() == unix.AF_INET6 {
		f.Orig.Src, f.Orig.Dst, f.Reply.Src, f.Reply.Dst = netip.Addr{}, netip.Addr{}, netip.Addr{}, netip.Addr{}
	}
	return f
}

// attrs encodes f as the attributes of a ctnetlink request for family:
// the tuples it sets and the CTA_FILTER that names their fields (none when
// it sets no field).
func (f ctFilter) attrs(family uint8) []*nl.RtAttr {
	v6 := family == unix.AF_INET6
	var out []*nl.RtAttr
	filter := nl.NewRtAttr(unix.NLA_F_NESTED|ctaFilter, nil)
	if flags := f.Orig.flags(); flags != 0 {
		out = append(out, f.Orig.attr(nl.CTA_TUPLE_ORIG, v6))
		filter.AddRtAttr(ctaFilterOrigFlags, nl.Uint32Attr(flags))
	}
	if flags := f.Reply.flags(); flags != 0 {
		out = append(out, f.Reply.attr(nl.CTA_TUPLE_REPLY, v6))
		filter.AddRtAttr(ctaFilterReplyFlags, nl.Uint32Attr(flags))
	}
	if len(out) == 0 {
		return nil
	}
	return append(out, filter)
}

// matches reports whether the tuple of an entry, as parseEntry read it,
// has every field t sets.
func (t ctTuple) matches(e ctTuple) bool {
	return (!t.Src.IsValid() || t.Src == e.Src) && (!t.Dst.IsValid() || t.Dst == e.Dst) &&
		(t.Proto == 0 || t.Proto == e.Proto &&
			(t.SrcPort == 0 || t.SrcPort == e.SrcPort) && (t.DstPort == 0 || t.DstPort == e.DstPort))
}

func (f ctFilter) matches(orig, reply ctTuple) bool {
	return f.Orig.matches(orig) && f.Reply.matches(reply)
}

// parseEntry reads the original and reply tuples of one entry of a
// conntrack dump (the nfgenmsg header, then attributes).
func parseEntry(msg []byte) (orig, reply ctTuple, err error) {
	orig, reply, _, err = parseEntryState(msg)
	return orig, reply, err
}

// parseEntryState is parseEntry with the TCP state of the entry
// (CTA_PROTOINFO_TCP_STATE; 0, TCP_CONNTRACK_NONE, for other protocols).
func parseEntryState(msg []byte) (orig, reply ctTuple, tcpState uint8, err error) {
	if len(msg) < nl.SizeofNfgenmsg {
		return orig, reply, 0, errors.New("short conntrack message")
	}
	err = walkAttrs(msg[nl.SizeofNfgenmsg:], func(typ uint16, v []byte) error {
		switch typ {
		case nl.CTA_TUPLE_ORIG:
			return parseTuple(v, &orig)
		case nl.CTA_TUPLE_REPLY:
			return parseTuple(v, &reply)
		case nl.CTA_PROTOINFO:
			return walkAttrs(v, func(typ uint16, v []byte) error {
				if typ != nl.CTA_PROTOINFO_TCP {
					return nil
				}
				return walkAttrs(v, func(typ uint16, v []byte) error {
					if typ == nl.CTA_PROTOINFO_TCP_STATE && len(v) >= 1 {
						tcpState = v[0]
					}
					return nil
				})
			})
		}
		return nil
	})
	return orig, reply, tcpState, err
}

func parseTuple(b []byte, t *ctTuple) error {
	return walkAttrs(b, func(typ uint16, v []byte) error {
		switch typ {
		case nl.CTA_TUPLE_IP:
			return walkAttrs(v, func(typ uint16, v []byte) error {
				a, ok := netip.AddrFromSlice(v)
				if !ok {
					return fmt.Errorf("conntrack address of %d bytes", len(v))
				}
				switch typ {
				case nl.CTA_IP_V4_SRC, nl.CTA_IP_V6_SRC:
					t.Src = a
				case nl.CTA_IP_V4_DST, nl.CTA_IP_V6_DST:
					t.Dst = a
				}
				return nil
			})
		case nl.CTA_TUPLE_PROTO:
			return walkAttrs(v, func(typ uint16, v []byte) error {
				switch {
				case typ == nl.CTA_PROTO_NUM && len(v) >= 1:
					t.Proto = v[0]
				case typ == nl.CTA_PROTO_SRC_PORT && len(v) >= 2:
					t.SrcPort = binary.BigEndian.Uint16(v)
				case typ == nl.CTA_PROTO_DST_PORT && len(v) >= 2:
					t.DstPort = binary.BigEndian.Uint16(v)
				}
				return nil
			})
		}
		return nil
	})
}

// walkAttrs calls fn with the type (without flags) and value of each
// netlink attribute in b.
func walkAttrs(b []byte, fn func(typ uint16, v []byte) error) error {
	for len(b) >= unix.SizeofNlAttr {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask
		if l < unix.SizeofNlAttr || l > len(b) {
			return fmt.Errorf("malformed netlink attribute (length %d of %d)", l, len(b))
		}
		if err := fn(typ, b[unix.SizeofNlAttr:l]); err != nil {
			return err
		}
		b = b[min(len(b), (l+unix.NLA_ALIGNTO-1) & ^(unix.NLA_ALIGNTO-1)):]
	}
	return nil
}

// ctConn is a ctnetlink socket in the network namespace of the thread that
// opened it.
type ctConn struct {
	sockets map[int]*nl.SocketHandle
}

// ctTimeout bounds each answer of the kernel.
var ctTimeout = unix.Timeval{Sec: 30}

func dialConntrack() (*ctConn, error) {
	s, err := nl.GetNetlinkSocketAt(netns.None(), netns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("open ctnetlink socket: %w", err)
	}
	if err := errors.Join(s.SetSendTimeout(&ctTimeout), s.SetReceiveTimeout(&ctTimeout)); err != nil {
		s.Close()
		return nil, err
	}
	return &ctConn{sockets: map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: {Socket: s}}}, nil
}

func (c *ctConn) close() { c.sockets[unix.NETLINK_NETFILTER].Close() }

func (c *ctConn) request(msg, flags int, family uint8) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(nfnlSubsysCTNetlink<<8|msg, flags)
	req.Sockets = c.sockets
	req.AddData(&nl.Nfgenmsg{NfgenFamily: family, Version: nl.NFNETLINK_V0})
	return req
}

// maxWalks bounds the walks of the kernel's table one deletion makes: each
// filtered dump walks all of it (about 0.3 µs an entry here), so beyond
// that many filters one dump with what they have in common is cheaper,
// though it sends more entries to match here.
const maxWalks = 8

// walks are the filters to dump with to find the entries any of filters
// (all of one family) matches: each one's part the kernel can apply,
// without duplicates, or, when there are more than maxWalks of those,
// their common part alone.
func walks(filters []ctFilter) []ctFilter {
	var out []ctFilter
	for _, f := range filters {
		if k := f.inKernel(); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) <= maxWalks {
		return out
	}
	common := out[0]
	for _, f := range out[1:] {
		common = ctFilter{Orig: common.Orig.common(f.Orig), Reply: common.Reply.common(f.Reply)}
	}
	return []ctFilter{common}
}

// common keeps the fields t and u agree on.
func (t ctTuple) common(u ctTuple) ctTuple {
	var c ctTuple
	if t.Src == u.Src {
		c.Src = t.Src
	}
	if t.Dst == u.Dst {
		c.Dst = t.Dst
	}
	if t.Proto == u.Proto {
		c.Proto = t.Proto
		if t.SrcPort == u.SrcPort {
			c.SrcPort = t.SrcPort
		}
		if t.DstPort == u.DstPort {
			c.DstPort = t.DstPort
		}
	}
	return c
}

// filterSet matches entries against many filters, indexed by original
// destination.
type filterSet struct {
	byDst map[netip.Addr][]ctFilter
	other []ctFilter
}

func newFilterSet(filters []ctFilter) filterSet {
	s := filterSet{byDst: map[netip.Addr][]ctFilter{}}
	for _, f := range filters {
		if f.Orig.Dst.IsValid() {
			s.byDst[f.Orig.Dst] = append(s.byDst[f.Orig.Dst], f)
		} else {
			s.other = append(s.other, f)
		}
	}
	return s
}

func (s filterSet) matches(orig, reply ctTuple) bool {
	match := func(f ctFilter) bool { return f.matches(orig, reply) }
	return slices.ContainsFunc(s.byDst[orig.Dst], match) || slices.ContainsFunc(s.other, match)
}

// deleteMatching deletes the entries of family that any of filters
// matches and returns how many entries the kernel sent for it. It dumps
// the table with each of walks(filters): the kernel (Linux 5.8 and later)
// applies the filter and sends only the candidates, which are matched
// here (a kernel that ignores the filter sends all) and deleted one by
// one.
//
// Not a delete request carrying the filter, which Linux 6.11 and later
// accept and which sends nothing: that walk holds the global conntrack
// mutex (which every network namespace's teardown takes too) and yields
// the CPU between hash buckets, so on a busy host it took from 0.3 to 14 s
// with 250,000 entries where a filtered dump took 0.08 to 0.34 s (see the
// package doc).
func (c *ctConn) deleteMatching(family uint8, filters []ctFilter) (read int, err error) {
	set := newFilterSet(filters)
	var errs []error
	for _, w := range walks(filters) {
		n, err := c.dumpAndDelete(family, w, set)
		read += n
		errs = append(errs, err)
	}
	return read, errors.Join(errs...)
}

// dumpAndDelete dumps the entries of family that the kernel finds with
// filter and deletes those set matches.
func (c *ctConn) dumpAndDelete(family uint8, filter ctFilter, set filterSet) (int, error) {
	req := c.request(nl.IPCTNL_MSG_CT_GET, unix.NLM_F_DUMP, family)
	for _, a := range filter.attrs(family) {
		req.AddData(a)
	}
	var read int
	var matched [][]byte
	var parseErr error
	dumpErr := req.ExecuteIter(unix.NETLINK_NETFILTER, 0, func(msg []byte) bool {
		read++
		orig, reply, err := parseEntry(msg)
		switch {
		case err != nil:
			parseErr = err
		case set.matches(orig, reply):
			matched = append(matched, msg)
		}
		return true
	})
	if dumpErr != nil && !errors.Is(dumpErr, nl.ErrDumpInterrupted) {
		return read, fmt.Errorf("dump conntrack table: %w", dumpErr)
	}
	errs := []error{dumpErr, parseErr}
	for _, m := range matched {
		del := c.request(nl.IPCTNL_MSG_CT_DELETE, unix.NLM_F_ACK, family)
		del.AddRawData(m[nl.SizeofNfgenmsg:]) // the entry's own tuples (and id)
		if _, err := del.Execute(unix.NETLINK_NETFILTER, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete conntrack entry: %w", err))
		}
	}
	return read, errors.Join(errs...)
}

// String is like conntrack's options, for errors and logs.
func (f ctFilter) String() string {
	var b strings.Builder
	for _, d := range []struct {
		name string
		t    ctTuple
	}{{"orig", f.Orig}, {"reply", f.Reply}} {
		if d.t.Src.IsValid() {
			fmt.Fprintf(&b, " --%s-src %s", d.name, d.t.Src)
		}
		if d.t.Dst.IsValid() {
			fmt.Fprintf(&b, " --%s-dst %s", d.name, d.t.Dst)
		}
		if d.t.Proto != 0 {
			fmt.Fprintf(&b, " --%s-proto %d", d.name, d.t.Proto)
			if d.t.SrcPort != 0 {
				fmt.Fprintf(&b, " --%s-port-src %d", d.name, d.t.SrcPort)
			}
			if d.t.DstPort != 0 {
				fmt.Fprintf(&b, " --%s-port-dst %d", d.name, d.t.DstPort)
			}
		}
	}
	return strings.TrimSpace(b.String())
}
