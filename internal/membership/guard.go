package membership

import (
	"context"
	"maps"
	"net/netip"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/layer2"
)

// guard watches the interface for split brains (see conflict.go) with a
// layer2.Guard: once per ConflictProbeInterval it probes each address this
// host holds, and it records every claim another station makes on the link
// to one of the virtual IPs. It acts on the decisions: yielding withdraws
// an address (a sync), defending announces the held ones again. Without
// IPv6 on the interface only IPv4 addresses are watched.
func (g *Gossip) guard(ctx context.Context, hooks Hooks, ifc netInterface) {
	logger := klog.FromContext(ctx)
	l2, err := layer2.OpenGuard(ifc.index, ifc.mac)
	if err != nil {
		g.noGuard()
		logger.Error(err, "Cannot watch for split brains", "interface", g.cfg.Interface)
		hooks.Sync(false) // what waited for its probe is held now
		return
	}
	defer func() { _ = l2.Close() }()
	if err := l2.WatchIPv6(g.cfg.Interface); err != nil {
		logger.Error(err, "Cannot watch IPv6 addresses for split brains", "interface", g.cfg.Interface)
		g.mu.Lock()
		g.probeV6 = false
		g.trackProbes()
		g.mu.Unlock()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	g.mu.Lock()
	g.listenSince = time.Now()
	g.mu.Unlock()
	wg.Go(func() { l2.Listen(ctx, g.claimed) })
	tick := time.NewTicker(g.cfg.ConflictProbeInterval)
	defer tick.Stop()
	// Probe rounds four times per spacing: a probe is late by a quarter
	// of it at most (probes.due allows for the tick's jitter).
	spacing := g.cfg.AddressProbeSpacing
	if spacing <= 0 {
		spacing = g.cfg.ConflictProbeInterval
	}
	// The probe ticker runs only while an address is being probed: a new
	// address to probe comes with a kick (an observation, a change of
	// owners), and the guard's tick looks once a ConflictProbeInterval too.
	probeTick := time.NewTicker(spacing / 4)
	defer probeTick.Stop()
	ticking := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			g.guardRound(ctx, l2, hooks)
		case <-probeTick.C:
		case <-g.probeKick:
		}
		g.probeRound(ctx, l2, hooks)
		g.mu.Lock()
		busy := g.probes.pending()
		g.mu.Unlock()
		switch {
		case busy && !ticking:
			probeTick.Reset(spacing / 4)
		case !busy && ticking:
			probeTick.Stop()
		}
		ticking = busy
	}
}

// noGuard records that the guard does not run: nothing is heard on the
// link, and nothing can be probed, so new addresses are held at once.
func (g *Gossip) noGuard() {
	g.mu.Lock()
	g.guardOff = true
	g.probes = nil
	g.mu.Unlock()
}

// trackProbes makes the probes follow the fresh addresses this host owns
// and can probe; g.mu is held.
func (g *Gossip) trackProbes() {
	if !g.probes.enabled() {
		return
	}
	var want []netip.Addr
	for v := range g.obs.Fresh {
		v = v.Unmap()
		if g.vips[v] && (v.Is4() || g.probeV6) && g.owner(v) == g.cfg.Name {
			want = append(want, v)
		}
	}
	g.probes.track(want)
}

// probeRound probes the fresh addresses that are due, holds those whose
// probes went unanswered (a sync), and reports the addresses in use.
func (g *Gossip) probeRound(ctx context.Context, l2 *layer2.Guard, hooks Hooks) {
	now := time.Now()
	g.mu.Lock()
	if !g.probes.enabled() {
		g.mu.Unlock()
		return
	}
	g.trackProbes()
	send, cleared := g.probes.due(now)
	inUse := g.probes.inUse(now)
	// Foreign stations claiming addresses this host holds: the split-brain
	// guard defends those (conflict.go); they are in use all the same.
	for _, cf := range g.conflicts.actions {
		if cf.Host == "" && cf.MAC != "" && cf.Action == ActionDefend && !g.probes.blocked(cf.VIP) {
			since := now
			if e := g.conflicts.seen[sightingKey{cf.VIP, cf.MAC}]; e != nil {
				since = e.first
			}
			inUse[cf.VIP] = InUse{VIP: cf.VIP, MAC: cf.MAC, Since: since, Announced: true}
		}
	}
	changes := g.probes.changes(inUse)
	g.mu.Unlock()

	if len(send) > 0 {
		l2.Probe(ctx, send)
	}
	logger := klog.FromContext(ctx)
	for _, u := range changes {
		switch {
		case u.Ended:
			logger.Info("Address no longer in use by another station", "address", u.VIP, "otherMAC", u.MAC)
		case u.Announced:
			logger.Info("Address conflict: a station that is no load-balancer host claims an address this host holds; defending it", "address", u.VIP, "otherMAC", u.MAC)
		default:
			logger.Info("Address conflict: a station that is no load-balancer host answers for a new address; not announcing it", "address", u.VIP, "otherMAC", u.MAC)
		}
		if hooks.InUse != nil {
			hooks.InUse(u)
		}
	}
	setInUse(len(inUse))
	if cleared {
		hooks.Sync(false)
	}
}

// claimed records a claim another station made on the link, when it is
// one of the virtual IPs.
func (g *Gossip) claimed(cl layer2.Claim) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.vips[cl.Addr] {
		return
	}
	s := sighting{VIP: cl.Addr, MAC: cl.MAC, Active: cl.Active, At: time.Now()}
	g.conflicts.observe(s)
	// Only an address being probed asks whose the MAC is: every ARP frame
	// for a held address passes here.
	if g.probes.enabled() && g.probes.state[s.VIP] != nil && s.MAC != "" && s.MAC != g.mac && hostsByMAC(g.macs, g.apiMACs)[s.MAC] == "" {
		g.probes.seen(s.VIP, s.MAC, s.At) // a station that is no load-balancer host
	}
	if s.Active && s.MAC != "" {
		g.heard[s.MAC] = s.At // its agent serves (see presence.go)
	}
}

// guardRound probes the held addresses and acts on the conflicts.
func (g *Gossip) guardRound(ctx context.Context, l2 *layer2.Guard, hooks Hooks) {
	logger := klog.FromContext(ctx)
	g.mu.Lock()
	var wanted, held, follow []netip.Addr
	for _, v := range g.obs.VIPs {
		v = v.Unmap()
		if (v.Is6() && !l2.WatchesIPv6()) || g.owner(v) != g.cfg.Name {
			continue
		}
		follow = append(follow, v)
		if g.probes.blocked(v) || g.releasing(v) {
			// Not held yet: its probes are probeRound's. Or being handed
			// over: the other host's claims are rightful.
			continue
		}
		wanted = append(wanted, v)
		if !g.suppressed[v] {
			held = append(held, v)
		}
	}
	view := peerView{self: g.cfg.Name, hostOf: hostsByMAC(g.macs, g.apiMACs), alive: map[string]bool{}}
	for name := range g.peers {
		view.alive[name] = true
	}
	actions, changes := g.conflicts.decide(time.Now(), wanted, view)
	suppressed := map[netip.Addr]bool{}
	defend := false
	for v, a := range actions {
		suppressed[v] = a == ActionYield
		defend = defend || a == ActionDefend
	}
	maps.DeleteFunc(suppressed, func(_ netip.Addr, yield bool) bool { return !yield })
	withdrawn := !maps.Equal(suppressed, g.suppressed)
	g.suppressed = suppressed
	g.mu.Unlock()

	// Hear the probes for the addresses this host yields or probes, too.
	if err := l2.Follow(follow); err != nil {
		logger.V(2).Info("Cannot join solicited-node groups", "err", err)
	}
	l2.Probe(ctx, held)
	for _, cf := range changes {
		recordConflict(cf)
		if cf.Action == ActionNone {
			logger.Info("Split brain resolved", "address", cf.VIP, "otherMAC", cf.MAC, "otherHost", cf.Host)
		} else {
			logger.Info("Split brain: another host answers for a virtual IP", "address", cf.VIP,
				"otherMAC", cf.MAC, "otherHost", cf.Host, "otherAgentActive", cf.Active, "action", cf.Action)
		}
		if hooks.Conflict != nil {
			hooks.Conflict(cf)
		}
	}
	if withdrawn {
		hooks.Sync(false)
	}
	if defend {
		hooks.Announce()
	}
	setConflicts(len(actions))
}
