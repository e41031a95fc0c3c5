package agent

import (
	"context"
	"net/netip"
	"time"

	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/dataplane"
)

// Forgetter deletes what this host's conntrack remembers of flows to
// addresses; ConntrackForgetter implements it.
type Forgetter interface {
	Forget(ctx context.Context, vips []netip.Addr) error
}

// forgetGained deletes the conntrack entries of the addresses this host
// starts holding, before it adds and announces them: owned are the L2
// addresses it holds on its interface and the BGP addresses it advertises
// as their one holder (announcing.held). Such entries can only
// be stale: flows it forwarded when it last held an address, perhaps in
// TIME_WAIT for a client port that a live flow now reuses. A packet of that
// flow arriving in mid-stream would match the stale entry, fall out of its
// window, stay untranslated and be reset by this host's own stack (or, for
// a BGP address, routed back to the router). Without
// them, every flow is picked up afresh (nf_conntrack_tcp_loose) with the
// same backend and ports as on the previous holder.
//
// stateless are the addresses of passthrough forwarding only: this host
// keeps no state of their flows (they are forwarded before conntrack)
// but, when it is a Node, its own kube-proxy's, for the flows of its own
// buckets, which it served whoever held the address. Those entries are
// live: deleting them would send each such flow's next packet to
// kube-proxy as a new one, to any Pod, which resets it. They are left
// alone, as a passthrough BGP address's are.
func (a *Agent) forgetGained(ctx context.Context, owned []netip.Addr, stateless map[netip.Addr]bool) {
	if a.cfg.Conntrack == nil {
		return
	}
	var gained []netip.Addr
	held := make(map[netip.Addr]bool, len(owned))
	for _, v := range owned {
		held[v] = true
		if !a.held[v] && !stateless[v] {
			gained = append(gained, v)
		}
	}
	a.held = held
	if len(gained) == 0 {
		return
	}
	start := time.Now()
	if err := a.cfg.Conntrack.Forget(ctx, gained); err != nil {
		// Not retried: once the address is up, its entries are live.
		conntrackCleanupErrors.WithLabelValues(cleanupTakeover).Inc()
		klog.FromContext(ctx).Error(err, "Cannot delete stale conntrack entries of taken-over virtual IPs; some established connections may be reset", "addresses", gained)
		return
	}
	klog.FromContext(ctx).V(2).Info("Deleted the conntrack entries of taken-over virtual IPs", "addresses", gained, "elapsed", time.Since(start))
}

// ConntrackForgetter deletes conntrack entries over netlink, in the
// network namespace of the calling thread.
type ConntrackForgetter struct{}

var _ Forgetter = ConntrackForgetter{}

// Forget deletes every entry whose original destination is one of vips.
func (ConntrackForgetter) Forget(ctx context.Context, vips []netip.Addr) error {
	return dataplane.NetlinkConntrack{}.DeleteFlowsTo(ctx, vips)
}

// passthroughOnly are the addresses whose every service has passthrough
// forwarding (see forgetGained).
func passthroughOnly(st dataplane.State) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	proxied := map[netip.Addr]bool{}
	for _, svc := range st.Services {
		for _, v := range svc.VIPs {
			if svc.Forwarding == dataplane.Passthrough {
				out[v] = true
			} else {
				proxied[v] = true
			}
		}
	}
	for v := range proxied {
		delete(out, v)
	}
	return out
}
