package membership

import (
	"maps"
	"net/netip"
	"slices"
	"time"
)

// Before this host first announces an address that no load-balancer host
// has held yet (a new Service's address: Observation.Fresh), it probes
// the link for it (RFC 5227 §2.1.1 ARP probes for IPv4, RFC 4862 §5.4 DAD
// probes for IPv6: internal/layer2, which teach receivers nothing) and
// holds it only when no station that is not a load-balancer host answers
// within the probe time. An answer, or any claim of the address from
// such a station (it announces the address, asks from it, or answers for
// it), means the address is in use on the link: this host does not hold
// it, reports it (InUse, the InUse hook), and probes it again once per
// ConflictProbeInterval until the other station has been silent for
// three of them. An address some host held before (a failover, a restart)
// is never probed: its holder's claims are the load balancer's own.
//
// A foreign station claiming an address this host already holds is the
// split-brain guard's (conflict.go): this host keeps the address and
// defends it (RFC 5227 §2.4 (c)); InUse reports it too.

// InUse is an address of the load balancer that a station which is no
// load-balancer host claims on the link.
type InUse struct {
	VIP netip.Addr
	// MAC is the other station's link-layer address.
	MAC string
	// Since is when this host first saw the claim.
	Since time.Time
	// Announced: this host holds the address anyway (it held it before
	// the claim, and defends it); false: it does not announce it.
	Announced bool
	// Ended: the claim stopped (in a change given to the InUse hook).
	Ended bool
}

// probeState is the probe of one fresh address this host owns.
type probeState struct {
	sent     int       // probes sent in this round
	lastSent time.Time // zero: none yet
	cleared  bool      // probed, and no foreign station answered
	mac      string    // the foreign station seen last ("" none)
	since    time.Time // when its claim was first seen
	lastSeen time.Time // when it was last seen
}

// probes decides which fresh addresses are probed, held or in use. It is
// pure: the caller passes the time and the claims.
type probes struct {
	count   int           // probes before an address is held
	spacing time.Duration // between probes, and after the last
	recheck time.Duration // between probes of an address in use
	state   map[netip.Addr]*probeState
	// reported is what the last changes call returned as in use.
	reported map[netip.Addr]InUse
}

func newProbes(count int, spacing, recheck time.Duration) *probes {
	return &probes{count: count, spacing: spacing, recheck: recheck,
		state: map[netip.Addr]*probeState{}, reported: map[netip.Addr]InUse{}}
}

// enabled reports whether addresses are probed before they are held.
func (p *probes) enabled() bool { return p != nil && p.count > 0 }

// pending reports whether an address is still being probed (not cleared:
// waiting for its probes, or in use and rechecked); without any, probe
// rounds have nothing to do until a new address is tracked.
func (p *probes) pending() bool {
	if !p.enabled() {
		return false
	}
	for _, s := range p.state {
		if !s.cleared {
			return true
		}
	}
	return false
}

// track makes the probes follow exactly want: the fresh addresses this
// host owns and can probe. New ones start unprobed (blocked).
func (p *probes) track(want []netip.Addr) {
	keep := map[netip.Addr]bool{}
	for _, v := range want {
		keep[v] = true
		if p.state[v] == nil {
			p.state[v] = &probeState{}
		}
	}
	maps.DeleteFunc(p.state, func(v netip.Addr, _ *probeState) bool { return !keep[v] })
}

// blocked reports whether vip must not be held yet: it is being probed,
// or a foreign station uses it.
func (p *probes) blocked(vip netip.Addr) bool {
	if !p.enabled() {
		return false
	}
	s := p.state[vip]
	return s != nil && !s.cleared
}

// seen records a claim of vip by a foreign station.
func (p *probes) seen(vip netip.Addr, mac string, now time.Time) {
	s := p.state[vip]
	if s == nil || s.cleared {
		return // held: the split-brain guard's (conflict.go)
	}
	if s.mac != mac || s.cleared || now.Sub(s.lastSeen) > p.quiet() {
		s.since = now
	}
	s.mac, s.lastSeen = mac, now
	s.sent = 0
}

// quiet is how long a foreign station must stay silent before an address
// it used is held.
func (p *probes) quiet() time.Duration { return 3 * p.recheck }

// due returns the addresses to probe now, and clears those whose probes
// went unanswered.
func (p *probes) due(now time.Time) (send []netip.Addr, cleared bool) {
	for _, v := range slices.SortedFunc(maps.Keys(p.state), netip.Addr.Compare) {
		s := p.state[v]
		if s.cleared {
			continue
		}
		inUse := s.mac != "" && now.Sub(s.lastSeen) <= p.quiet()
		gap := p.spacing
		if inUse {
			gap = p.recheck
		}
		// A tick early by up to a tenth of the gap counts as on time.
		if !s.lastSent.IsZero() && now.Sub(s.lastSent) < gap-gap/10 {
			continue
		}
		if !inUse && s.sent >= p.count {
			s.cleared, s.mac = true, ""
			cleared = true
			continue
		}
		send = append(send, v)
		s.sent++
		s.lastSent = now
	}
	return send, cleared
}

// inUse returns the addresses a foreign station uses that are not held.
func (p *probes) inUse(now time.Time) map[netip.Addr]InUse {
	out := map[netip.Addr]InUse{}
	for v, s := range p.state {
		if !s.cleared && s.mac != "" && now.Sub(s.lastSeen) <= p.quiet() {
			out[v] = InUse{VIP: v, MAC: s.mac, Since: s.since}
		}
	}
	return out
}

// changes compares now, every address in use (held or not), with what it
// returned last and returns the differences: started or changed (a new
// MAC, held or not), and Ended.
func (p *probes) changes(now map[netip.Addr]InUse) []InUse {
	var out []InUse
	for v, u := range now {
		if old, ok := p.reported[v]; !ok || old.MAC != u.MAC || old.Announced != u.Announced {
			out = append(out, u)
		}
	}
	for v, old := range p.reported {
		if _, ok := now[v]; !ok {
			old.Ended = true
			out = append(out, old)
		}
	}
	p.reported = now
	slices.SortFunc(out, func(a, b InUse) int { return a.VIP.Compare(b.VIP) })
	return out
}
