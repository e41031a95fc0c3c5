package membership

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Proxy forwarding over BGP: the owner of an address of such a pool
// (Observation.Advertised) advertises a route for it to its BGP peers
// instead of holding it on the link. A host that cannot advertise it (no
// BGP peer selects the host, its speaker failed, its sessions carrying the
// address's family are all down) would black-hole its share. So each host
// publishes in its gossip metadata the address families it may advertise,
// and the owner of such an address is elected among the Ready members that
// publish its family.
//
// A host's peers are those selected for it, so any established session of
// a family carries the routes of that family: a family may be advertised
// while one of its sessions is established (Observation.Sessions). It is
// lost at once when the last one goes down; when a session comes back the
// family goes through the rules of a host's State (readiness.go), with the
// same hold-down: a flapping session moves no address, and a host takes
// its share at once when no other member advertises the family. A member
// that publishes no families (an agent from before) may advertise every
// one; a host known only from the link, none (presence.go).

// families are the address families of BGP sessions, named as in the
// cloud-config.
var families = []string{"ipv4", "ipv6"}

// familyOf is the family of the sessions that carry a route to vip.
func familyOf(vip netip.Addr) string {
	if vip.Unmap().Is4() {
		return "ipv4"
	}
	return "ipv6"
}

// candidateFamilies are the families each candidate may advertise; nil:
// every family.
type candidateFamilies map[string][]string

// advertising returns the candidates among cands that may advertise vip.
func (f candidateFamilies) advertising(cands []string, vip netip.Addr) []string {
	var out []string
	for _, c := range cands {
		if f.mayAdvertise(c, vip) {
			out = append(out, c)
		}
	}
	return out
}

// mayAdvertise reports whether candidate c may advertise vip.
func (f candidateFamilies) mayAdvertise(c string, vip netip.Addr) bool {
	fs, ok := f[c]
	return !ok || fs == nil || slices.Contains(fs, familyOf(vip))
}

func (f candidateFamilies) equal(o candidateFamilies) bool {
	return maps.EqualFunc(f, o, func(a, b []string) bool { return (a == nil) == (b == nil) && slices.Equal(a, b) })
}

// bgpReadiness is, for each family, whether this host may own addresses
// advertised over BGP: a readiness whose health is an established session
// of the family.
type bgpReadiness map[string]*readiness

func newBGPReadiness(holdDown time.Duration) bgpReadiness {
	b := bgpReadiness{}
	for _, f := range families {
		b[f] = newReadiness(holdDown)
	}
	return b
}

// update moves each family's state at now, given this host's established
// sessions and the other members (those that may advertise a family serve
// it).
func (b bgpReadiness) update(now time.Time, joined bool, sessions []string, peers []Member) {
	for f, r := range b {
		h := Health{Joined: joined}
		if !slices.Contains(sessions, f) {
			h.Problem = "no established BGP session of family " + f
		}
		p := Peers{Alive: len(peers) > 0}
		for _, m := range peers {
			p.Serving = p.Serving || (m.State == StateReady || m.State == StateDraining) && (m.BGP == nil || slices.Contains(m.BGP, f))
		}
		r.update(now, h, p)
	}
}

// families are the families this host may advertise, sorted; never nil.
func (b bgpReadiness) families() []string {
	out := []string{}
	for _, f := range families {
		if b[f].state == StateReady {
			out = append(out, f)
		}
	}
	return out
}

// wake is the earliest time update must run again although nothing else
// changed (zero: never).
func (b bgpReadiness) wake() time.Time {
	var w time.Time
	for _, r := range b {
		if t := r.wake(); !t.IsZero() && (w.IsZero() || t.Before(w)) {
			w = t
		}
	}
	return w
}

// encodeFamilies writes families for the gossip metadata, where room is
// short (groups fill most of it): "4" for ipv4, "6" for ipv6, "46" both,
// "" none.
func encodeFamilies(fs []string) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(strings.TrimPrefix(f, "ipv"))
	}
	return b.String()
}

// decodeFamilies reads encodeFamilies; it skips what it does not know (a
// family of a newer agent). Never nil.
func decodeFamilies(s string) []string {
	out := []string{}
	for _, f := range families {
		if strings.Contains(s, strings.TrimPrefix(f, "ipv")) {
			out = append(out, f)
		}
	}
	return out
}
