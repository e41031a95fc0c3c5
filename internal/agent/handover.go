package agent

import (
	"net/netip"
	"time"

	"github.com/groundcloud/groundcloud/internal/membership"
)

// handOverWindow is how long after taking an address over from another
// host this host copies to that host what it cannot translate for the
// address (dataplane.State.HandOver): the nodes' packets in flows the
// other host forwarded that reach this host before any of the client's
// — a server's greeting right after the handshake, the SYN-ACK of a
// handshake in flight, the retransmissions of either. A minute covers
// TCP's retransmissions of a greeting many times over; what comes later
// in such a flow is dropped, as before, until the client's next packet.
const handOverWindow = time.Minute

// holderOf is an Owner that knows which other host holds an address
// (*membership.Gossip): its gossip address, which is on the client-facing
// link unless --gossip-address says otherwise.
type holderOf interface {
	Holder(vip netip.Addr) (string, netip.Addr)
}

var _ holderOf = (*membership.Gossip)(nil)

// handOvers remembers, for each address this host does not hold, the
// address of the host that does, and for each address it took over, when.
type handOvers struct {
	prev   map[netip.Addr]netip.Addr // the last other holder seen while this host did not hold it
	gained map[netip.Addr]time.Time  // when this host took it
}

// next returns dataplane.State.HandOver for the addresses this host
// holds, of vips, and remembers the holders of the others. holds says
// whether this host holds an address (and does not hand it over), holder
// which other host does (invalid: none, or unknown). An address is handed
// over from its previous holder for handOverWindow after this host took
// it, when that holder's address is of the address's family. expires is
// when the next entry ends (zero: none).
func (h *handOvers) next(now time.Time, vips []netip.Addr, holds func(netip.Addr) bool, holder func(netip.Addr) netip.Addr) (out map[netip.Addr]netip.Addr, expires time.Time) {
	prev := make(map[netip.Addr]netip.Addr, len(vips))
	gained := map[netip.Addr]time.Time{}
	for _, v := range vips {
		if !holds(v) {
			if a := holder(v); a.IsValid() && a.Is4() == v.Is4() {
				prev[v] = a
			}
			continue
		}
		at, ok := h.gained[v]
		if !ok {
			at = now
		}
		gained[v] = at
		p, ok := h.prev[v]
		if !ok || now.Sub(at) >= handOverWindow {
			continue
		}
		prev[v] = p
		if out == nil {
			out = map[netip.Addr]netip.Addr{}
		}
		out[v] = p
		if end := at.Add(handOverWindow); expires.IsZero() || end.Before(expires) {
			expires = end
		}
	}
	h.prev, h.gained = prev, gained
	return out, expires
}

// handOverFrom is dataplane.State.HandOver for this sync: the L2 addresses
// this host holds (as sync decides, before it tells membership what the
// sync found) and does not hand over itself, by their previous holder. A
// sync is requested when the first entry ends.
func (a *Agent) handOverFrom(an announcing, vips []netip.Addr) map[netip.Addr]netip.Addr {
	ho, ok := a.cfg.Owner.(holderOf)
	if !ok {
		return nil
	}
	r, _ := a.cfg.Owner.(releaser)
	onLink := func(v netip.Addr) bool { return an.l2[v] && !an.bgpAddrs[v] }
	holds := func(v netip.Addr) bool {
		return onLink(v) && (a.cfg.Owner.Owns(v) || a.adopts(v)) && (r == nil || !r.Releasing(v))
	}
	holder := func(v netip.Addr) netip.Addr {
		if !onLink(v) {
			return netip.Addr{}
		}
		_, addr := ho.Holder(v)
		return addr
	}
	out, expires := a.handOvers.next(time.Now(), vips, holds, holder)
	if !expires.IsZero() {
		d := time.Until(expires) + 10*time.Millisecond
		if a.handOverTimer == nil {
			a.handOverTimer = time.AfterFunc(d, a.runner.Request)
		} else {
			a.handOverTimer.Reset(d)
		}
	}
	return out
}
