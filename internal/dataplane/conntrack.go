package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

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
