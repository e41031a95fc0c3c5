package agent

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Forgetter deletes what this host's conntrack remembers of flows to
// addresses; ConntrackForgetter implements it.
type Forgetter interface {
	Forget(ctx context.Context, vips []netip.Addr) error
}

// forgetGained deletes the conntrack entries of the addresses this host
// starts holding, before it adds and announces them. Such entries can only
// be stale: flows it forwarded when it last held an address, perhaps in
// TIME_WAIT for a client port that a live flow now reuses. A packet of that
// flow arriving in mid-stream would match the stale entry, fall out of its
// window, stay untranslated and be reset by this host's own stack. Without
// them, every flow is picked up afresh (nf_conntrack_tcp_loose) with the
// same backend and ports as on the previous holder.
func (a *Agent) forgetGained(ctx context.Context, owned []netip.Addr) {
	if a.cfg.Conntrack == nil {
		return
	}
	var gained []netip.Addr
	held := make(map[netip.Addr]bool, len(owned))
	for _, v := range owned {
		held[v] = true
		if !a.held[v] {
			gained = append(gained, v)
		}
	}
	a.held = held
	if len(gained) == 0 {
		return
	}
	if err := a.cfg.Conntrack.Forget(ctx, gained); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot delete stale conntrack entries of taken-over virtual IPs; some established connections may be reset", "addresses", gained)
	}
}

// ConntrackForgetter deletes conntrack entries over netlink, in the
// network namespace of the calling thread.
type ConntrackForgetter struct{}

var _ Forgetter = ConntrackForgetter{}

// Forget deletes every entry whose original destination is one of vips.
func (ConntrackForgetter) Forget(_ context.Context, vips []netip.Addr) error {
	h, err := netlink.NewHandle(unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("open netlink: %w", err)
	}
	defer h.Close()
	var v4, v6 []netlink.CustomConntrackFilter
	for _, v := range vips {
		if v.Unmap().Is4() {
			v4 = append(v4, toAddress(v.Unmap()))
		} else {
			v6 = append(v6, toAddress(v))
		}
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
