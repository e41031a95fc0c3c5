package dataplane

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
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
// binary, in the network namespace of the calling thread. The kernel picks
// the entries to delete (see the package doc): no table is copied into
// user space.
type NetlinkConntrack struct{}

var _ Conntrack = NetlinkConntrack{}

// DeleteUDPFlows implements Conntrack with one request per flow.
func (c NetlinkConntrack) DeleteUDPFlows(ctx context.Context, flows []Flow) error {
	filters := make([]ctFilter, 0, len(flows))
	for _, f := range flows {
		filters = append(filters, ctFilter{
			Orig:  ctTuple{Dst: f.VIP, Proto: unix.IPPROTO_UDP, DstPort: f.Port},
			Reply: ctTuple{Src: f.Backend, Proto: unix.IPPROTO_UDP, SrcPort: f.NodePort},
		})
	}
	return c.delete(ctx, filters)
}

// DeleteFlowsTo deletes every entry whose original destination is one of
// addrs, whatever its protocol.
func (c NetlinkConntrack) DeleteFlowsTo(ctx context.Context, addrs []netip.Addr) error {
	filters := make([]ctFilter, 0, len(addrs))
	for _, a := range addrs {
		filters = append(filters, ctFilter{Orig: ctTuple{Dst: a.Unmap()}})
	}
	return c.delete(ctx, filters)
}

// CountedMark is the bit of the conntrack mark that the data plane sets
// on each connection it forwards in proxy mode while it counts new
// connections per node (Counting.Nodes), and only then: CountConnections
// asks the kernel for the entries with it, one dump per family, so that a
// scrape copies the load balancer's own connections and nothing else of
// the table. The other bits are left as they are.
const CountedMark = 0x00100000

// ctaMarkMask is CTA_MARK_MASK, which vishvananda/netlink/nl does not name.
const ctaMarkMask = 21

// CountConnections counts, for each counter of kind CountConnections
// among counters (a proxy frontend's flows to one node), the conntrack
// entries of its current connections: TCP entries in ESTABLISHED, and
// every UDP entry (a flow conntrack still tracks). The result is keyed by
// counter name. The kernel sends only the entries marked CountedMark, in
// the network namespace of the calling thread.
func (NetlinkConntrack) CountConnections(ctx context.Context, counters []TrafficCounter) (map[string]int, error) {
	type key struct {
		vip, node      netip.Addr
		proto          uint8
		port, nodePort uint16
	}
	byKey := map[key]string{}
	families := map[uint8]bool{}
	for _, c := range counters {
		if c.Kind != CountConnections {
			continue
		}
		proto := uint8(unix.IPPROTO_TCP)
		if c.Protocol == UDP {
			proto = unix.IPPROTO_UDP
		}
		f := ctFilter{
			Orig:  ctTuple{Dst: c.VIP.Unmap(), Proto: proto, DstPort: c.Port},
			Reply: ctTuple{Src: c.NodeAddr.Unmap(), Proto: proto, SrcPort: c.NodePort},
		}
		byKey[key{f.Orig.Dst, f.Reply.Src, proto, c.Port, c.NodePort}] = c.Name
		families[f.family()] = true
	}
	out := map[string]int{}
	if len(byKey) == 0 {
		return out, nil
	}
	conn, err := dialConntrack()
	if err != nil {
		return nil, err
	}
	defer conn.close()
	var errs []error
	mark := nl.Uint32Attr(CountedMark)
	binary.BigEndian.PutUint32(mark, CountedMark) // network byte order
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if !families[fam] {
			continue
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		req := conn.request(nl.IPCTNL_MSG_CT_GET, unix.NLM_F_DUMP, fam)
		req.AddData(nl.NewRtAttr(nl.CTA_MARK, mark))
		req.AddData(nl.NewRtAttr(ctaMarkMask, mark))
		err := req.ExecuteIter(unix.NETLINK_NETFILTER, 0, func(msg []byte) bool {
			orig, reply, state, err := parseEntryState(msg)
			if err != nil {
				return true
			}
			name, ok := byKey[key{orig.Dst, reply.Src, orig.Proto, orig.DstPort, reply.SrcPort}]
			if ok && (orig.Proto == unix.IPPROTO_UDP || state == tcpConntrackEstablished) {
				out[name]++
			}
			return true
		})
		if err != nil && !errors.Is(err, nl.ErrDumpInterrupted) {
			errs = append(errs, fmt.Errorf("dump conntrack table: %w", err))
		}
	}
	return out, errors.Join(errs...)
}

// tcpConntrackEstablished is TCP_CONNTRACK_ESTABLISHED.
const tcpConntrackEstablished = 3

// delete deletes the entries any of filters matches, per family.
func (NetlinkConntrack) delete(ctx context.Context, filters []ctFilter) error {
	if len(filters) == 0 {
		return nil
	}
	conn, err := dialConntrack()
	if err != nil {
		return err
	}
	defer conn.close()
	byFamily := map[uint8][]ctFilter{}
	for _, f := range filters {
		byFamily[f.family()] = append(byFamily[f.family()], f)
	}
	var errs []error
	read := 0
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if len(byFamily[family]) == 0 {
			continue
		}
		n, err := conn.deleteMatching(family, byFamily[family])
		read += n
		if err != nil {
			errs = append(errs, fmt.Errorf("delete conntrack entries (%d filters, first %s): %w", len(byFamily[family]), byFamily[family][0], err))
		}
	}
	klog.FromContext(ctx).V(4).Info("Deleted conntrack entries", "filters", len(filters), "entriesRead", read, "failed", len(errs) > 0)
	return errors.Join(errs...)
}
