package agent

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/bgp"
)

// bgpSessions are this host's established BGP sessions, as its speaker
// reports them (bgp.Config.SessionChanged). The owner of an address of a
// proxy BGP pool advertises it, so membership lets a host own one only
// while it has an established session of the address's family
// (membership.Observation.Sessions); its peers are those selected for it,
// so every one of them carries the routes of its families.
type bgpSessions struct {
	mu sync.Mutex
	up map[string][]string // the families of each established session, by peer name
}

// set records whether p's session is established.
func (s *bgpSessions) set(p bgp.Peer, up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up == nil {
		s.up = map[string][]string{}
	}
	if up {
		s.up[p.Name] = slices.Clone(p.Families)
	} else {
		delete(s.up, p.Name)
	}
}

// reset forgets every session: the speaker stopped.
func (s *bgpSessions) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up = nil
}

// families are the families of the established sessions, sorted.
func (s *bgpSessions) families() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, fs := range s.up {
		out = append(out, fs...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// bgpSessionChanged records that p's session became established (up) or
// stopped being so, and syncs: membership tells the others at once whether
// this host may own the addresses of proxy BGP pools.
func (a *Agent) bgpSessionChanged(p bgp.Peer, up bool) {
	a.sessions.set(p, up)
	a.runner.Request()
}

// advertisedOf returns the addresses whose holder advertises them over
// BGP: those of BGP LoadBalancers with proxy forwarding, of which
// membership elects one host per address (passthrough ones are advertised
// by every selected host).
func advertisedOf(lbs []*v1alpha1.LoadBalancer) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, lb := range lbs {
		an := lb.Spec.Announce
		if an == nil || an.Mode != v1alpha1.AnnounceBGP || lb.Spec.Forwarding == v1alpha1.ForwardingPassthrough {
			continue
		}
		for _, a := range usableAddrs(lb) {
			out[a] = true
		}
	}
	return out
}
