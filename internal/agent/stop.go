package agent

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/membership"
)

// What a stopping agent leaves behind (see doc.go, "Stopping"): an agent
// that stops for a restart (a rolling update, a helm upgrade, a deleted
// Pod) while no other host takes its addresses leaves them, the nftables
// ruleset and conntrack in place, so that forwarding goes on while no
// agent runs, and the agent that starts next adopts them (adopt). One that
// another host takes over from hands over as it always did: it leaves the
// gossip, the other host takes the addresses, and it removes its own. One
// that stops for good (Config.ForGood) removes everything.

// stopTimeout bounds the apiserver requests that tell whether a stop is
// for good: a restart must not wait for an apiserver that does not answer.
const stopTimeout = 3 * time.Second

// stopPlan is what a stopping agent does with what it holds.
type stopPlan struct {
	// clean: remove every address and the ruleset, as agents always did.
	clean bool
	// release are the addresses another host takes over: removed once
	// this host has left the gossip.
	release []netip.Addr
	// keep are the addresses no other host would take: left in place, with
	// the ruleset, for the next agent.
	keep []netip.Addr
	// keepRoutes are the BGP routes no other host advertises: left at the
	// routers (graceful restart), with the ruleset, for the next agent.
	keepRoutes []netip.Prefix
	// handOver are the BGP routes of which this host is the elected
	// advertiser and another host is next: withdrawn after the others, once
	// that host had time to advertise them (whatever else the plan says).
	handOver []netip.Prefix
}

// handOverRoutes are the routes of elected (the addresses of which this
// host is the elected advertiser) that another host advertises once this
// one has left (successor).
func handOverRoutes(elected []netip.Addr, successor func(netip.Addr) string) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range elected {
		if successor(v) != "" {
			out = append(out, netip.PrefixFrom(v, v.BitLen()))
		}
	}
	return out
}

// planStop is pure: held are the addresses this host holds on its
// interface, routes those it advertises over BGP to routers that help
// with graceful restart (none when they do not), successor names the
// host that would take a held address over ("" none), advertiser one that
// advertises a route too or would ("" none), forGood asks whether this
// agent stops for good (called only when something would be kept; it may
// ask the apiserver).
func planStop(held, routes []netip.Addr, successor, advertiser func(netip.Addr) string, forGood func() bool) stopPlan {
	var p stopPlan
	for _, v := range held {
		if successor(v) != "" {
			p.release = append(p.release, v)
		} else {
			p.keep = append(p.keep, v)
		}
	}
	for _, v := range routes {
		if advertiser(v) == "" {
			p.keepRoutes = append(p.keepRoutes, netip.PrefixFrom(v, v.BitLen()))
		}
	}
	if len(p.keep)+len(p.keepRoutes) == 0 || forGood() {
		return stopPlan{clean: true}
	}
	return p
}

// gracefulRestarter is an Announcer whose routers may keep its routes
// while the agent restarts (*bgp.Speaker).
type gracefulRestarter interface {
	// GracefulRestart: some router negotiates graceful restart.
	GracefulRestart() bool
	// Keep leaves these routes at the routers when the announcer stops.
	Keep(prefixes []netip.Prefix)
	// Restarting starts the announcer as a restarting one, which
	// connects once it advertises want.
	Restarting(want []netip.Prefix)
}

// restarter returns the Announcer as a gracefulRestarter when some router
// negotiates graceful restart with it.
func (a *Agent) restarter() gracefulRestarter {
	if gr, ok := a.cfg.Announcer.(gracefulRestarter); ok && gr.GracefulRestart() {
		return gr
	}
	return nil
}

// successor is the host that would hold vip if this one stopped: another
// member's name, or "" without membership (a lone agent, or one whose
// addresses another program holds).
func (a *Agent) successor(vip netip.Addr) string {
	if a.cfg.Membership == nil {
		return ""
	}
	return a.cfg.Membership.Successor(vip, true)
}

// planStopNow decides, before the agent leaves the gossip, what it leaves
// behind.
func (a *Agent) planStopNow(logger klog.Logger) stopPlan {
	var held, routes []netip.Addr
	if p := a.owned.Load(); p != nil {
		held = *p
	}
	elected := map[netip.Addr]bool{}
	var announcers map[netip.Addr][]string
	if p := a.advertised.Load(); p != nil && a.restarter() != nil {
		routes = p.all
		for _, v := range p.elected {
			elected[v] = true
		}
		announcers = a.announcers()
	}
	advertiser := func(v netip.Addr) string {
		if elected[v] {
			return a.successor(v) // another host is elected once this one leaves
		}
		// Every selected host advertises it: another that does.
		for _, h := range announcers[v] {
			if h != a.cfg.Host {
				return h
			}
		}
		return ""
	}
	plan := planStop(held, routes, a.successor, advertiser, func() bool {
		if a.cfg.ForGood == nil {
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		forGood, why := a.cfg.ForGood(ctx)
		logger.Info("Stopping", "forGood", forGood, "reason", why)
		return forGood
	})
	if p := a.advertised.Load(); p != nil {
		plan.handOver = handOverRoutes(p.elected, a.successor)
	}
	return plan
}

// handingOver is an Announcer that can withdraw some routes after the
// others when it stops (*bgp.Speaker).
type handingOver interface {
	HandOver(prefixes []netip.Prefix)
}

// handOver tells the announcer which routes the next hosts advertise;
// before its context ends.
func (a *Agent) handOver(logger klog.Logger, plan stopPlan) {
	h, ok := a.cfg.Announcer.(handingOver)
	if !ok || len(plan.handOver) == 0 {
		return
	}
	logger.Info("Handing the routes of which this host is the elected advertiser over: the next hosts advertise them before this one withdraws them",
		"routes", plan.handOver)
	h.HandOver(plan.handOver)
}

// advertisedRoutes are the addresses of the routes given the announcer
// in the last sync: all, and those of which this host is the one elected
// advertiser (proxy forwarding; the others every selected host
// advertises).
type advertisedRoutes struct {
	all, elected []netip.Addr
}

// announcers reads from the LoadBalancers' status which hosts advertise
// each address over BGP, in one pass over the cache.
func (a *Agent) announcers() map[netip.Addr][]string {
	out := map[netip.Addr][]string{}
	for _, obj := range a.informer.GetStore().List() {
		lb, ok := obj.(*v1alpha1.LoadBalancer)
		if !ok {
			continue
		}
		for _, h := range lb.Status.Hosts {
			for _, s := range h.Announcing {
				if v, err := netip.ParseAddr(s); err == nil {
					out[v.Unmap()] = append(out[v.Unmap()], h.Name)
				}
			}
		}
	}
	return out
}

// alone reports whether host is the only one of hosts (an address's
// announcers).
func alone(hosts []string, host string) bool {
	return !slices.ContainsFunc(hosts, func(h string) bool { return h != host })
}

// keepRoutes tells the announcer which routes to leave at the routers
// when it stops; before its context ends.
func (a *Agent) keepRoutes(logger klog.Logger, plan stopPlan) {
	gr := a.restarter()
	if gr == nil || plan.clean || len(plan.keepRoutes) == 0 {
		return
	}
	logger.Info("Leaving the routes no other host advertises at the routers, which keep them while the next agent starts (BGP graceful restart)",
		"routes", plan.keepRoutes)
	gr.Keep(plan.keepRoutes)
}

// restartRoutes makes the announcer start as a restarting one when the
// LoadBalancers' status says this host advertised routes that no other
// host advertises (its predecessor's, which routers that help with
// graceful restart still hold): it connects once it advertises them
// again.
func (a *Agent) restartRoutes(logger klog.Logger) {
	gr := a.restarter()
	if gr == nil {
		return
	}
	var want []netip.Prefix
	for v, hosts := range a.announcers() {
		// Only the routers' stale routes matter: those of addresses
		// this host alone advertised.
		if slices.Contains(hosts, a.cfg.Host) && alone(hosts, a.cfg.Host) {
			want = append(want, netip.PrefixFrom(v, v.BitLen()))
		}
	}
	slices.SortFunc(want, func(x, y netip.Prefix) int { return x.Addr().Compare(y.Addr()) })
	if len(want) == 0 {
		return
	}
	logger.Info("This host advertised routes before this agent started: BGP restarts gracefully, connecting once they are advertised again", "routes", want)
	gr.Restarting(want)
}

// finish carries plan out once the agent's loops have ended.
func (a *Agent) finish(logger klog.Logger, plan stopPlan) {
	if plan.clean {
		a.cleanup(logger)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(plan.release) > 0 {
		if err := a.cfg.Addresses.Set(ctx, plan.keep); err != nil {
			logger.Error(err, "Cannot remove the virtual IPs other hosts took over")
		}
	}
	logger.Info("Agent stopped; rules and the addresses no other host takes left in place for the next agent",
		"kept", len(plan.keep), "handedOver", len(plan.release))
}

// adoptPresent reads the addresses a predecessor left on the interface
// (see finish). Until membership decides, the agent holds those that no
// other host holds (adopts): the first syncs must not remove what the
// predecessor kept for it. Their conntrack entries are live, not stale:
// they count as held already (see forgetGained).
func (a *Agent) adoptPresent(ctx context.Context) {
	present, err := a.cfg.Addresses.Present(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot read the virtual IPs on the interface; a predecessor's are not adopted")
		return
	}
	if len(present) == 0 {
		return
	}
	klog.FromContext(ctx).Info("Adopting the virtual IPs a predecessor left in place", "addresses", present)
	a.adopted = map[netip.Addr]bool{}
	a.held = map[netip.Addr]bool{}
	for _, v := range present {
		a.adopted[v], a.held[v] = true, true
	}
	a.owned.Store(&present)
}

// adopts reports whether this host keeps holding vip, which its
// predecessor left in place, although membership does not give it vip
// (yet): membership has not made this host Ready since the start, and no
// other host would hold vip. With an Owner but no membership, Owns alone
// decides. Used by sync only.
func (a *Agent) adopts(vip netip.Addr) bool {
	if !a.adopted[vip] || a.cfg.Membership == nil {
		return false
	}
	if a.cfg.Membership.Status().State == membership.StateReady {
		a.adopted = nil // membership decides from now on
		return false
	}
	return a.cfg.Membership.Successor(vip, false) == ""
}

// keepOwned records what this host holds on its interface after a sync,
// for planStopNow.
func (a *Agent) keepOwned(owned []netip.Addr) {
	c := slices.Clone(owned)
	a.owned.Store(&c)
}

// advertisedBefore reports whether the LoadBalancers' status says this
// host advertises some address over BGP: read at the start, it was its
// predecessor.
func (a *Agent) advertisedBefore() bool {
	for _, hosts := range a.announcers() {
		if slices.Contains(hosts, a.cfg.Host) {
			return true
		}
	}
	return false
}
