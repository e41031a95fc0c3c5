package agent

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/bgp"
	"github.com/groundcloud/groundcloud/internal/dataplane"
	"github.com/groundcloud/groundcloud/internal/health"
	"github.com/groundcloud/groundcloud/internal/layer2"
	"github.com/groundcloud/groundcloud/internal/membership"
)

// Announcer advertises routes to BGP peers; *bgp.Speaker implements it.
type Announcer interface {
	Set(routes []bgp.Route)
	// Advertised returns those of routes that an established session
	// carries: what the routers hear from this host.
	Advertised(routes []bgp.Route) []bgp.Route
}

// announcing is how this host makes the addresses of a set of
// LoadBalancers known: which it may hold over ARP/NDP, and what it serves
// over BGP.
type announcing struct {
	// l2 are the addresses of L2 LoadBalancers whose host selector matches
	// this host: the only ones it may hold.
	l2 map[netip.Addr]bool
	// bgp are the BGP LoadBalancers whose selector matches this host.
	bgp []bgp.Service
	// bgpAddrs are the addresses of every BGP LoadBalancer, selected or not:
	// never held on an interface.
	bgpAddrs map[netip.Addr]bool
}

// announceOf splits lbs by how their addresses are announced, for a host
// with the given labels. A LoadBalancer whose selector cannot be read is
// served by no host (its controller manager writes only selectors it
// parsed, so this is a hand-written object).
func announceOf(lbs []*v1alpha1.LoadBalancer, host labels.Set) announcing {
	out := announcing{l2: map[netip.Addr]bool{}, bgpAddrs: map[netip.Addr]bool{}}
	for _, lb := range lbs {
		addrs := usableAddrs(lb)
		an := lb.Spec.Announce
		selected := selects(an, host)
		if an == nil || an.Mode != v1alpha1.AnnounceBGP {
			for _, a := range addrs {
				out.l2[a] = out.l2[a] || selected
			}
			continue
		}
		for _, a := range addrs {
			out.bgpAddrs[a] = true
		}
		if !selected || len(addrs) == 0 {
			continue
		}
		svc := bgp.Service{Addrs: addrs, ECMP: lb.Spec.Forwarding == v1alpha1.ForwardingPassthrough, Communities: an.Communities}
		if lp := an.LocalPreference; lp != nil && *lp >= 0 && *lp <= 1<<32-1 {
			v := uint32(*lp)
			svc.LocalPref = &v
		}
		out.bgp = append(out.bgp, svc)
	}
	return out
}

// toHold counts the addresses of vips that some load-balancer host must
// hold on its interface: those of L2 pools, selected by this host or not.
// BGP addresses are advertised, never held.
func (an announcing) toHold(vips []netip.Addr) int {
	n := 0
	for _, v := range vips {
		if _, l2 := an.l2[v]; l2 && !an.bgpAddrs[v] {
			n++
		}
	}
	return n
}

// onlyServed keeps of svcs the addresses that st forwards to a healthy
// backend: a host advertises a route for an address only while it can
// send that address's flows on (a new Service whose nodes have not yet
// passed a health check on this host would otherwise draw the router's
// flows into nothing, while other hosts serve them).
func onlyServed(svcs []bgp.Service, st dataplane.State) []bgp.Service {
	served := map[netip.Addr]bool{}
	for _, s := range st.Services {
		if slices.ContainsFunc(s.Backends, func(b dataplane.Backend) bool { return b.Healthy }) {
			for _, v := range s.VIPs {
				served[v] = true
			}
		}
	}
	var out []bgp.Service
	for _, svc := range svcs {
		addrs := slices.DeleteFunc(slices.Clone(svc.Addrs), func(a netip.Addr) bool { return !served[a] })
		if len(addrs) > 0 {
			svc.Addrs = addrs
			out = append(out, svc)
		}
	}
	return out
}

// selects reports whether the host selector of an announce matches host.
func selects(an *v1alpha1.Announce, host labels.Set) bool {
	if an == nil || an.HostSelector == "" {
		return true
	}
	sel, err := labels.Parse(an.HostSelector)
	return err == nil && sel.Matches(host)
}

func usableAddrs(lb *v1alpha1.LoadBalancer) []netip.Addr {
	var out []netip.Addr
	for _, s := range lb.Spec.Addresses {
		if a, err := netip.ParseAddr(s); err == nil && layer2.Usable(a.Unmap()) == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// routeAddrs returns the addresses of routes, sorted.
func routeAddrs(routes []bgp.Route) []netip.Addr {
	out := make([]netip.Addr, 0, len(routes))
	for _, r := range routes {
		out = append(out, r.Prefix.Addr())
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// ParseHostLabels reads --host-labels: "key=value,key2=value2".
func ParseHostLabels(s string) (labels.Set, error) {
	if strings.TrimSpace(s) == "" {
		return labels.Set{}, nil
	}
	set, err := labels.ConvertSelectorToLabelsMap(s)
	if err != nil {
		return nil, fmt.Errorf("--host-labels: %w", err)
	}
	return set, nil
}

// labels returns this host's labels: the fixed ones, or its Node's as the
// agent's Node informer holds them (backends.Transform keeps labels); none
// while that Node is not seen.
func (a *Agent) labels() labels.Set {
	if a.cfg.HostLabels != nil {
		return a.cfg.HostLabels.Labels()
	}
	n, err := a.nodeList.Get(a.cfg.Host)
	if err != nil || n.Labels == nil {
		return labels.Set{}
	}
	return labels.Set(n.Labels)
}

// nodesReachable: some node answers its health check, or there is none
// to check (unknown is no evidence).
func (a *Agent) nodesReachable(plan Plan) bool {
	if len(plan.Targets) == 0 {
		return true
	}
	for _, t := range plan.Targets {
		if a.checker.State(t) != health.Unhealthy {
			return true
		}
	}
	return false
}

// routes are the routes this host should advertise: none while it does
// not serve (its data plane is not programmed, or no node answers), so
// that routers send the traffic to the hosts that do, and none without an
// announcer.
func (a *Agent) routes(an announcing, serving bool) []bgp.Route {
	if a.cfg.Announcer == nil {
		return nil
	}
	return bgp.Desired(an.bgp, serving, a.cfg.Owner.Owns)
}

// advertise gives the announcer routes and returns the addresses of those
// an established session carries, for the status. A session that comes or
// goes asks for a sync, which reports again.
func (a *Agent) advertise(routes []bgp.Route) []netip.Addr {
	if a.cfg.Announcer == nil {
		return nil
	}
	a.cfg.Announcer.Set(routes)
	return routeAddrs(a.cfg.Announcer.Advertised(routes))
}

// held returns the addresses of routes that this host advertises as their
// one elected holder, those of BGP LoadBalancers with proxy forwarding:
// their flows keep conntrack state on this host alone, as an L2 address's
// do on the host that holds it (see forgetGained). The addresses of
// passthrough (ECMP) LoadBalancers, which every host advertises, are not
// held.
func (an announcing) held(routes []bgp.Route) []netip.Addr {
	proxy := map[netip.Addr]bool{}
	for _, svc := range an.bgp {
		if !svc.ECMP {
			for _, a := range svc.Addrs {
				proxy[a] = true
			}
		}
	}
	var out []netip.Addr
	for _, r := range routes {
		if a := r.Prefix.Addr(); proxy[a] {
			out = append(out, a)
		}
	}
	return out
}

// groupsOf returns the host group (membership.Group of its selector) of
// each address of a LoadBalancer that only some hosts serve and whose
// holder memberlist elects (L2, and BGP with proxy forwarding), and the
// groups whose selector matches this host.
func groupsOf(lbs []*v1alpha1.LoadBalancer, host labels.Set) (map[netip.Addr]string, []string) {
	groups := map[netip.Addr]string{}
	mine := map[string]bool{}
	for _, lb := range lbs {
		an := lb.Spec.Announce
		if an == nil || an.HostSelector == "" || an.Mode == v1alpha1.AnnounceBGP && lb.Spec.Forwarding == v1alpha1.ForwardingPassthrough {
			continue
		}
		g := membership.Group(an.HostSelector)
		for _, a := range usableAddrs(lb) {
			groups[a] = g
		}
		if selects(an, host) {
			mine[g] = true
		}
	}
	return groups, slices.Sorted(maps.Keys(mine))
}

// onLink returns the addresses of vips that are announced on the link
// (L2): membership's split-brain guard probes those it holds, and must
// not probe BGP addresses, which no host answers for on the link.
func onLink(vips []netip.Addr, lbs []*v1alpha1.LoadBalancer) []netip.Addr {
	bgpAddrs := map[netip.Addr]bool{}
	for _, lb := range lbs {
		if an := lb.Spec.Announce; an != nil && an.Mode == v1alpha1.AnnounceBGP {
			for _, a := range usableAddrs(lb) {
				bgpAddrs[a] = true
			}
		}
	}
	out := make([]netip.Addr, 0, len(vips))
	for _, v := range vips {
		if !bgpAddrs[v] {
			out = append(out, v)
		}
	}
	return out
}
