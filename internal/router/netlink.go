package router

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// DefaultProtocol is the routing protocol number (rtm_protocol) that marks
// the routes groundcloud-router makes: 0x67, 'g', as the address protocol
// of the agent's virtual IPs. `ip route show proto 103` lists them.
const DefaultProtocol = 0x67

// NetlinkTable is the kernel's main routing table, as far as routes of one
// protocol go: it lists, adds, replaces and deletes only routes marked
// with that protocol.
type NetlinkTable struct {
	handle   *netlink.Handle
	protocol netlink.RouteProtocol
}

// NewNetlinkTable returns a table over a netlink handle of the namespace
// to program (netlink.NewHandle() for the router's own).
func NewNetlinkTable(h *netlink.Handle, protocol int) *NetlinkTable {
	return &NetlinkTable{handle: h, protocol: netlink.RouteProtocol(protocol)}
}

// List returns the routes of our protocol in the main table, IPv4 and IPv6.
func (t *NetlinkTable) List() ([]Installed, error) {
	var out []Installed
	filter := &netlink.Route{Protocol: t.protocol, Table: unix.RT_TABLE_MAIN}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := t.handle.RouteListFiltered(family, filter, netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, fmt.Errorf("list routes of protocol %d: %w", t.protocol, err)
		}
		for _, r := range routes {
			out = append(out, installed(r, family))
		}
	}
	return out, nil
}

func installed(r netlink.Route, family int) Installed {
	in := Installed{Priority: r.Priority}
	if r.Dst != nil {
		ip, _ := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		in.Dst = netip.PrefixFrom(ip.Unmap(), ones)
	} else if family == netlink.FAMILY_V4 {
		in.Dst = netip.MustParsePrefix("0.0.0.0/0")
	} else {
		in.Dst = netip.MustParsePrefix("::/0")
	}
	if ip, ok := netip.AddrFromSlice(r.Gw); ok && len(r.MultiPath) == 0 {
		in.Via = ip.Unmap()
	}
	return in
}

// ErrForeignRoute wraps an add refused because a route to the destination
// that is not ours (another protocol, same metric) exists.
var ErrForeignRoute = errors.New("a route to this destination that groundcloud-router did not make exists")

// Apply carries out p and returns the error of each destination that
// failed (nil when all went through). Deletes go first, so that a
// destination moving between routes is free when it is added.
func (t *NetlinkTable) Apply(p Plan) map[netip.Prefix]error {
	errs := map[netip.Prefix]error{}
	for _, d := range p.Delete {
		if err := t.handle.RouteDel(t.route(d.Dst, d.Via, d.Priority)); err != nil && !errors.Is(err, unix.ESRCH) {
			errs[d.Dst] = fmt.Errorf("delete route %s via %s: %w", d.Dst, d.Via, err)
		}
	}
	for _, c := range p.Replace {
		// The installed route's metric makes the replace hit our route,
		// not another protocol's at the default metric.
		if err := t.handle.RouteReplace(t.route(c.New.Dst, c.New.Via, c.Old.Priority)); err != nil {
			errs[c.New.Dst] = fmt.Errorf("replace route %s via %s: %w", c.New.Dst, c.New.Via, err)
		}
	}
	for _, a := range p.Add {
		// RouteAdd is exclusive (NLM_F_EXCL): it never takes over a route
		// of another protocol, nor merges into one as an IPv6 multipath.
		err := t.handle.RouteAdd(t.route(a.Dst, a.Via, 0))
		switch {
		case errors.Is(err, unix.EEXIST):
			errs[a.Dst] = fmt.Errorf("add route %s via %s: %w", a.Dst, a.Via, ErrForeignRoute)
		case err != nil:
			errs[a.Dst] = fmt.Errorf("add route %s via %s: %w", a.Dst, a.Via, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func (t *NetlinkTable) route(dst netip.Prefix, via netip.Addr, priority int) *netlink.Route {
	r := &netlink.Route{
		Dst:      &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())},
		Protocol: t.protocol,
		Table:    unix.RT_TABLE_MAIN,
		Priority: priority,
	}
	if via.IsValid() {
		r.Gw = via.AsSlice()
	}
	return r
}
