package dataplane

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// StaleUDPFlows returns the UDP flow targets that applied had and desired
// has not, sorted. Their conntrack entries must go: a UDP "connection" has no
// end, so without that its packets would keep going to a backend that is
// unhealthy or gone. (TCP entries are kept: established connections drain.)
func StaleUDPFlows(applied, desired *Table) []Flow {
	var out []Flow
	for f := range applied.UDPFlows {
		if !desired.UDPFlows[f] {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, compareFlows)
	return out
}

func (f Flow) family() knftables.Family {
	if f.VIP.Is6() {
		return knftables.IPv6Family
	}
	return knftables.IPv4Family
}

func compareFlows(a, b Flow) int {
	if c := a.VIP.Compare(b.VIP); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	if c := a.Backend.Compare(b.Backend); c != 0 {
		return c
	}
	return int(a.NodePort) - int(b.NodePort)
}

// Conntrack deletes conntrack entries of forwarded flows.
type Conntrack interface {
	// DeleteUDPFlows deletes the entries of UDP flows to each flow's VIP and
	// port that were forwarded to its backend and node port — what
	// `conntrack -D -p udp --orig-dst VIP --dport Port --reply-src Backend
	// --reply-port-src NodePort` deletes.
	DeleteUDPFlows(ctx context.Context, flows []Flow) error
}

// NetlinkConntrack implements Conntrack over netlink, without the conntrack
// binary.
type NetlinkConntrack struct {
	// Handle selects the network namespace; nil means the one of the calling
	// thread.
	Handle *netlink.Handle
}

var _ Conntrack = NetlinkConntrack{}

// DeleteUDPFlows implements Conntrack with one table dump per family.
func (c NetlinkConntrack) DeleteUDPFlows(_ context.Context, flows []Flow) error {
	var v4, v6 []netlink.CustomConntrackFilter
	for _, f := range flows {
		if f.VIP.Is4() {
			v4 = append(v4, udpFlowFilter(f))
		} else {
			v6 = append(v6, udpFlowFilter(f))
		}
	}
	return c.deleteMatching(v4, v6)
}

// DeleteFlowsTo deletes every entry whose original destination is one of
// addrs, whatever its protocol.
func (c NetlinkConntrack) DeleteFlowsTo(_ context.Context, addrs []netip.Addr) error {
	var v4, v6 []netlink.CustomConntrackFilter
	for _, a := range addrs {
		if a.Unmap().Is4() {
			v4 = append(v4, toAddress(a.Unmap()))
		} else {
			v6 = append(v6, toAddress(a))
		}
	}
	return c.deleteMatching(v4, v6)
}

// deleteMatching deletes the entries any of v4 (IPv4 table) or v6 (IPv6)
// match, with one table dump per family that has filters.
func (c NetlinkConntrack) deleteMatching(v4, v6 []netlink.CustomConntrackFilter) error {
	if len(v4) == 0 && len(v6) == 0 {
		return nil
	}
	h := c.Handle
	if h == nil {
		var err error
		if h, err = netlink.NewHandle(unix.NETLINK_NETFILTER); err != nil {
			return fmt.Errorf("open netlink: %w", err)
		}
		defer h.Close()
	}
	for _, fam := range []struct {
		family  netlink.InetFamily
		filters []netlink.CustomConntrackFilter
	}{{unix.AF_INET, v4}, {unix.AF_INET6, v6}} {
		if len(fam.filters) == 0 {
			continue
		}
		if _, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, fam.family, fam.filters...); err != nil {
			return fmt.Errorf("delete conntrack entries: %w", err)
		}
	}
	return nil
}

// toAddress matches the entries of flows sent to one address.
type toAddress netip.Addr

func (t toAddress) MatchConntrackFlow(ct *netlink.ConntrackFlow) bool {
	a, ok := netip.AddrFromSlice(ct.Forward.DstIP)
	return ok && a.Unmap() == netip.Addr(t)
}

// udpFlowFilter matches the conntrack entries of one Flow.
type udpFlowFilter Flow

func (f udpFlowFilter) MatchConntrackFlow(ct *netlink.ConntrackFlow) bool {
	return ct.Forward.Protocol == unix.IPPROTO_UDP &&
		ct.Forward.DstPort == f.Port && sameIP(ct.Forward.DstIP, f.VIP.AsSlice()) &&
		ct.Reverse.SrcPort == f.NodePort && sameIP(ct.Reverse.SrcIP, f.Backend.AsSlice())
}

func sameIP(a net.IP, b []byte) bool { return a.Equal(net.IP(b)) }
