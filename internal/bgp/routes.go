package bgp

import (
	"cmp"
	"net/netip"
	"slices"
)

// Service is what the speaker needs of one LoadBalancer that this host
// serves over BGP (its pool's host selector matches this host).
type Service struct {
	Addrs []netip.Addr
	// ECMP: every serving host advertises the addresses (passthrough);
	// otherwise only the host that holds an address (proxy).
	ECMP        bool
	Communities []string // "ASN:value"
	LocalPref   *uint32
}

// Route is one advertised host route and its attributes.
type Route struct {
	Prefix      netip.Prefix
	Communities []string // sorted, unique
	LocalPref   *uint32
	// MED, when set, is the route's MULTI_EXIT_DISC: only a stopping
	// speaker sets it, on the routes it hands over (handOverMED).
	MED *uint32
}

// Desired returns the routes this host should advertise, sorted by prefix:
// none when it does not serve; else each address of an ECMP service, and
// each address of another service that owns says it holds. Services that
// share an address advertise it once, with the union of their communities
// and the highest local preference.
func Desired(svcs []Service, serving bool, owns func(netip.Addr) bool) []Route {
	if !serving {
		return nil
	}
	byPrefix := map[netip.Prefix]*Route{}
	for _, s := range svcs {
		for _, a := range s.Addrs {
			a = a.Unmap()
			if !s.ECMP && (owns == nil || !owns(a)) {
				continue
			}
			p := netip.PrefixFrom(a, a.BitLen())
			r := byPrefix[p]
			if r == nil {
				r = &Route{Prefix: p}
				byPrefix[p] = r
			}
			r.Communities = append(r.Communities, s.Communities...)
			if s.LocalPref != nil && (r.LocalPref == nil || *s.LocalPref > *r.LocalPref) {
				v := *s.LocalPref
				r.LocalPref = &v
			}
		}
	}
	out := make([]Route, 0, len(byPrefix))
	for _, r := range byPrefix {
		slices.Sort(r.Communities)
		r.Communities = slices.Compact(r.Communities)
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Route) int { return comparePrefix(a.Prefix, b.Prefix) })
	return out
}

// Diff returns the routes to advertise (new, or with changed attributes)
// and the prefixes to withdraw, to go from have to want.
func Diff(have map[netip.Prefix]Route, want []Route) (add []Route, del []netip.Prefix) {
	keep := map[netip.Prefix]bool{}
	for _, r := range want {
		keep[r.Prefix] = true
		if h, ok := have[r.Prefix]; !ok || !sameRoute(h, r) {
			add = append(add, r)
		}
	}
	for p := range have {
		if !keep[p] {
			del = append(del, p)
		}
	}
	slices.SortFunc(del, comparePrefix)
	return add, del
}

func sameRoute(a, b Route) bool {
	return a.Prefix == b.Prefix && slices.Equal(a.Communities, b.Communities) &&
		sameValue(a.LocalPref, b.LocalPref) && sameValue(a.MED, b.MED)
}

// sameValue: both unset, or both set to the same value.
func sameValue(a, b *uint32) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// Carried returns those of routes that some established session carries:
// the session of a peer that is up (by name) and has the route's family.
func Carried(routes []Route, peers []Peer, up map[string]bool) []Route {
	families := map[string]bool{}
	for _, p := range peers {
		if up[p.Name] {
			for _, f := range p.families() {
				families[f] = true
			}
		}
	}
	var out []Route
	for _, r := range routes {
		if families[familyOf(r.Prefix.Addr())] {
			out = append(out, r)
		}
	}
	return out
}

// families are the address families p's session carries: Families, or
// the family of its address (as GoBGP does without any).
func (p Peer) families() []string {
	if len(p.Families) > 0 {
		return p.Families
	}
	return []string{familyOf(p.Address)}
}

func familyOf(a netip.Addr) string {
	if a.Unmap().Is4() {
		return "ipv4"
	}
	return "ipv6"
}
